"""Level files: the native format, Boxoban ASCII, headers, folders, and bad input."""

from __future__ import annotations

import pytest

from sgps.domains import get_domain, read_levels, write_levels
from sgps.domains.levels import format_level
from sgps.errors import LevelFormatError

TSP_LINE = "3|3|01|00|00|00|02|00|00|00|03"
CRAFT_CELLS = "00|26|02|26|11|26"  # agent, workshop 1, wood on a 2x3 board
BOULDER_CELLS = "00|01|05|02|18|07"  # agent, diamond, dirt, wall, closed exit on a 2x3 board


def write(path, text):
    path.write_text(text)
    return path


def test_native_file_with_comments_and_domain_argument(tmp_path):
    file = write(tmp_path / "levels.txt", f"; a comment\n\n{TSP_LINE}\n;another\n{TSP_LINE}\n")
    levels = read_levels(file, "tsp")
    assert len(levels) == 2
    assert [level.line for level in levels.levels] == [3, 5]
    assert [level.name for level in levels.levels] == ["levels:0", "levels:1"]
    assert format_level(levels.domain, levels.levels[0].state) == TSP_LINE


def test_header_names_the_domain_and_round_trips(tmp_path):
    domain = get_domain("boxworld")
    states = [domain.generate(seed) for seed in range(3)]
    file = tmp_path / "box.txt"
    write_levels(file, domain, states, variant="standard", seed=0, params={"size": 20})
    levels = read_levels(file)
    assert levels.domain.name == "boxworld"
    assert levels.states() == states
    assert levels.metadata["seed"] == 0 and levels.metadata["params"] == {"size": 20}
    assert file.read_text().splitlines()[0].startswith("; sgps domain=boxworld variant=standard seed=0 count=3")


def test_folder_of_files_is_read_in_name_order(tmp_path):
    write(tmp_path / "b.txt", TSP_LINE + "\n")
    write(tmp_path / "a.txt", TSP_LINE + "\n" + TSP_LINE + "\n")
    write(tmp_path / "notes.md", "not a level file")
    levels = read_levels(tmp_path, "tsp")
    assert [level.name for level in levels.levels] == ["a:0", "a:1", "b:0"]


def test_boxoban_ascii_is_read_as_sokoban(shared):
    levels = read_levels(shared / "data" / "boxoban" / "hard" / "000.txt")
    assert levels.domain.name == "sokoban" and len(levels) == 1000
    assert levels.levels[7].name == "000:7" and levels.levels[7].line == 7 * 12 + 1
    assert all(len(levels.domain.boxes(state)) == 4 for state in levels.states()[:50])


def test_boxoban_folder(shared):
    levels = read_levels(shared / "data" / "boxoban" / "unfiltered" / "train")
    assert len(levels) == 10_000 and levels.levels[-1].name == "009:999"


BOXOBAN_9_ROWS = "; 0\n" + "##########\n" + "#@ $  . ##\n" + "#        #\n" * 6 + "##########\n"

BAD_INPUTS = [
    ("truncated line", "3|3|01|00|00|00\n", "tsp", 1, "expected 9 cells for a 3x3 level, found 4"),
    ("wrong cell count", TSP_LINE + "|00\n", "tsp", 1, "expected 9 cells"),
    ("unknown cell code", "3|3|01|00|00|00|09|00|00|00|03\n", "tsp", 1, "cell 4 (row 1, col 1) has code 9"),
    ("non-integer field", "3|3|01|00|x0|00|02|00|00|00|03\n", "tsp", 1, "field 5 ('x0') is not an integer"),
    ("empty field", "3|3|01||00|00|02|00|00|00|03\n", "tsp", 1, "field 4 is empty"),
    ("bad size header", "0|3|01|00|00\n", "tsp", 1, "rows=0 cols=3 must both be positive"),
    ("missing header field", "14|14|" + "|".join(["26"] * 196) + "\n", "sokoban", 1, "not a sokoban cell code"),
    ("two agents", "1|3|01|01|03\n", "tsp", 1, "exactly 1 agent"),
    ("empty file", "", "tsp", None, "holds no levels"),
    ("only comments", "; nothing here\n\n", "tsp", None, "holds no levels"),
    ("boxoban block with 9 rows", BOXOBAN_9_ROWS, None, 1, "has 9 rows; expected 10"),
    ("bad sgps header", "; sgps domain\n" + TSP_LINE + "\n", None, 1, "bad sgps header"),
    ("unknown domain in header", "; sgps domain=chess count=1\n" + TSP_LINE + "\n", None, 1, "unknown domain 'chess'"),
    ("header contradicts --domain", "; sgps domain=tsp count=1\n" + TSP_LINE + "\n", "boxworld", 1, "for domain tsp"),
    ("no domain anywhere", TSP_LINE + "\n", None, None, "cannot tell which domain"),
    (
        "craftworld goal out of range",
        f"2|3|7|{CRAFT_CELLS}\n",
        "craftworld",
        1,
        "goal field is 7, which is not an item",
    ),
    ("craftworld goal beyond the codes", f"2|3|26|{CRAFT_CELLS}\n", "craftworld", 1, "not an item code (8-25)"),
    ("craftworld code 27", "2|3|16|00|27|02|26|11|26\n", "craftworld", 1, "has code 27, which is not a craftworld"),
    ("craftworld without goal field", f"2|3|{CRAFT_CELLS}\n", "craftworld", 1, "expected 6 cells"),
    ("boulderdash gems above diamonds", f"2|3|2|{BOULDER_CELLS}\n", "boulderdash", 1, "gems_required is 2 but"),
    ("boulderdash negative gems", f"2|3|-1|{BOULDER_CELLS}\n", "boulderdash", 1, "gems_required is -1"),
    ("boulderdash code 50", "2|3|1|00|50|05|02|18|07\n", "boulderdash", 1, "has code 50, which is not a boulderdash"),
    (
        "boulderdash bad parameter",
        f"2|3|1|{BOULDER_CELLS}|1|140|300|160000|0|1|1|0\n",
        "boulderdash",
        1,
        "parameter field blob_chance is 300; it must be between 0 and 255",
    ),
    ("boulderdash two agents", "2|3|1|00|00|05|02|18|07\n", "boulderdash", 1, "exactly 1 agent"),
]


