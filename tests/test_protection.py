"""Archives, comparisons and forks as safe as run folders (docs/robustness.md).

Each case failed before its change: a `RecursionError` traceback for a deeply nested
document, an output written inside an archive or comparison folder, or one made inside
what the command reads.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.errors import ConfigError
from sgps.runs.archive import build_new_folder

DEEP = 100_000


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("sgps: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def levels(tmp_path: Path) -> Path:
    domain = get_domain("tsp")
    path = tmp_path / "t.txt"
    write_levels(path, domain, [domain.generate(seed) for seed in range(10)])
    return path


# 1. Bounded parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[" * DEEP, '{"a":' * DEEP, "[" * 65 + "]" * 65])
def test_a_deeply_nested_archive_index_is_refused_in_one_line(tmp_path: Path, capsys, text: str) -> None:
    archive = tmp_path / "A"
    archive.mkdir()
    (archive / "archive.json").write_text(text)
    assert main(["unpack", str(archive), "--out", str(tmp_path / "X")]) == 2
    assert "archive.json" in one_error(capsys)
    assert not (tmp_path / "X").exists()


@pytest.mark.parametrize("text", ["x = " + "[" * DEEP, "x = " + "[" * 70 + "]" * 70, "a" + ".a" * 100 + " = 1",
                                  "x = " + "{a = " * 70 + "1" + "}" * 70])  # fmt: skip
def test_a_deeply_nested_config_is_refused_in_one_line(tmp_path: Path, levels: Path, capsys, text: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text)
    argv = ["train", "--problems", str(levels), "--out", str(tmp_path / "R"), "--config", str(config), "--quiet"]
    assert main(argv) == 2
    assert "c.toml" in one_error(capsys)
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("params", ["[" * DEEP, "[" * 70 + "]" * 70, '{"a":' * DEEP])
def test_a_deeply_nested_level_header_is_refused_in_one_line(tmp_path: Path, capsys, params: str) -> None:
    file = tmp_path / "l.txt"
    file.write_text(f"; sgps domain=tsp params={params}\n")
    assert main(["show", str(file)]) == 2
    assert "l.txt" in one_error(capsys)


def test_documents_of_ordinary_depth_still_parse() -> None:
    from sgps.fileio import DocumentLimitError, parse_json, parse_toml_text

    assert parse_json("[" * 64 + "]" * 64) is not None
    assert parse_json('["[[[[", {"a": "]]]"}]') == ["[[[[", {"a": "]]]"}]
    assert parse_toml_text('x = "[[[[" # [[[[\ny = [[1], {a = [2]}]\n') == {"x": "[[[[", "y": [[1], {"a": [2]}]}
    with pytest.raises(DocumentLimitError):
        parse_json("[1]", max_bytes=2)


# 2. Signals -------------------------------------------------------------------------------------


def test_sighup_stops_a_run_like_sigterm(tmp_path: Path, levels: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    domain = get_domain("tsp")
    write_levels(levels, domain, [domain.generate(seed) for seed in range(200)])
    run = tmp_path / "R"
    argv = [sys.executable, "-m", "sgps", "train", "--problems", str(levels), "--out", str(run), "--preset", "tiny",
            "--device", "cpu", "--workers", "1"]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (run / "log.txt").exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        child.send_signal(signal.SIGHUP)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 129, err.decode()
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert lines[-1].endswith("sgps: stopped by SIGHUP") and "Traceback" not in err.decode(), err.decode()


# 3. Nothing made inside what it reads -------------------------------------------------------------


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A finished tiny run, its level file and its archive."""
    folder = tmp_path_factory.mktemp("packed")
    domain = get_domain("tsp")
    write_levels(folder / "t.txt", domain, [domain.generate(seed) for seed in range(10)])
    run = folder / "run"
    assert main(["train", "--problems", str(folder / "t.txt"), "--out", str(run), "--preset", "tiny", "--quiet",
                 "--device", "cpu", "--max-iterations", "1"]) == 0  # fmt: skip
    assert main(["pack", str(run), "--out", str(folder / "A"), "--problems", str(folder / "t.txt")]) == 0
    return run, folder / "t.txt", folder / "A"


