"""`sgps report`: every number recomputed from the per-problem CSVs of the smoke comparison; the
curves on a common grid; the ablation and paper columns; both outstanding.csv formats."""

from __future__ import annotations

import csv
import re
import shutil
import statistics
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from sgps.cli import main
from sgps.experiments import report as report_module
from sgps.experiments.curves import curve_bands, step_at
from sgps.experiments.plan import parse_plan
from sgps.experiments.results import read_curve
from sgps.experiments.runstate import stop_reason
from sgps.experiments.tomlfile import dumps
from sgps.runs.run import loop_state
from sgps.runs.rundir import RunDirectory
from sgps.runs.testing import TEST_COLUMNS

from comparisons import smoke_comparison, smoke_document

#: The smoke runs stop at their limit of one pass, a guard: the report marks them (‡).
LABELS = {"phs": r"PHS\*(π) ‡", "phs-sg": r"PHS\*(π^SG) ‡"}
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = smoke_comparison(tmp_path_factory)
    assert main(["report", str(out)]) == 0
    return out


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def table(report: str, heading: str) -> dict[str, list[str]]:
    """The rows of the first table after `heading`, keyed by their first cell."""
    lines = report[report.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def numbers(cell: str) -> list[float]:
    return [float(text.replace(",", "")) for text in re.findall(r"\d[\d,]*(?:\.\d+)?", cell)]


def assert_spread(cell: str, values: list[float], tolerance: float) -> None:
    """A cell reads 'mean (min-max)' over `values`, or the value alone when they agree."""
    expected = [values[0]] if min(values) == max(values) else [statistics.mean(values), min(values), max(values)]
    assert numbers(cell) == pytest.approx(expected, abs=tolerance), cell


def recomputed_test(run: Path) -> dict[str, float]:
    """The paper's test numbers of a run, from its per-problem rows."""
    solved = [row for row in read_rows(run / "metrics" / "test-test.csv") if row["solved"] == "1"]
    lengths = [int(row["length"]) for row in solved]
    return {
        "solved": len(solved),
        "expansions": statistics.mean(int(row["expanded"]) for row in solved),
        "length": statistics.mean(lengths),
        "total_length": sum(lengths),
    }


def test_the_report_numbers_equal_those_recomputed_from_the_csvs(smoke):
    report = (smoke / "report.md").read_text()
    tests, training = table(report, "## Test set `test`"), table(report, "## Training")
    for algorithm in ("phs", "phs-sg"):
        runs = {seed: smoke / "runs" / f"{algorithm}-s{seed}" for seed in SEEDS}
        scores = {seed: recomputed_test(run) for seed, run in runs.items()}
        row = tests[LABELS[algorithm]]
        assert row[0] == str(len(SEEDS))
        for cell, key in zip(row[1:4], ("solved", "expansions", "length"), strict=True):
            assert_spread(cell, [score[key] for score in scores.values()], 0.006)
        best = min(SEEDS, key=lambda seed: (-scores[seed]["solved"], scores[seed]["total_length"], seed))
        assert row[4] == str(best)
        expected = [scores[best]["solved"], scores[best]["expansions"], scores[best]["length"]]
        assert [numbers(cell)[0] for cell in row[5:8]] == pytest.approx(expected, abs=0.006)

        outstanding = {seed: read_rows(run / "metrics" / "outstanding.csv") for seed, run in runs.items()}
        count = {seed: int(rows[0]["outstanding"]) for seed, rows in outstanding.items()}  # the start row
        row = training[LABELS[algorithm]]
        assert_spread(row[1], [int(rows[-1]["cumulative_expansions"]) for rows in outstanding.values()], 0.5)
        assert_spread(row[2], [loop_state(run)["seconds"] / 3600 for run in runs.values()], 0.0006)
        assert_spread(row[3], [count[seed] - int(rows[-1]["outstanding"]) for seed, rows in outstanding.items()], 0)
        assert_spread(row[4], list(count.values()), 0)
        assert row[5] == "iteration limit (2)"
    assert "**Not decided.** ‡: A guard ended the training of phs-s0 (iteration limit)" in report


def test_the_equal_expansions_table_reads_every_run_at_the_fewest_expansions_any_made(smoke):
    report = (smoke / "report.md").read_text()
    runs = {(algorithm, seed): read_rows(smoke / "runs" / f"{algorithm}-s{seed}" / "metrics" / "outstanding.csv")
            for algorithm in ("phs", "phs-sg") for seed in SEEDS}  # fmt: skip
    growing = [int(rows[-1]["cumulative_expansions"]) for rows in runs.values() if rows[-1]["outstanding"] != "0"]
    common = min(growing or [int(rows[-1]["cumulative_expansions"]) for rows in runs.values()])  # all finished
    assert f"Training problems solved by {common:,} expansions" in report
    assert any(int(rows[-1]["cumulative_expansions"]) > common for rows in runs.values())  # read before its end
    at_equal = table(report, "## At equal expansions")
    for algorithm in ("phs", "phs-sg"):
        within = [[row for row in runs[algorithm, seed] if int(row["cumulative_expansions"]) <= common][-1]
                  for seed in SEEDS]  # fmt: skip
        row = at_equal[LABELS[algorithm]]
        assert row[0] == str(len(SEEDS))
        assert_spread(row[1], [int(last["cumulative_expansions"]) for last in within], 0.5)
        starts = [int(runs[algorithm, seed][0]["outstanding"]) for seed in SEEDS]
        assert_spread(row[2], [start - int(last["outstanding"]) for start, last in zip(starts, within, strict=True)],
                      0.006)  # fmt: skip
        assert_spread(row[3], starts, 0)


def test_a_run_that_solved_everything_early_keeps_its_count_and_does_not_pin_the_comparison():
    def run(variant, points, finished):
        expansions, outstanding = (np.array(values) for values in zip(*points, strict=True))
        curve = SimpleNamespace(expansions=expansions, outstanding=outstanding)
        return SimpleNamespace(spec=SimpleNamespace(variant=variant), curve=curve, finished=finished, train_count=10,
                               total_expansions=int(expansions[-1]), solved=10 - int(outstanding[-1]))  # fmt: skip

    plan = SimpleNamespace(variants=["phs-sg", "phs", "levin"])
    results = [run("phs-sg", [(0, 10), (100, 4), (200, 0)], finished=True),  # all solved by 200
               run("phs", [(0, 10), (150, 9), (300, 8), (450, 6)], finished=False),
               run("phs", [(0, 10), (160, 10), (320, 7), (480, 5), (640, 3)], finished=False),
               run("levin", [(0, 10)], finished=False)]  # fmt: skip
    # levin has searched no batch: left out, rather than holding the comparison at 0 expansions
    lines = report_module._equal_expansions_table(plan, results, str)
    assert "Training problems solved by 450 expansions" in lines[3]
    rows = table("\n".join(lines), "## At equal expansions")
    assert rows["phs-sg"] == ["1", "200", "10", "10"]
    assert rows["phs (in progress)"] == ["2", "385 (320-450)", "3.50 (3-4)", "10"]  # read at 450 and at 320
    assert "levin" not in rows and "levin (in progress)" not in rows


def test_the_curves_are_each_seeds_steps_on_a_common_grid(smoke):
    plotted = read_rows(smoke / "curves.csv")
    assert (smoke / "curves.png").read_bytes().startswith(b"\x89PNG")
    for algorithm in ("phs", "phs-sg"):
        seeds = [read_rows(smoke / "runs" / f"{algorithm}-s{seed}" / "metrics" / "outstanding.csv") for seed in SEEDS]
        for axis, column, scale in (("expansions", "cumulative_expansions", 1.0), ("hours", "seconds", 3600.0)):
            points = [[(float(row[column]) / scale, int(row["outstanding"])) for row in rows] for rows in seeds]
            grid = sorted({x for curve in points for x, _ in curve})
            rows = [row for row in plotted if row["axis"] == axis and row["algorithm"] == algorithm]
            assert [float(row["x"]) for row in rows] == pytest.approx(grid, abs=1e-6)
            for row, x in zip(rows, grid, strict=True):
                values = [[y for point, y in curve if point <= x][-1] for curve in points]
                assert float(row["mean"]) == pytest.approx(statistics.mean(values), abs=1e-4)
                assert (int(row["min"]), int(row["max"]), int(row["seeds"])) == (min(values), max(values), len(SEEDS))


def test_step_curves_of_different_grids_are_read_as_outstanding_after_x():
    xs, ys = np.array([0, 10, 30]), np.array([5, 3, 1])
    assert step_at(xs, ys, np.array([0, 5, 10, 29, 30, 100])).tolist() == [5, 5, 3, 3, 1, 1]
    curves = [
        SimpleNamespace(expansions=np.array([0, 10, 30]), seconds=np.array([0.0, 36.0, 72.0]),
                        outstanding=np.array([5, 3, 1])),
        SimpleNamespace(expansions=np.array([0, 20]), seconds=np.array([0.0, 3600.0]), outstanding=np.array([5, 0])),
    ]  # fmt: skip
    results = [SimpleNamespace(spec=SimpleNamespace(variant="phs"), curve=curve) for curve in curves]
    band = curve_bands(results, ["phs"])[0]
    assert (band.axis, band.seeds) == ("expansions", 2)
    assert band.x.tolist() == [0, 10, 20, 30]
    assert band.mean.tolist() == [5.0, 4.0, 1.5, 0.5]
    assert (band.low.tolist(), band.high.tolist()) == ([5, 3, 0, 0], [5, 5, 3, 1])


def test_runs_without_the_start_row_or_wall_clock_column_are_read_too(tmp_path):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "outstanding.csv").write_text(
        "iteration,batch,cumulative_expansions,outstanding\n0,0,100,8\n0,1,180,6\n1,0,250,5\n"
    )
    (metrics / "train.csv").write_text(
        "iteration,batch,problem,solved,expanded,generated,length,budget,seconds\n"
        "0,0,0,1,40,50,9,60,0.5\n0,0,1,0,60,70,,60,1.5\n0,1,2,1,80,90,7,60,2.0\n1,0,3,1,70,80,7,60,0.25\n"
    )
    curve = read_curve(RunDirectory(tmp_path), train_count=10)
    assert curve is not None and not curve.measured_seconds
    assert curve.expansions.tolist() == [0, 100, 180, 250]
    assert curve.outstanding.tolist() == [10, 8, 6, 5]
    assert curve.seconds.tolist() == [0.0, 1.5, 3.5, 3.75]  # the longest search of each batch, summed


