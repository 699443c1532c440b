"""What each run of a comparison achieved, read back from its run directory.

- Test results per test set, from ``metrics/test-NAME.csv`` (spec/algorithms.md 6.7):
  solved problems, mean expansions and mean length over the solved ones (the solving
  attempt only, as the paper counts), and the total solution length (for 6.8). A record
  counts only when it is whole, its solutions replay, and it was made with the weights
  the run has now (`read_tests`).
- The training curve from ``metrics/outstanding.csv``: outstanding training problems
  after every batch against cumulative expansions and wall-clock seconds. Runs that
  logged no start row get (0 expansions, N outstanding) prepended. Runs whose file has
  no ``seconds`` column get the seconds of their searches instead: per batch the
  longest search of the batch (a batch's searches run side by side in lockstep, so
  their times overlap), which leaves out learning and validation time.
- Training totals: expansions, hours (the loop's wall clock, validation and learning
  included, from the trainer checkpoint) and problems solved.
- Runs still training are read as far as they have written: complete CSV rows only (a
  row being written is left out), with the clock of their last logged batch and where
  they stand (pass, budget, outstanding), so that `sgps report` works during `sgps compare`.
- The mean subgoal distance: the mean path length of the pairs drawn from failed
  trees (``metrics/learning.csv``, ``failed_mean_length``, weighted by ``failed_pairs``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sgps.domains.levels import LevelSet, read_levels
from sgps.errors import CheckpointError, SgpsError
from sgps.experiments.plan import ComparePlan, RunSpec
from sgps.experiments.problems import problem_files
from sgps.experiments.runstate import RunProgress, stop_reason, test_csv, tested_weights, training_progress
from sgps.runs.run import Run, loop_state
from sgps.runs.rundir import RunDirectory
from sgps.runs.testing import fault_in_test_record, level_set_digest
from sgps.training.bootstrap import GUARD_STOPS


@dataclass(frozen=True)
class TestResult:
    """One run on one test set."""

    problems: int
    solved: int
    mean_expansions: float | None
    mean_length: float | None
    total_length: int  # of the solved problems (the tie-break of spec 6.8)
    mean_steps: float | None = None  # primitive transitions per solved problem (None: not recorded)


@dataclass(frozen=True)
class Curve:
    """Outstanding training problems after each batch (the first point: before any search)."""

    expansions: np.ndarray
    seconds: np.ndarray
    outstanding: np.ndarray
    measured_seconds: bool  # False: search time only (no `seconds` column)


@dataclass(frozen=True)
class RunResult:
    """Everything the report shows about one run."""

    spec: RunSpec
    finished: bool
    tests: Mapping[str, TestResult]  # test sets tested so far
    curve: Curve | None  # None until the run logged its first batch
    train_count: int
    hours: float
    subgoal_distance: float | None
    settings: Mapping[str, Mapping[str, Any]]  # the run's resolved config.toml
    stop_reason: str = ""  # why its training ended (`sgps.training.bootstrap.STOP_REASONS`), "" while it runs
    progress: RunProgress | None = None  # where an unfinished run stands (its last logged batch)
    damaged: Mapping[str, str] = field(default_factory=dict)  # test set -> why its record is not counted
    stale: Mapping[str, str] = field(default_factory=dict)  # test set -> its record, made with other weights
    unnamed: Mapping[str, str] = field(default_factory=dict)  # test set -> its record, counted but naming no weights
    buffered: Mapping[str, str] = field(default_factory=dict)  # test set -> its record, counted, not in exact order

    @property
    def cut_by_guard(self) -> bool:
        """Whether a guard (wall clock, iteration cap) ended the training before its budget or a stopping rule."""
        return self.stop_reason in GUARD_STOPS

    @property
    def total_expansions(self) -> int:
        return int(self.curve.expansions[-1]) if self.curve is not None else 0

    @property
    def solved(self) -> int:
        return self.train_count - int(self.curve.outstanding[-1]) if self.curve is not None else 0


def load_results(plan: ComparePlan, out: Path, train_total: int) -> list[RunResult]:
    """The results of every run of `plan` that has started, in the plan's order."""
    sets = test_sets(plan, out)
    results = []
    for spec in plan.runs:
        path = out / "runs" / spec.name
        if spec.config is None:
            if (path / "config.toml").exists():
                results.append(_offline_result(plan, spec, Run.open(path), train_total, sets))
            continue
        state = loop_state(path)
        if state is None and not (path / "metrics" / "outstanding.csv").exists():
            continue  # not started
        run = Run.open(path)
        directory = run.directory
        train_count = plan.train_count(spec, train_total)
        records = read_tests(plan, sets, path)
        curve = read_curve(directory, train_count)
        settings = run.document
        finished = state is not None and bool(state["finished"])
        # Still training: the clock of its last logged batch is newer than its checkpoint's.
        seconds = state["seconds"] if finished else float(curve.seconds[-1]) if curve is not None else 0.0
        hours = seconds / 3600
        results.append(RunResult(spec, finished, records.tests, curve, train_count, hours, subgoal_distance(directory),
                                 settings, stop_reason(path, state) if finished else "",
                                 training_progress(path) if not finished else None, records.damaged, records.stale,
                                 records.unnamed, records.buffered))  # fmt: skip
    return results