def test_unpack_into_the_archive_is_refused_through_links_too(packed, tmp_path: Path, capsys) -> None:
    _, _, archive = packed
    link = tmp_path / "link"
    link.symlink_to(archive)
    for out in (archive / "R", link / "R", tmp_path / "x" / ".." / "link" / "R"):
        capsys.readouterr()
        assert main(["unpack", str(archive), "--out", str(out)]) == 2
        assert "inside" in one_error(capsys)
        assert not (archive / "R").exists()


def test_fork_into_the_run_through_a_link_is_refused(packed, tmp_path: Path, capsys) -> None:
    run, _, _ = packed
    link = tmp_path / "link"
    link.symlink_to(run)
    capsys.readouterr()
    assert main(["fork", str(run), "--out", str(link / "F")]) == 2
    assert "inside" in one_error(capsys)
    assert not (run / "F").exists()


def test_pack_over_a_link_to_an_archive_leaves_the_link(packed, tmp_path: Path, capsys) -> None:
    run, problems, archive = packed
    link = tmp_path / "link"
    link.symlink_to(archive)
    capsys.readouterr()
    assert main(["pack", str(run), "--out", str(link), "--problems", str(problems), "--overwrite"]) == 2
    assert "symbolic link" in one_error(capsys)
    assert link.is_symlink() and (archive / "archive.json").is_file()


def test_a_failed_new_folder_is_named_as_the_user_gave_it_not_as_its_temporary_folder(tmp_path):
    """`unpack` and `fork` fill a temporary folder renamed at the end: what goes wrong names `--out`."""
    out = tmp_path / "new"

    def fails_naming_a_file(building: Path) -> None:
        raise ConfigError(f"{building / 'config.toml'}: bad")

    def fails_opening_a_file(building: Path) -> None:
        (building / "missing" / "file").read_text()

    with pytest.raises(ConfigError, match=re.escape(f"{out / 'config.toml'}: bad")):
        build_new_folder(out, fails_naming_a_file, "unpack")
    with pytest.raises(FileNotFoundError) as raised:
        build_new_folder(out, fails_opening_a_file, "fork")
    assert raised.value.filename == str(out / "missing" / "file")
    assert list(tmp_path.iterdir()) == []


# 2. Every folder sgps makes is written only by its own command -------------------------------------


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (links not followed) and its bytes: what a refused command must leave as it was."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def comparison(tmp_path: Path) -> Path:
    """A folder with what marks a comparison (`sgps compare` wrote it): enough for the output checks."""
    folder = tmp_path / "cmp"
    (folder / "problems").mkdir(parents=True)
    (folder / "compare.toml").write_text("[generate]\n")
    (folder / "problems" / "train.txt").write_text("levels\n")
    return folder


def test_report_never_writes_through_a_link_onto_the_comparisons_files(comparison: Path, capsys) -> None:
    """`ln -s compare.toml cmp/curves.png; sgps report cmp` once replaced compare.toml with a PNG."""
    (comparison / "curves.png").symlink_to("compare.toml")
    before = snapshot(comparison)
    assert main(["report", str(comparison)]) == 2
    assert "symbolic link" in one_error(capsys)
    assert snapshot(comparison) == before


