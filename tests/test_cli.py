"""The command line: generate, show, solve, demo, and one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from sgps.cli import DEMO_CONFIG, main
from sgps.domains import read_levels
from sgps.experiments import read_plan
from sgps.experiments.summary import terminal_summary


def test_generate_show_solve(tmp_path, capsys):
    out = tmp_path / "tsp.txt"
    assert main(["generate", "tsp", "--variant", "hard", "--count", "3", "--seed", "5", "--out", str(out)]) == 0
    assert "wrote 3 tsp levels (hard, seeds 5-7)" in capsys.readouterr().out
    assert len(read_levels(out)) == 3

    png = tmp_path / "level.png"
    assert main(["show", str(out), "--index", "2", "--png", str(png)]) == 0
    shown = capsys.readouterr().out
    assert "tsp:2: tsp 10x10, 6 cities (line 4 of" in shown and "visited 0/6 cities" in shown
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    assert main(["solve", str(out), "--index", "1"]) == 0
    solved = capsys.readouterr().out
    assert "optimal length:" in solved and "actions: " in solved


def test_generate_with_params_is_recorded_in_the_header(tmp_path, capsys):
    out = tmp_path / "b.txt"
    assert (
        main(
            [
                "generate",
                "boxworld",
                "--count",
                "2",
                "--param",
                "size=12",
                "--param",
                "distractors=1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    header = out.read_text().splitlines()[0]
    assert '"distractors":1' in header and '"size":12' in header and "seed=0" in header
    assert read_levels(out).states()[0].board.rows == 12


def test_solve_reports_the_state_cap(tmp_path, capsys):
    out = tmp_path / "s.txt"
    main(["generate", "sokoban", "--count", "1", "--out", str(out)])
    assert main(["solve", str(out), "--max-states", "10"]) == 1
    assert "not solved: state cap reached" in capsys.readouterr().out


TINY_COMPARISON = """
[compare]
domain = "tsp"
algorithms = ["phs-sg", "phs"]
seeds = [0]
preset = "tiny"

[problems.train]
variant = "standard"
seed = 0
count = 20
validation = 4

[tests.test]
variant = "standard"
seed = 9000
count = 4
budget = 500