def damaged_records(results: Sequence[RunResult]) -> list[str]:
    """'RUN, test set NAME: why' for every test record that is not counted (`read_tests`)."""
    return record_notes(results, lambda result: result.damaged)


def record_notes(results: Sequence[RunResult], notes: Callable[[RunResult], Mapping[str, str]]) -> list[str]:
    """'RUN, test set NAME: note' for every note of `notes(result)` (test set -> note) of every run."""
    return [f"{r.spec.name}, test set {name}: {note}" for r in results for name, note in notes(r).items()]


def stale_warning(results: Sequence[RunResult]) -> str | None:
    """One line naming the test records made with other weights than their run's now; None when there is none."""
    stale = record_notes(results, lambda result: result.stale)
    if not stale:
        return None
    return (f"test records not counted, made with other weights than their run has now (it was trained further "
            f"since): {'; '.join(stale)}; sgps compare tests those runs anew")  # fmt: skip


def unnamed_warning(results: Sequence[RunResult]) -> str | None:
    """One line naming the test records counted although they name no weights; None when there is none."""
    unnamed = record_notes(results, lambda result: result.unnamed)
    if not unnamed:
        return None
    return (f"test records counted without checking their weights: {'; '.join(unnamed)}; delete one and run "
            "sgps compare again to test anew")  # fmt: skip


def buffered_warning(results: Sequence[RunResult]) -> str | None:
    """One line naming the test records counted although their searches ran in buffered order (an
    evaluation batch above 1), not the test procedure's exact order; None when there is none."""
    buffered = record_notes(results, lambda result: result.buffered)
    if not buffered:
        return None
    return (f"test records counted although not searched in exact order: {'; '.join(buffered)}; delete one and "
            "run sgps compare again to test in exact order")  # fmt: skip


def damaged_warning(results: Sequence[RunResult]) -> str | None:
    """One line naming every test record that is not counted and what to do; None when there is none."""
    damaged = damaged_records(results)
    if not damaged:
        return None
    return f"test records not counted: {'; '.join(damaged)}; delete one and run sgps compare again to test anew"


def guard_cut_runs(results: Sequence[RunResult]) -> list[RunResult]:
    """The finished runs whose training a guard ended (`RunResult.cut_by_guard`), in the plan's order."""
    return [result for result in results if result.finished and result.cut_by_guard]