def test_generate_never_writes_over_a_comparison_or_into_an_archive(packed, comparison, tmp_path, capsys) -> None:
    _, _, archive = packed
    link = tmp_path / "link-to-archive"
    link.symlink_to(archive)
    archived, compared = snapshot(archive), snapshot(comparison)
    targets = [comparison / "compare.toml", comparison / "problems" / "train.txt", archive / "archive.json",
               archive / "new.txt", link / "archive.json", link / "new.txt"]  # fmt: skip
    targets += sorted(archive.glob("part-*"))
    for target in targets:
        assert main(["generate", "tsp", "--count", "2", "--out", str(target)]) == 2, target
        assert re.search(r"is a file of the comparison folder|lies in the archive", one_error(capsys)), target
    assert snapshot(archive) == archived and snapshot(comparison) == compared
    assert not (archive / "new.txt").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["train", "--problems", "LEVELS", "--out", "ARCHIVE", "--preset", "tiny", "--quiet"],
        ["train", "--problems", "LEVELS", "--out", "ARCHIVE", "--preset", "tiny", "--quiet", "--overwrite"],
        ["train", "--problems", "LEVELS", "--out", "NEW", "--preset", "tiny", "--tensorboard", "ARCHIVE"],
        ["demo", "--out", "ARCHIVE"],
        ["test", "RUN", "--problems", "LEVELS", "--gif", "ARCHIVE"],
        ["test", "RUN", "--problems", "LEVELS", "--gif", "ARCHIVE/gifs"],
        ["unpack", "ARCHIVE", "--out", "ARCHIVE/inside"],
    ],
    ids=["train", "train-overwrite", "tensorboard", "demo", "test-gif", "test-gif-inside", "unpack"],
)
def test_nothing_but_pack_writes_into_an_archive(packed, tmp_path, capsys, command) -> None:
    """Each of these once wrote into the archive, after which `pack --overwrite` onto it was refused."""
    run, levels, archive = packed
    names = {"LEVELS": str(levels), "ARCHIVE": str(archive), "RUN": str(run), "NEW": str(tmp_path / "new")}
    argv = [names.get(word.split("/")[0], word) + word[len(word.split("/")[0]) :] for word in command]
    before = snapshot(archive)
    capsys.readouterr()
    assert main(argv) == 2
    assert re.search(r"(?i)archive", one_error(capsys))
    assert snapshot(archive) == before and not (tmp_path / "new").exists()
    assert main(["pack", str(run), "--out", str(archive), "--problems", str(levels), "--overwrite"]) == 0


def test_overwrite_replaces_only_the_commands_own_kind_of_folder(packed, comparison, tmp_path, capsys) -> None:
    run, levels, _ = packed
    other_run = tmp_path / "other-run"  # what marks a run folder (`sgps train` made it)
    (other_run / "checkpoints").mkdir(parents=True)
    (other_run / "config.toml").write_text("[run]\n")
    ran, other = snapshot(run), snapshot(other_run)
    cases = [
        (["train", "--problems", str(levels), "--out", str(comparison), "--preset", "tiny", "--overwrite"],
         "is a comparison folder"),
        (["pack", str(run), "--out", str(run), "--problems", str(levels), "--overwrite"], "is also the PATH input"),
        (["test", str(run), "--problems", str(levels), "--gif", str(other_run)], "is a run folder"),
        (["compare", str(levels), "--out", str(run)], "is a run folder"),
        (["demo", "--out", str(comparison)], "is a comparison folder"),
    ]  # fmt: skip
    compared = snapshot(comparison)
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert message in one_error(capsys), argv
    assert snapshot(run) == ran and snapshot(other_run) == other and snapshot(comparison) == compared


def test_a_run_may_lie_in_a_comparison_but_nothing_else_sgps_makes_may(packed, comparison, tmp_path, capsys) -> None:
    run, levels, archive = packed
    other = tmp_path / "other"
    assert main(["pack", str(run), "--out", str(comparison / "A"), "--problems", str(levels)]) == 2
    assert f"lies inside the comparison folder {comparison.resolve()}" in one_error(capsys)
    assert main(["unpack", str(archive), "--out", str(run / "R")]) == 2
    assert f"lies inside the run folder {run.resolve()}" in one_error(capsys)
    assert main(["unpack", str(archive), "--out", str(comparison / "runs" / "R")]) == 0  # a run of the comparison
    assert main(["unpack", str(archive), "--out", str(other)]) == 0


def test_a_gif_that_cannot_be_written_is_refused_before_the_test_searches(packed, tmp_path, capsys) -> None:
    """`sgps test --gif DIR` where a level's GIF would go is a folder: refused after the search, with the
    record already written; now before anything."""
    run, levels, _ = packed
    from sgps.domains import read_levels

    first = read_levels(levels).levels[0]
    gifs = tmp_path / "gifs"
    (gifs / f"{first.name.replace(':', '-')}.gif").mkdir(parents=True)
    ran = snapshot(run)
    assert main(["test", str(run), "--problems", str(levels), "--gif", str(gifs)]) == 2
    assert "a folder stands there" in one_error(capsys)
    assert snapshot(run) == ran