@pytest.mark.parametrize(
    ("text", "domain", "line", "message"), [case[1:] for case in BAD_INPUTS], ids=[case[0] for case in BAD_INPUTS]
)
def test_bad_input_names_file_line_and_problem(tmp_path, text, domain, line, message):
    file = write(tmp_path / "bad.txt", text)
    with pytest.raises(LevelFormatError) as caught:
        read_levels(file, domain)
    error = caught.value
    assert message in str(error)
    assert error.path == str(file) and error.line == line
    assert str(error).startswith(f"{file}:{line}:" if line else f"{file}:")


def test_bad_line_deep_in_file_reports_its_line(tmp_path):
    file = write(tmp_path / "bad.txt", f"{TSP_LINE}\n; c\n{TSP_LINE}\n3|3|01\n")
    with pytest.raises(LevelFormatError, match=r"bad.txt:4: expected 9 cells"):
        read_levels(file, "tsp")


def test_missing_file_and_undecodable_file(tmp_path):
    with pytest.raises(LevelFormatError, match="no such file or folder"):
        read_levels(tmp_path / "absent.txt", "tsp")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(TSP_LINE.encode() + b"\n\xff\xfe\n")
    with pytest.raises(LevelFormatError, match=r"binary.txt:2: not a text level file"):
        read_levels(binary, "tsp")
    folder = tmp_path / "empty"
    folder.mkdir()
    with pytest.raises(LevelFormatError, match=r"holds no \*.txt level files"):
        read_levels(folder, "tsp")


def test_boxoban_bad_character_and_row_width(tmp_path):
    rows = ["##########"] + ["#@ $ . x #"] + ["#        #"] * 7 + ["##########"]
    file = write(tmp_path / "x.txt", "; 3\n" + "\n".join(rows) + "\n")
    with pytest.raises(LevelFormatError, match=r"x.txt:3: unknown Sokoban character 'x'"):
        read_levels(file)
    rows[1] = "#@ $  .#"
    write(file, "; 3\n" + "\n".join(rows) + "\n")
    with pytest.raises(LevelFormatError, match="row 1 of Boxoban level '; 3' has 8 characters"):
        read_levels(file)


@pytest.mark.parametrize(
    ("name", "line"), [("craftworld", f"2|3|16|{CRAFT_CELLS}"), ("boulderdash", f"2|3|1|{BOULDER_CELLS}")]
)
def test_three_field_headers_round_trip(tmp_path, name, line):
    domain = get_domain(name)
    state = read_levels(write(tmp_path / "one.txt", line + "\n"), name).states()[0]
    assert format_level(domain, state) == line
    out = tmp_path / "out.txt"
    write_levels(out, domain, [state])
    assert read_levels(out).states() == [state]


@pytest.mark.parametrize("name", ["tsp", "craftworld", "boulderdash", "boxworld", "sokoban"])
def test_fields_padded_with_blanks_read_as_the_official_loaders_read_them(tmp_path, name):
    """The reference simulators split a line at '|' and convert each field with std::stoi, which
    skips leading blanks (and stops at trailing ones): a padded field is the same number there and
    here. Signs other than '-', '_' separators and other scripts' digits stay refused."""
    domain = get_domain(name)
    state = domain.generate(7)
    padded = "|".join(f" {field}\t " for field in format_level(domain, state).split("|"))
    assert read_levels(write(tmp_path / "padded.txt", padded + "\n"), name).states() == [state]
    for bad in ("+", "_"):
        first, rest = format_level(domain, state).split("|", 1)
        with pytest.raises(LevelFormatError, match="not an integer in ASCII digits"):
            read_levels(write(tmp_path / "bad.txt", f"{bad}{first}|{rest}\n"), name)