def guard_warning(cut: Sequence[RunResult]) -> str | None:
    """One sentence naming the runs a guard cut and saying what follows; None when there are none."""
    if not cut:
        return None
    named = ", ".join(f"{r.spec.name} ({r.stop_reason})" for r in cut)
    return (f"a guard ended the training of {named} before its expansion budget or a stopping rule, "
            "so the comparison is not decided at equal expansions")  # fmt: skip


def _offline_result(
    plan: ComparePlan, spec: RunSpec, run: Run, train_total: int, sets: Mapping[str, TestSet | str]
) -> RunResult:
    """A run of a method that learns offline (HIPS-ε): no training searches (no curve); its hours are the
    offline training's."""
    rows = run.directory.read("learning")
    seconds = float(rows[-1]["seconds"]) if rows and rows[-1].get("seconds") else 0.0
    records = read_tests(plan, sets, run.path)
    return RunResult(spec, run.training_finished(), records.tests, None, plan.train_count(spec, train_total),
                     seconds / 3600, None, run.document, damaged=records.damaged, stale=records.stale,
                     unnamed=records.unnamed, buffered=records.buffered)  # fmt: skip


@dataclass(frozen=True)
class TestSet:
    """A comparison's test set: its levels, and the digest its records name (`level_set_digest`)."""

    levels: LevelSet
    digest: str


def test_sets(plan: ComparePlan, out: Path) -> dict[str, TestSet | str]:
    """The levels of each test set of the comparison in `out`, read once for all runs; a set that
    cannot be read gives the reason instead."""
    sets: dict[str, TestSet | str] = {}
    for name, path in problem_files(plan, out).tests.items():
        try:
            sets[name] = TestSet(read_levels(path), level_set_digest(path))
        except SgpsError as error:
            sets[name] = str(error)
    return sets


@dataclass(frozen=True)
class TestRecords:
    """A run's test records, per test set: counted, or why not."""

    tests: dict[str, TestResult]  # counted, summed up
    damaged: dict[str, str]  # not counted: not a whole record of the test procedure
    stale: dict[str, str]  # not counted: made with other weights than the run has now
    unnamed: dict[str, str]  # counted: made before records named their weights, so not checked against them
    buffered: dict[str, str]  # counted: searched in buffered order (evaluation batch > 1), not the procedure's


def read_tests(plan: ComparePlan, sets: Mapping[str, TestSet | str], run: Path) -> TestRecords:
    """The run's test records that count, summed up, and why each of the others does not.

    A record is counted only if it is exactly what the test procedure writes for the
    comparison's test set `sets[name]` (`test_sets`; `sgps.runs.testing.fault_in_test_record`,
    every solution replayed in its level): a cut, duplicated, edited or unreadable record is
    named, never reported as a result. And only if it names the weights `sgps test` tests
    now (`runstate.tested_weights`): a run trained further after its test (``sgps train
    --resume`` on a finished run) has a *stale* record, shown as such, not counted, and
    tested anew by `sgps compare`. A record made before records named their weights is
    counted, and named as unchecked (deleting it makes `sgps compare` test anew). So is a
    record whose searches gathered more than one child per evaluation (its `evaluation_batch`
    column; a record made before it had one was searched with its run's
    `search.evaluation_batch`): counted, and named as not searched in the test procedure's
    exact best-first order (spec 6.7), whose expansions it need not match.
    """
    records = TestRecords({}, {}, {}, {}, {})
    for test in plan.tests:
        record = test_csv(run, test.name)
        if not record.exists():
            continue
        try:
            rows = RunDirectory(run).read(record.stem)
        except CheckpointError as error:
            records.damaged[test.name] = str(error)
            continue
        test_set = sets[test.name]
        if isinstance(test_set, str):
            records.damaged[test.name] = f"{record}: its test set cannot be read ({test_set})"
            continue
        levels = test_set.levels
        fault = fault_in_test_record(rows, len(levels), test.budget, test.rounds, domain=levels.domain,
                                     starts=levels.states(), level_set=test_set.digest)  # fmt: skip
        if fault is not None:
            records.damaged[test.name] = f"{record}: not the record of a whole test of {len(levels)} problems ({fault})"
            continue
        named = rows[0].get("weights") or None
        if named is None:
            records.unnamed[test.name] = f"{record}: made before test records named their weights"
        else:
            try:
                weights = tested_weights(run)
            except CheckpointError as error:
                records.damaged[test.name] = f"{record}: its weights cannot be checked ({error})"
                continue
            if named != weights:
                records.stale[test.name] = f"{record}: made with other weights than the run's checkpoint now"
                continue
        batch = _record_evaluation_batch(rows, run)
        if batch != 1:
            records.buffered[test.name] = f"{record}: searched with an evaluation batch of {batch}"
        records.tests[test.name] = read_test(rows)
    return records


