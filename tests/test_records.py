"""Test records and journals: results know the weights they came from, and records are checked, not trusted.

The fears: a finished run trained further (``sgps train --resume``) keeps counting, in
`sgps compare` and `sgps report`, the test record its old weights made; an edited
journal or record (a failed attempt turned solved, a negative count, a made-up time, a
dataset entry whose actions solve nothing or a made-up "skipped" level) counts as a result.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from sgps.cli import main
from sgps.domains import get_domain
from sgps.domains.generation import generate_levels
from sgps.domains.levels import read_levels, write_levels
from sgps.errors import ConfigError
from sgps.training.methods.hips.dataset import build_dataset
from test_test_procedure import CountingHeuristic as Heuristic
from test_test_procedure import (
    KilledError,
    setting,  # noqa: F401 (the fixture of a small test)
)
from test_test_procedure import run as small_run

from comparisons import write_config

#: One PHS*(π) run, one seed, the `tiny` preset: a whole comparison in about 15 seconds on one core.
TINY_COMPARISON = {
    "compare": {"domain": "tsp", "algorithms": ["phs"], "seeds": [0], "preset": "tiny"},
    "problems": {"train": {"variant": "standard", "seed": 0, "count": 12, "validation": 4}},
    "tests": {"test": {"variant": "standard", "seed": 9000, "count": 4, "budget": 200, "rounds": 1}},
    "train": {"bootstrap": {"max_iterations": 1, "initial_budget": 250, "batch_size": 8}},
}
OPTIONS = ["--threads", "1", "--jobs", "1"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(config, folder) of the finished tiny comparison; copy the folder before changing it."""
    base = tmp_path_factory.mktemp("tiny")
    config = write_config(base / "tiny.toml", TINY_COMPARISON)
    assert main(["compare", str(config), "--out", str(base / "c"), *OPTIONS]) == 0
    return config, base / "c"


def copied(tiny: tuple[Path, Path], tmp_path: Path) -> Path:
    out = tmp_path / "c"
    shutil.copytree(tiny[1], out, ignore=shutil.ignore_patterns(".lock"))
    return out


def counted_rows(report: str) -> str:
    """The report's table of test set `test`."""
    return report.split("## Test set `test`")[1].split("## Training")[0]