def test_ablations_show_settings_subgoal_distances_and_the_papers_numbers(smoke, tmp_path):
    """Two variants of PHS*(π^SG), made of the smoke runs, with cluster levels 1 and 3."""
    document = smoke_document()
    document["compare"]["algorithms"] = ["g1", "g3"]
    document["variants"] = {name: {"algorithm": "phs-sg", "subgoal": {"cluster_level": level}}
                            for name, level in (("g1", 1), ("g3", 3))}  # fmt: skip
    document["paper"] = {"g1": {"test": [100, 287.24, 93.88], "distance": 1.66}, "g3": {"distance": 4.93}}
    plan = parse_plan(document, "ablation.toml", tmp_path)
    (tmp_path / "compare.toml").write_text(dumps(plan.resolved))
    shutil.copytree(smoke / "problems", tmp_path / "problems")
    distances = {}
    for name, level in (("g1", 1), ("g3", 3)):
        for seed in SEEDS:
            run = tmp_path / "runs" / f"{name}-s{seed}"
            shutil.copytree(smoke / "runs" / f"phs-sg-s{seed}", run)
            config = run / "config.toml"
            config.write_text(config.read_text().replace("cluster_level = 0", f"cluster_level = {level}"))
            rows = [row for row in read_rows(run / "metrics" / "learning.csv") if row["failed_mean_length"]]
            pairs = sum(float(row["failed_pairs"]) for row in rows)
            distances.setdefault(name, []).append(
                sum(float(row["failed_mean_length"]) * float(row["failed_pairs"]) for row in rows) / pairs
            )
    assert main(["report", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    ablation = table(report, "## Ablation")
    for name, level, paper in (("g1", "G1", "1.66"), ("g3", "G3", "4.93")):
        row = ablation[f"{name} (PHS\\*(π^SG)) ‡"]
        assert row[:3] == ["4", level, "yes"]
        assert_spread(row[3], distances[name], 0.006)
        assert row[7] == paper
        assert_spread(table(report, "Mean subgoal distance per cluster level")[level][1], distances[name], 0.006)
    assert ablation["g1 (PHS\\*(π^SG)) ‡"][8] == "100 / 287.24 / 93.88"
    assert table(report, "## Test set `test`")["g1 (PHS\\*(π^SG)) ‡"][-1] == "100 / 287.24 / 93.88"


def test_a_run_cut_by_its_time_guard_is_marked_and_one_bounded_by_expansions_is_not(tmp_path, capsys, monkeypatch):
    document = smoke_document()
    document["compare"].update(algorithms=["budget", "clock"], seeds=[0])
    document["train"]["bootstrap"] = {"max_iterations": 50, "initial_budget": 250}
    document["variants"] = {"budget": {"algorithm": "phs", "bootstrap": {"max_expansions": 3000}},
                            "clock": {"algorithm": "phs", "bootstrap": {"time_limit_minutes": 0.002}}}  # fmt: skip
    config = tmp_path / "guard.toml"
    config.write_text(dumps(document))
    out = tmp_path / "guard"
    assert main(["compare", str(config), "--out", str(out), "--jobs", "2", "--threads", "1"]) == 0
    assert "sgps: warning: a guard ended the training of clock-s0 (wall-clock limit)" in capsys.readouterr().err
    legends = []

    def record_legend(path, bands, label, **_):
        legends.extend(label(band.variant) for band in bands)

    monkeypatch.setattr("sgps.experiments.report.write_curves_png", record_legend)
    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    training = table(report, "## Training")
    assert training["budget (PHS\\*(π))"][5] == "expansion limit"
    assert training["clock (PHS\\*(π)) ‡"][5] == "wall-clock limit"
    assert "**Not decided.** ‡: A guard ended the training of clock-s0 (wall-clock limit)" in report
    assert "budget-s0" not in report.split("## Test set")[0]
    assert "clock (PHS*(π)) ‡ cut by a guard" in legends and "budget (PHS*(π))" in legends


def test_runs_written_before_the_stop_reason_was_recorded_read_it_from_their_log(tmp_path):
    (tmp_path / "log.txt").write_text("iteration 0 batch 0: solved 0/16\nlimits raised: continuing\n"
                                      "stopping: wall-clock limit reached\n")  # fmt: skip
    assert stop_reason(tmp_path, {"finished": True, "stopped_by_limit": True}) == "wall-clock limit"
    assert stop_reason(tmp_path, {"stop_reason": "expansion limit"}) == "expansion limit"  # the state wins
    (tmp_path / "log.txt").write_text("validation target reached: one more pass, then stop\n")
    assert stop_reason(tmp_path, {"finished": True}) == "validation rule"
    (tmp_path / "log.txt").unlink()
    assert stop_reason(tmp_path, {"finished": True}) == ""


def test_a_comparison_still_training_gets_a_clean_report_with_its_runs_marked(tmp_path, capsys):
    document = smoke_document()
    document["compare"].update(algorithms=["phs-sg"], seeds=[0])
    document["train"]["bootstrap"] = {"max_iterations": 5, "initial_budget": 250, "batch_size": 8}
    config = tmp_path / "live.toml"
    config.write_text(dumps(document))
    out = tmp_path / "live"
    assert main(["compare", str(config), "--out", str(out), "--threads", "1", "--max-batches", "2",
                 "--tensorboard"]) == 0  # fmt: skip
    assert list((out / "tensorboard" / "phs-sg-s0").glob("events.out.tfevents.*"))  # one folder per run
    run = out / "runs" / "phs-sg-s0"
    complete = read_rows(run / "metrics" / "outstanding.csv")
    for name, partial in (("outstanding", "0,2,71"), ("train", "0,2,5,1,2"), ("learning", "0,2,1.5")):
        with open(run / "metrics" / f"{name}.csv", "a") as handle:
            handle.write(partial)  # the loop is writing its next rows
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "0 of 1 runs finished training" in report and "phs-sg-s0 (in progress)" in report
    assert "## At equal expansions" not in report  # one algorithm: nothing to compare it with
    progress = table(report, "## In progress")["phs-sg-s0"]
    expansions = int(complete[-1]["cumulative_expansions"])
    assert progress[:4] == [r"PHS\*(π^SG)", "0", "1", "250"]
    assert numbers(progress[4]) == [expansions] and numbers(progress[6]) == [24]
    curves = read_rows(out / "curves.csv")
    drawn = [row for row in curves if row["axis"] == "expansions"]
    assert {row["algorithm"] for row in drawn} == {"phs-sg (in progress)"}
    assert [int(row["x"]) for row in drawn] == [0] + [int(row["cumulative_expansions"]) for row in complete[1:]]


def _cut(text: bytes) -> bytes:
    return b"".join(text.splitlines(keepends=True)[:3])


def _duplicated(text: bytes) -> bytes:
    return text + b"".join(text.splitlines(keepends=True)[-2:])


def _other_problem(text: bytes) -> bytes:
    lines = text.splitlines(keepends=True)
    return b"".join([lines[0], lines[1].replace(b"1,0,", b"1,7,", 1), *lines[2:]])


def _steps_not_a_number(text: bytes) -> bytes:
    lines = text.splitlines(keepends=True)
    fields = lines[1].split(b",")
    fields[TEST_COLUMNS.index("steps")] = b"x"
    return b"".join([lines[0], b",".join(fields), *lines[2:]])


def _other_level_set(text: bytes) -> bytes:
    """Every row names another level set, as the record of `x/test.txt` would in a run tested on `y/test.txt`."""
    lines = text.splitlines(keepends=True)
    column = TEST_COLUMNS.index("levels")
    rows = [line.rstrip(b"\n").split(b",") for line in lines[1:]]
    for fields in rows:
        fields[column] = b"0123456789abcdef"
    return b"".join([lines[0], *(b",".join(fields) + b"\n" for fields in rows)])


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda text: text + b"\xff\xfe", "not UTF-8 text"),
        (_other_level_set, "its rows name another level set (0123456789abcdef"),
        (_cut, "it ends in round 1 after 2 of its 8 attempts"),
        (_duplicated, "it holds 2 rows after the last round's attempts"),
        (_other_problem, "round 1 does not try the unsolved problems in order with budget 500"),
        (lambda text: text.replace(b"1,1,1,", b"1,1,1,x", 1), "a row is not an attempt"),
        (_steps_not_a_number, "a row is not an attempt"),
    ],
)
def test_a_damaged_test_record_is_named_and_not_counted(smoke, tmp_path, capsys, damage, reason):
    out = tmp_path / "damaged"
    shutil.copytree(smoke, out, ignore=shutil.ignore_patterns(".lock"))
    record = out / "runs" / "phs-s0" / "metrics" / "test-test.csv"
    record.write_bytes(damage(record.read_bytes()))
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    warning = capsys.readouterr().err
    assert warning.startswith("sgps: warning: test records not counted")
    assert f"phs-s0, test set test: {record}" in warning and reason in warning
    report = (out / "report.md").read_text()
    assert f"- phs-s0, test set test: {record}" in report and reason in report
    assert table(report, "## Test set `test`")[LABELS["phs"]][0] == "1"  # one seed counted, not two
    assert numbers(table(report, "## Test set `test`")[LABELS["phs"]][1])[0] == recomputed_test(
        out / "runs" / "phs-s1"
    )["solved"]