[train.bootstrap]
max_iterations = 1
initial_budget = 250
"""


def test_demo_draws_levels_then_runs_and_summarises_a_comparison(tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_COMPARISON)
    assert main(["demo", "--out", str(tmp_path / "demo"), "--count", "2", "--config", str(config)]) == 0
    for name in ("tsp", "boxworld", "sokoban", "craftworld", "boulderdash"):
        assert len(read_levels(tmp_path / "demo" / f"{name}.txt")) == 2
        assert (tmp_path / "demo" / f"{name}-solution.png").stat().st_size > 100
    out = capsys.readouterr().out
    assert "solved optimally" in out
    folder = tmp_path / "demo" / "compare"
    assert (folder / "curves.png").stat().st_size > 1000
    assert f"learning curves: {folder / 'curves.png'}" in out
    table = out[out.index("\nalgorithm ") + 1 :].splitlines()
    assert table[1].startswith("PHS*(π^SG)") and table[2].startswith("PHS*(π)")
    assert " of 16 " in table[1] and "of 4" in table[1]  # 20 problems, 4 held out; 4 test problems


#: The demo's comparison in small, π^SG's run alone (the method with the most to go wrong under load:
#: clustering, four networks): bounded by expansions, the clock only a guard.
TINY_BUDGETED = TINY_COMPARISON.replace(
    "max_iterations = 1\n", "max_iterations = 50\nmax_expansions = 6000\ntime_limit_minutes = 30\n"
).replace('algorithms = ["phs-sg", "phs"]', 'algorithms = ["phs-sg"]')


def without_column(lines: list[str], header: str, split: str) -> list[str]:
    """`lines` of a table (cells separated by the regular expression `split`) without the column `header`."""
    rows = [re.split(split, line) for line in lines]
    index = rows[0].index(header)
    return [" ".join(cell for i, cell in enumerate(row) if i != index) for row in rows]


def test_the_demo_comparison_gives_the_same_table_on_a_loaded_machine(tmp_path):
    """Expansions decide: a CPU-bound process beside π^SG's run of the demo's comparison changes its minutes,
    nothing else."""
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_BUDGETED)
    tables, trainings, test_tables = [], [], []
    for loaded in (False, True):
        out = tmp_path / ("loaded" if loaded else "idle")
        load = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if loaded else None
        try:
            # One thread, as each of the demo's two runs gets on 2 cores: a lone run would take both, and two
            # threads beside the busy loop and another test worker wait on each other (57 s in a CI run, not 36).
            assert main(["compare", str(config), "--out", str(out), "--threads", "1"]) == 0
        finally:
            if load is not None:
                load.kill()
                load.wait()
        assert main(["report", str(out)]) == 0
        tables.append(without_column(terminal_summary(out).splitlines(), "minutes", r"\s{2,}"))
        report = (out / "report.md").read_text()
        training = [line for line in report[report.index("## Training") :].splitlines() if line.startswith("|")]
        trainings.append(without_column(training, "hours", r"\s*\|\s*"))
        test_tables.append(report[report.index("## Test set") : report.index("## Training")])
    assert tables[0] == tables[1] and len(tables[0]) == 2
    assert test_tables[0] == test_tables[1] and test_tables[0].count("|") > 20
    assert trainings[0] == trainings[1]
    assert "expansion limit" in " ".join(trainings[0]) and "‡" not in " ".join(tables[0])


def test_the_packaged_demo_comparison_is_a_valid_config():
    plan = read_plan(DEMO_CONFIG)
    assert plan.variants == ("phs-sg", "phs") and plan.domain == "tsp"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "{tmp}/absent.txt", "--domain", "tsp"], "absent.txt: no such file or folder"),
        (["show", "{tmp}/bad.txt", "--domain", "tsp"], "bad.txt:2: expected 9 cells for a 3x3 level, found 0"),
        (["show", "{tmp}/bad.txt"], "cannot tell which domain"),
        (["show", "{tmp}/good.txt", "--domain", "tsp", "--index", "5"], "has 1 levels; --index 5 is out of range"),
        (["generate", "chess", "--out", "{tmp}/x.txt"], "unknown domain 'chess'"),
        (["generate", "tsp", "--param", "cities", "--out", "{tmp}/x.txt"], "--param expects KEY=VALUE"),
        (
            ["generate", "tsp", "--param", "colour=red", "--out", "{tmp}/x.txt"],
            "unknown tsp generator parameter 'colour'",
        ),
        (["--plugin", "no_such_module", "show", "{tmp}/good.txt"], "cannot import plugin module 'no_such_module'"),
        (["--plugin", "", "show", "{tmp}/good.txt"], "--plugin needs a module name"),
        (["--plugin", ".relative", "show", "{tmp}/good.txt"], "cannot import plugin module '.relative'"),
        # options that do not apply are refused, never ignored
        (["solve", "{tmp}/good.txt", "--domain", "tsp", "--budget", "10"], "--budget applies only with --algorithm"),
        (["solve", "{tmp}/good.txt", "--domain", "tsp", "--epsilon", "0.1"], "--epsilon applies only with --algorithm"),
        (["solve", "{tmp}/good.txt", "--domain", "tsp", "--algorithm", "phs", "--weight", "2"],
         "--weight applies only with --algorithm wastar"),
        (["solve", "{tmp}/good.txt", "--domain", "tsp", "--algorithm", "phs", "--method", "bfs"],
         "--method is an option of the exact solver"),
        (["solve", "{tmp}/good.txt", "--domain", "tsp", "--algorithm", "bfs", "--max-states", "9"],
         "--max-states is an option of the exact solver"),
        (["test", "{tmp}", "--problems", "{tmp}/good.txt", "--gif-limit", "3"], "--gif-limit applies only with --gif"),
        (["test", "{tmp}", "--problems", "{tmp}/good.txt", "--executor", "ray", "--workers", "2"],
         "--workers applies only with --executor local"),
        (["test", "{tmp}", "--problems", "{tmp}/good.txt", "--workers", "0"], "--workers must be from 1 to 1024"),
        (["test", "{tmp}", "--problems", "{tmp}/good.txt", "--gif", "{tmp}/g", "--gif-limit", "-1"],
         "--gif-limit must be at least 0"),
        (["train", "--problems", "{tmp}/good.txt", "--out", "{tmp}/r", "--ray-address", "auto"],
         "--ray-address applies only with --executor ray"),
        (["train", "--problems", "{tmp}/good.txt", "--out", "{tmp}/r", "--extra-problems", "{tmp}/good.txt"],
         "--extra-problems applies only with --algorithm hips-eps"),
        (["train", "--problems", "{tmp}/good.txt", "--out", "{tmp}/r", "--codebook-size", "3"],
         "--codebook-size: not used by the phs algorithm, so refused rather than ignored "
         "(--codebook-size applies to phs-sg, levin-sg)"),
        (["train", "--algorithm", "levin", "--problems", "{tmp}/good.txt", "--out", "{tmp}/r", "--no-failed-trees"],
         "--no-failed-trees: not used by the levin algorithm"),
        (["train", "--algorithm", "hips-eps", "--problems", "{tmp}/good.txt", "--out", "{tmp}/r", "--workers", "4"],
         "--workers: not used by the hips-eps algorithm"),
    ],
)  # fmt: skip
def test_errors_are_one_line_with_nonzero_exit(tmp_path, capsys, argv, message):
    (tmp_path / "bad.txt").write_text("; comment\n3|3\n")
    (tmp_path / "good.txt").write_text("3|3|01|00|00|00|02|00|00|00|03\n")
    status = main([arg.replace("{tmp}", str(tmp_path)) for arg in argv])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("sgps: error: ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize("count", ["٣", "３", "1e3", "nan", " 3", "+3", "1_0", "3 "])
def test_numbers_in_other_scripts_are_refused_by_the_parser(tmp_path, capsys, count):
    with pytest.raises(SystemExit) as stop:
        main(["generate", "tsp", "--count", count, "--out", str(tmp_path / "x.txt")])
    assert stop.value.code == 2 and "not a whole number (ASCII digits)" in capsys.readouterr().err
    assert not (tmp_path / "x.txt").exists()
    with pytest.raises(SystemExit):
        main(["solve", str(tmp_path / "x.txt"), "--algorithm", "phs", "--epsilon", "١.٥"])
    assert "not a number (ASCII digits)" in capsys.readouterr().err


def test_console_script_never_prints_a_traceback(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("3|3|01|00|00|00|09|00|00|00|03\n")
    result = subprocess.run(
        [sys.executable, "-m", "sgps", "solve", str(bad), "--domain", "tsp"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "bad.txt:1: cell 4 (row 1, col 1) has code 9" in result.stderr


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["craftworld", "--goal", "gem_ring"], "goal gem_ring"),
        (["craftworld", "--variant", "hard", "--goal", "bronze_pick"], "craftworld 18x18, goal bronze_pick"),
        (["boulderdash", "--variant", "ood"], "1 gems required, 2 locked"),
        (["boulderdash", "--variant", "hard"], "4 gems required, 1 locked"),
    ],
)
def test_new_domains_through_the_command_line(tmp_path, capsys, argv, shown):
    out = tmp_path / "levels.txt"
    assert main(["generate", *argv, "--count", "2", "--seed", "3", "--out", str(out)]) == 0
    png = tmp_path / "level.png"
    assert main(["show", str(out), "--index", "1", "--png", str(png)]) == 0
    assert shown in capsys.readouterr().out and png.stat().st_size > 100
    assert main(["solve", str(out), "--index", "0"]) == 0
    assert "optimal length:" in capsys.readouterr().out


def test_goal_option_for_a_domain_without_goals_is_an_error(tmp_path, capsys):
    assert main(["generate", "tsp", "--goal", "gem_ring", "--out", str(tmp_path / "t.txt")]) == 2
    assert "unknown tsp generator parameter 'goal'" in capsys.readouterr().err
    assert not (tmp_path / "t.txt").exists()


def test_solve_with_a_best_first_algorithm(tmp_path, capsys):
    out = tmp_path / "tsp.txt"
    assert main(["generate", "tsp", "--count", "1", "--seed", "4", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["solve", str(out)]) == 0
    optimal = int(capsys.readouterr().out.split("optimal length: ")[1].split()[0])
    assert main(["solve", str(out), "--algorithm", "astar"]) == 0
    assert "astar: solved" in (text := capsys.readouterr().out) and f"length {optimal} " in text
    assert main(["solve", str(out), "--algorithm", "levin", "--budget", "3"]) == 1
    assert "levin: budget, 3 expanded" in capsys.readouterr().out
    assert main(["solve", str(out), "--algorithm", "phs", "--epsilon", "2"]) == 2
    assert "--epsilon must be between 0 and 1" in capsys.readouterr().err
