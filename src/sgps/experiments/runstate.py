"""Where a run of a comparison stands, read from its run directory (docs/training.md).

A run is *finished* when the loop state of its trainer checkpoint says so and the test
CSV of every test set exists, made with the weights `sgps test` tests now
(`made_with_other_weights`); a run with a checkpoint that is not finished was
interrupted and resumes with ``sgps train --resume``, and so does a run that a limit
stopped once its comparison raises that limit (`limits_raised`). Progress comes from the last
rows of the metrics CSVs, read from the end of the files so that it stays cheap for
runs of many passes.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.errors import CheckpointError
from sgps.fileio import open_regular, read_regular_text
from sgps.models.checkpoint import weights_digest
from sgps.runs.run import checkpoint_path, loop_state
from sgps.runs.testing import journal_path
from sgps.training.bootstrap import LIMIT_STOPS, BootstrapConfig, limit_reached

_TAIL_BYTES = 8192


@dataclass(frozen=True)
class RunProgress:
    """The last batch a training run logged."""

    iteration: int  # passes completed before this batch
    budget: int | None
    outstanding: int


#: How the loop's log names each reason to stop (runs written before the loop state recorded it).
_LOGGED_STOPS = {
    "every training problem is solved": "every training problem solved",
    "validation target reached": "validation rule",
    "stopping: expansion limit reached": "expansion limit",
    "stopping: iteration limit reached": "iteration limit",
    "stopping: wall-clock limit reached": "wall-clock limit",
}


def stop_reason(run: Path, state: dict[str, Any]) -> str:
    """Why the finished run `run` (loop state `state`) stopped: one of `bootstrap.STOP_REASONS`.

    Runs whose checkpoint predates the recorded reason are read from the last such line of
    their log.txt; "" when neither tells.
    """
    if state.get("stop_reason"):
        return str(state["stop_reason"])
    try:
        lines = read_regular_text(run / "log.txt", errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    for line in reversed(lines):
        for text, reason in _LOGGED_STOPS.items():
            if text in line:
                return reason
    return ""


def limits_raised(run: Path, config: BootstrapConfig) -> bool:
    """Whether the run in folder `run` stopped at a limit (iterations, wall clock, expansions) that
    `config`'s limits no longer reach: its comparison's limits were raised since, so it trains on."""
    state = loop_state(run)
    if state is None or not state.get("finished") or stop_reason(run, state) not in LIMIT_STOPS:
        return False
    spent = {"iteration": int(state["iteration"]), "expansions": int(state["cumulative_expansions"]),
             "seconds": float(state["seconds"])}  # fmt: skip
    return limit_reached(config, **spent) is None


def test_csv(run: Path, test: str) -> Path:
    """Where `sgps test` writes the per-problem rows of test set `test` (its level file's stem)."""
    return run / "metrics" / f"test-{test}.csv"


def tested_weights(run: Path) -> str:
    """What names the weights `sgps test RUN` tests (best, or latest before any validation): those a
    test record of the run must name to count as its result (`CheckpointError`: none can be read)."""
    return weights_digest(checkpoint_path(run, "best"))


def record_weights(record: Path) -> str | None:
    """The weights the test record `record` names (its first row's `weights` column); None for a record
    made before records named their weights, and for one without rows or that cannot be read."""
    try:
        with open_regular(record, newline="") as handle:
            first = next(csv.DictReader(handle), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return (first.get("weights") or None) if first is not None else None


def made_with_other_weights(run: Path, test: str) -> bool:
    """Whether the run's record of test set `test` names weights other than those `sgps test` tests now:
    the run was trained further (``sgps train --resume`` on a finished run) after it was tested.

    False for a missing record, for one that names no weights (made before records named them)
    and when the run's checkpoint cannot be read: `sgps report` names those.
    """
    named = record_weights(test_csv(run, test))
    if named is None:
        return False
    try:
        return named != tested_weights(run)
    except CheckpointError:
        return False


def journalled_attempts(run: Path, test: str) -> int:
    """Attempts journalled so far by the unfinished test of test set `test` (`sgps.runs.testing.AttemptJournal`)."""
    try:
        text = read_regular_text(journal_path(test_csv(run, test)), errors="replace")
    except FileNotFoundError:
        return 0
    return max(text.count("\n") - 2, 0)  # the identity and the header; a cut last row has no newline yet


def training_progress(run: Path) -> RunProgress | None:
    """The pass, budget and outstanding count after the run's last logged batch, if it logged one."""
    outstanding = last_row(run / "metrics" / "outstanding.csv")
    if outstanding is None or int(outstanding.get("batch", 0)) < 0:
        return None
    searched = last_row(run / "metrics" / "train.csv")
    budget = int(searched["budget"]) if searched and searched.get("budget") else None
    return RunProgress(int(outstanding["iteration"]), budget, int(outstanding["outstanding"]))


def last_row(path: Path) -> dict[str, str] | None:
    """The last complete data row of a CSV file, keyed by its header; None if it has none."""
    try:
        with open_regular(path, "rb") as handle:
            header = handle.readline()
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(len(header), size - _TAIL_BYTES))
            tail = handle.read()
    except FileNotFoundError:
        return None
    lines = [line for line in tail.decode("utf-8", "replace").split("\n")[:-1] if line.strip()]
    if not lines:
        return None
    names = next(csv.reader([header.decode("utf-8", "replace")]))
    values = next(csv.reader([lines[-1]]))
    return dict(zip(names, values, strict=True)) if len(values) == len(names) else None