def test_a_deleted_test_record_is_reported_as_not_tested_yet(smoke, tmp_path):
    out = tmp_path / "deleted"
    shutil.copytree(smoke, out, ignore=shutil.ignore_patterns(".lock"))
    (out / "runs" / "phs-s0" / "metrics" / "test-test.csv").unlink()
    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "Not tested yet (`sgps compare` again tests them): phs-s0 on `test`." in report
    assert table(report, "## Test set `test`")[LABELS["phs"]][0] == "1"


def test_a_training_csv_that_is_not_text_is_one_error_line_naming_it(smoke, tmp_path, capsys):
    out = tmp_path / "binary"
    shutil.copytree(smoke, out, ignore=shutil.ignore_patterns(".lock"))
    outstanding = out / "runs" / "phs-sg-s1" / "metrics" / "outstanding.csv"
    outstanding.write_bytes(outstanding.read_bytes() + b"\x80\x81\n")
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    error = capsys.readouterr().err
    assert error == f"sgps: error: {outstanding}: not UTF-8 text (byte {outstanding.stat().st_size - 3}); " \
                    "the metrics were damaged\n"


def test_a_mean_of_solved_counts_never_reads_as_a_count_no_seed_reached():
    """Seeds that solved 10,000, 10,000 and 9,999 of 10,000: their mean is not "10,000" (all solved),
    in the report as in the terminal's summary; expansions stay whole numbers from 1,000 up."""
    assert report_module._spread([10_000, 10_000, 9_999], report_module.solved_count) == "9,999.67 (9,999-10,000)"
    assert report_module.solved_count(317.0) == "317" and report_module.solved_count(None) == "-"
    assert report_module.solved_count(9_999.95) == "9,999.95" and report_module.solved_count(20.0) == "20"
    assert report_module._count(1_234_567.8) == "1,234,568"


def test_a_test_mean_says_how_many_seeds_it_is_over_when_some_solved_nothing():
    """A test's mean expansions and length exist only for seeds that solved a level: 3 seeds of which
    one solved something used to print that seed's mean as the algorithm's, with nothing to say so."""
    from sgps.experiments import summary as summary_module

    expansions = [None, 1_234.5, None]
    assert report_module._spread(expansions, report_module._decimal) == "1,234.50, 1 of 3 seeds"
    assert report_module._spread([None, 100.0, 300.0], report_module._decimal) == "200.00 (100.00-300.00), 2 of 3 seeds"
    assert report_module._spread([100.0, 300.0], report_module._decimal) == "200.00 (100.00-300.00)"
    assert report_module._spread([None, None], report_module._decimal) == "-"
    assert summary_module._seeds_mean(expansions, ",.1f") == "1,234.5 (1 of 3 seeds)"
    assert summary_module._seeds_mean([10.0, 20.0], ".2f") == "15.00"
    assert summary_module._seeds_mean([None], ".2f") == "-"