def _record_evaluation_batch(rows: Sequence[Mapping[str, str]], run: Path) -> int:
    """The evaluation batch a whole test record's searches used: its `evaluation_batch` column, or for
    a record made before records had one, the run's `search.evaluation_batch`, which tests then used."""
    named = rows[0].get("evaluation_batch") if rows else None
    if named:
        return int(named)
    opened = Run.open(run)  # an offline method's (HIPS-ε's) tests always searched in exact order
    return (opened.config.search.evaluation_batch or 1) if opened.plugin.bootstrap else 1


def read_test(rows: Sequence[Mapping[str, str]]) -> TestResult:
    """The rows of a whole test record (round, problem, solved, expanded, generated, length, budget, ...) summed up."""
    solved = [row for row in rows if row["solved"] == "1"]
    count = len(solved)
    lengths = [int(row["length"]) for row in solved]
    steps = [int(row["steps"]) for row in solved if row.get("steps")]
    return TestResult(
        problems=len({row["problem"] for row in rows}),
        solved=count,
        mean_expansions=sum(int(row["expanded"]) for row in solved) / count if count else None,
        mean_length=sum(lengths) / count if count else None,
        total_length=sum(lengths),
        mean_steps=sum(steps) / len(steps) if steps else None,
    )


def read_curve(directory: RunDirectory, train_count: int) -> Curve | None:
    """The run's outstanding-problems curve (see the module docstring for the two file formats)."""
    rows = directory.read("outstanding")
    batches = [row for row in rows if int(row["batch"]) >= 0]
    if not batches:
        return None
    measured = all(row.get("seconds") for row in batches)
    if measured:
        seconds = [float(row["seconds"]) for row in batches]
    else:
        search_seconds = _batch_search_seconds(directory.read("train"))
        seconds = list(np.cumsum([search_seconds.get((row["iteration"], row["batch"]), 0.0) for row in batches]))
    start = rows[0] if int(rows[0]["batch"]) < 0 else None
    initial = int(start["outstanding"]) if start is not None else train_count
    return Curve(
        expansions=np.array([0] + [int(row["cumulative_expansions"]) for row in batches], dtype=np.int64),
        seconds=np.array([0.0, *seconds]),
        outstanding=np.array([initial] + [int(row["outstanding"]) for row in batches], dtype=np.int64),
        measured_seconds=measured,
    )


def _batch_search_seconds(rows: Sequence[Mapping[str, str]]) -> dict[tuple[str, str], float]:
    """Per (iteration, batch): the longest search of the batch."""
    longest: dict[tuple[str, str], float] = {}
    for row in rows:
        key = (row["iteration"], row["batch"])
        longest[key] = max(longest.get(key, 0.0), float(row["seconds"]))
    return longest


def subgoal_distance(directory: RunDirectory) -> float | None:
    """The mean path length of the pairs drawn from failed trees; None for runs that drew none."""
    rows = directory.read("learning")
    total = pairs = 0.0
    for row in rows:
        length, count = row.get("failed_mean_length") or "", row.get("failed_pairs") or ""
        if length and count and float(count) > 0:
            total += float(length) * float(count)
            pairs += float(count)
    return total / pairs if pairs else None