def rewrite_rows(path: Path, change: Callable[[list[dict[str, str]]], None], columns: list[str] | None = None) -> None:
    """Rewrite the CSV at `path` after `change` edited its rows (in place); `columns`: the header to keep."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    head = [line for line in lines if line.startswith("#")]  # a journal's identity line
    rows = list(csv.DictReader(io.StringIO("".join(lines[len(head) :]))))
    header = columns or list(rows[0])
    change(rows)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, header, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text("".join(head) + buffer.getvalue())


# -- results know the weights they came from ----------------------------------------------


def report_warnings(out, capsys) -> str:
    """`sgps report OUT` (which must succeed); what it printed on stderr alone."""
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    return capsys.readouterr().err


def test_a_finished_run_trained_further_has_its_test_record_retested_not_counted(tiny, tmp_path, capsys):
    out = copied(tiny, tmp_path)
    run = out / "runs" / "phs-s0"
    record = run / "metrics" / "test-test.csv"
    best = (run / "checkpoints" / "best.safetensors").read_bytes()
    tested = record.read_text()
    assert main(["train", "--problems", str(out / "problems" / "train.txt"), "--out", str(run), "--resume",
                 "--max-iterations", "3", "--quiet"]) == 0  # fmt: skip
    assert (run / "checkpoints" / "best.safetensors").read_bytes() != best  # the weights `sgps test` uses changed
    warning = report_warnings(out, capsys)
    assert "phs-s0, test set test" in warning and "made with other weights" in warning
    report = (out / "report.md").read_text()
    assert "PHS" not in counted_rows(report)  # not counted
    assert "made with other weights" in report and "phs-s0" in report.split("## Test set")[0]
    assert record.read_text() == tested  # shown as stale, not deleted

    assert main(["compare", str(tiny[0]), "--out", str(out), *OPTIONS]) == 0  # retests the run
    assert record.read_text() != tested
    assert "other weights" not in report_warnings(out, capsys)
    assert "PHS" in counted_rows((out / "report.md").read_text())


def test_a_run_whose_weights_did_not_change_keeps_its_record(tiny, tmp_path, capsys):
    out = copied(tiny, tmp_path)
    record = out / "runs" / "phs-s0" / "metrics" / "test-test.csv"
    tested = record.read_text()
    assert main(["compare", str(tiny[0]), "--out", str(out), *OPTIONS]) == 0
    assert record.read_text() == tested  # nothing retested
    assert "weights" not in report_warnings(out, capsys)
    assert "PHS" in counted_rows((out / "report.md").read_text())


def test_a_record_made_before_records_named_their_weights_is_counted_with_a_warning(tiny, tmp_path, capsys):
    out = copied(tiny, tmp_path)
    record = out / "runs" / "phs-s0" / "metrics" / "test-test.csv"
    old_columns = ["round", "problem", "solved", "expanded", "generated", "length", "budget", "seconds", "steps"]
    rewrite_rows(record, lambda rows: None, old_columns)
    warning = report_warnings(out, capsys)
    assert "phs-s0, test set test" in warning and "made before test records named their weights" in warning
    assert "PHS" in counted_rows((out / "report.md").read_text())  # counted: the user's results are kept
    tested = record.read_text()
    assert main(["compare", str(tiny[0]), "--out", str(out), *OPTIONS]) == 0
    assert record.read_text() == tested  # and not retested behind the user's back


def _set_config_evaluation_batch(run: Path, batch: int) -> None:
    config = run / "config.toml"
    text = config.read_text()
    assert "evaluation_batch = 1\n" in text
    config.write_text(text.replace("evaluation_batch = 1\n", f"evaluation_batch = {batch}\n"))


def test_a_record_not_searched_in_exact_order_is_counted_and_named(tiny, tmp_path, capsys):
    """A test searched with an evaluation batch above 1 (`sgps test --evaluation-batch`, or before it
    existed, with the run's training order) is not the test procedure's (spec 6.7: exact order)."""
    out = copied(tiny, tmp_path)
    run = out / "runs" / "phs-s0"
    record = run / "metrics" / "test-test.csv"
    assert {row["evaluation_batch"] for row in csv.DictReader(record.open())} == {"1"}
    assert "exact order" not in report_warnings(out, capsys)
    assert "PHS" in counted_rows((out / "report.md").read_text())

    def buffered(rows: list[dict[str, str]]) -> None:
        for row in rows:
            row["evaluation_batch"] = "32"

    rewrite_rows(record, buffered)
    warning = report_warnings(out, capsys)
    assert "not searched in exact order: phs-s0, test set test" in warning and "evaluation batch of 32" in warning
    report = (out / "report.md").read_text()
    assert "PHS" in counted_rows(report) and "**Test records not searched in exact order**" in report

    # A record made before records named their evaluation batch was searched in its run's training order.
    columns = [column for column in next(csv.DictReader(record.open())) if column != "evaluation_batch"]
    rewrite_rows(record, lambda rows: None, columns)
    assert "exact order" not in report_warnings(out, capsys)  # the tiny run trained in exact order
    _set_config_evaluation_batch(run, 32)
    warning = report_warnings(out, capsys)
    assert "not searched in exact order: phs-s0, test set test" in warning and "evaluation batch of 32" in warning
    assert "PHS" in counted_rows((out / "report.md").read_text())


@pytest.mark.parametrize(("change", "reason"), [
    (lambda rows: rows[-1].update(evaluation_batch="32"), "its evaluation batch differs from that of the first row"),
    (lambda rows: [row.update(evaluation_batch="0") for row in rows], "its evaluation batch is not a count above 0"),
    (lambda rows: [row.update(evaluation_batch="many") for row in rows], "its evaluation batch is not a count"),
], ids=["mixed", "zero", "not a number"])  # fmt: skip
def test_a_record_with_a_bad_evaluation_batch_is_named_and_not_counted(tiny, tmp_path, capsys, change, reason):
    out = copied(tiny, tmp_path)
    record = out / "runs" / "phs-s0" / "metrics" / "test-test.csv"
    assert sum(1 for _ in csv.DictReader(record.open())) >= 2
    rewrite_rows(record, change)
    warning = report_warnings(out, capsys)
    assert warning.startswith("sgps: warning: test records not counted") and reason in warning
    assert "PHS" not in counted_rows((out / "report.md").read_text())


def test_weights_replaced_while_a_test_loads_them_are_refused_not_recorded(tiny, tmp_path, monkeypatch):
    """A training run that rewrites its checkpoint while `sgps test` reads it: the record named the weights
    read after the load, which need not be those searched."""
    import safetensors.torch

    from sgps.errors import CheckpointError
    from sgps.runs import runner
    from sgps.runs.run import Run

    out = copied(tiny, tmp_path)
    run = out / "runs" / "phs-s0"
    record = run / "metrics" / "test-test.csv"
    tested = record.read_text()
    loaded = Run.searcher

    def load_then_replace(self, example, checkpoint, **kwargs):
        searcher = loaded(self, example, checkpoint, **kwargs)
        tensors = safetensors.torch.load_file(checkpoint)
        safetensors.torch.save_file({name: tensor + 1.0 for name, tensor in tensors.items()}, checkpoint)
        return searcher

    monkeypatch.setattr(Run, "searcher", load_then_replace)
    with pytest.raises(CheckpointError, match="was replaced while it was read"):
        runner.test(run, out / "problems" / "tests" / "test.txt", budget=200)
    assert record.read_text() == tested


# -- records are checked, not trusted -------------------------------------------------------


def _failed_to_solved(rows: list[dict[str, str]]) -> None:
    failed = next(row for row in rows if row["solved"] == "0")
    failed.update(solved="1", length="3")
    if "actions" in failed:
        failed["actions"] = "0 1 2"


def _set(column: str, value: str) -> Callable[[list[dict[str, str]]], None]:
    def change(rows: list[dict[str, str]]) -> None:
        rows[0][column] = value

    return change


DAMAGES = {
    "failed turned solved": (_failed_to_solved, "do not reach a goal"),
    "negative expansions": (_set("expanded", "-5"), "expanded"),
    "more expansions than the budget": (_set("expanded", "100000"), "expanded"),
    "negative generated": (_set("generated", "-1"), "generated"),
    "seconds not a number": (_set("seconds", "soon"), "seconds"),
    "seconds not finite": (_set("seconds", "nan"), "seconds"),
    "negative seconds": (_set("seconds", "-2.5"), "seconds"),
    "negative steps": (_set("steps", "-7"), "steps"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_an_edited_test_record_is_named_and_not_counted(tiny, tmp_path, capsys, damage):
    change, reason = DAMAGES[damage]
    out = copied(tiny, tmp_path)
    record = out / "runs" / "phs-s0" / "metrics" / "test-test.csv"
    rewrite_rows(record, change)
    warning = report_warnings(out, capsys)
    assert warning.startswith("sgps: warning: test records not counted")
    assert f"phs-s0, test set test: {record}:" in warning and reason in warning
    assert "PHS" not in counted_rows((out / "report.md").read_text())


@pytest.mark.parametrize("damage", [name for name in DAMAGES if name != "more expansions than the budget"])
def test_an_edited_row_of_a_test_journal_is_searched_again(tmp_path, setting, damage):  # noqa: F811
    tsp, levels, identity = setting
    full_cost = Heuristic(tsp)
    whole = small_run(tsp, levels, tmp_path / "whole.csv", identity, full_cost)
    cut = tmp_path / "cut.csv"
    with pytest.raises(KilledError):
        small_run(tsp, levels, cut, identity, Heuristic(tsp, stop_at=full_cost.calls * 2 // 3))
    journal = tmp_path / "cut.csv.partial"
    rows_before = journal.read_text().count("\n") - 2
    assert rows_before >= 3 and "0" in [line.split(",")[2] for line in journal.read_text().splitlines()[2:]]
    rewrite_rows(journal, DAMAGES[damage][0])
    resumed = small_run(tsp, levels, cut, identity, Heuristic(tsp))
    assert resumed == whole  # the edited attempt was searched again, not counted

    def without_time(path: Path) -> list[dict[str, str]]:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(path.open())]

    assert without_time(cut) == without_time(tmp_path / "whole.csv")
    seconds = [float(row["seconds"]) for row in csv.DictReader(cut.open())]
    assert all(math.isfinite(value) and value >= 0 for value in seconds)  # no time taken from the edited row


# -- dataset journal entries replay before they count ---------------------------------------


@pytest.fixture
def journalled_build(tmp_path):
    """(domain, levels, journal) of a finished dataset build of 4 small TSP levels."""
    tsp = get_domain("tsp")
    path = tmp_path / "train.txt"
    params = {"size": 6, "cities": 2, "walls": True}
    write_levels(path, tsp, generate_levels(tsp, params, 0, 4), variant="standard", seed=0, params=params)
    levels = read_levels(path).levels
    journal = tmp_path / "data.npz.journal"
    build_dataset(tsp, levels, journal=journal)
    return tsp, levels, journal


def _edit_entries(journal: Path, change: Callable[[list[dict]], None]) -> None:
    lines = journal.read_text().splitlines()
    entries = [json.loads(line) for line in lines[1:]]
    change(entries)
    journal.write_text("\n".join([lines[0], *(json.dumps(entry) for entry in entries)]) + "\n")


def _wrong_actions(entries: list[dict]) -> None:
    entries[1]["actions"] = entries[1]["actions"][:-1]  # stops one step short of the goal


def _swapped(entries: list[dict]) -> None:
    entries[0]["actions"], entries[1]["actions"] = entries[1]["actions"], entries[0]["actions"]


def _made_up_skip(entries: list[dict]) -> None:
    entries[1] = {"index": entries[1]["index"], "skipped": "too hard for me"}


def _skip_with_another_cap(entries: list[dict]) -> None:
    entries[1] = {"index": entries[1]["index"], "skipped": "state cap of 7 reached"}


def _solved_and_skipped(entries: list[dict]) -> None:
    entries[1]["skipped"] = "no solution exists"


def _twice(entries: list[dict]) -> None:
    entries.append(dict(entries[0]))


def _action_a_boolean(entries: list[dict]) -> None:
    entries[1]["actions"] = [True if action == 1 else action for action in entries[1]["actions"]]


@pytest.mark.parametrize(
    ("change", "line", "problem"),
    [
        (_wrong_actions, 3, "its actions do not reach a goal"),
        (_swapped, 2, "its actions do not reach a goal"),
        (_made_up_skip, 3, "'too hard for me' is not a reason the dataset builder gives"),
        (_skip_with_another_cap, 3, "is not a reason the dataset builder gives"),
        (_solved_and_skipped, 3, "both solved and skipped"),
        (_twice, 6, "level 0 is recorded twice"),
        (_action_a_boolean, 3, "not a finished level"),
    ],
)
def test_a_dataset_journal_entry_is_replayed_before_it_counts(journalled_build, change, line, problem):
    tsp, levels, journal = journalled_build
    if change is _action_a_boolean:
        entry = json.loads(journal.read_text().splitlines()[2])
        assert 1 in entry["actions"]  # the level's solution uses action 1
    _edit_entries(journal, change)
    with pytest.raises(ConfigError) as refused:
        build_dataset(tsp, levels, journal=journal)
    assert str(refused.value).startswith(f"{journal}:{line}: ")
    assert problem in str(refused.value)
