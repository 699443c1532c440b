"""The test procedure (spec/algorithms.md 6.7): budget doubling over rounds on unsolved problems."""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sgps.domains.base import Domain
from sgps.fileio import atomic_write_text
from sgps.search.children import ChildGenerator
from sgps.search.costs import Algorithm
from sgps.search.drivers import search_lockstep
from sgps.search.engine import SearchResult
from sgps.search.evaluators import Evaluator

#: The columns of a test record (metrics/test-NAME.csv): one row per attempt.
TEST_COLUMNS = ("round", "problem", "solved", "expanded", "generated", "length", "budget", "seconds", "steps")


def fault_in_test_record(rows: Sequence[Mapping[str, str]], problems: int, budget: int, rounds: int) -> str | None:
    """What makes `rows` not the record of a whole test of `problems` problems; None when nothing does.

    `run_test` writes the record in one piece at the end, so a whole record is exact:
    round 1 tries problems 0..N-1 in order with `budget`, and each later round r (at most
    `rounds`) tries, in order, the problems still unsolved, with budget * 2^(r-1), until
    none is left or the rounds are spent. A cut, duplicated, edited or foreign record
    breaks this and is named instead of being counted as a result.
    """
    try:
        attempts = [_attempt(row) for row in rows]
    except (KeyError, TypeError, ValueError):
        return "a row is not an attempt: round, problem, expanded, budget, steps and a solved length are integers"
    unsolved = list(range(problems))
    position = 0
    for round_number in range(1, rounds + 1):
        if not unsolved:
            break
        tried = attempts[position : position + len(unsolved)]
        expected = [(round_number, problem, budget * 2 ** (round_number - 1)) for problem in unsolved]
        if [(r, p, b) for r, p, _, b in tried] != expected:
            if len(tried) < len(unsolved):
                return f"it ends in round {round_number} after {len(tried)} of its {len(unsolved)} attempts"
            round_budget = budget * 2 ** (round_number - 1)
            return f"round {round_number} does not try the unsolved problems in order with budget {round_budget:,}"
        if any(solved not in ("0", "1") for _, _, solved, _ in tried):
            return f"round {round_number} has a solved value other than 0 or 1"
        unsolved = [problem for (_, problem, solved, _) in tried if solved == "0"]
        position += len(tried)
    if position != len(attempts):
        return f"it holds {len(attempts) - position} rows after the last round's attempts"
    return None


def _attempt(row: Mapping[str, str]) -> tuple[int, int, str, int]:
    """(round, problem, solved, budget) of a record row whose numbers parse (ValueError otherwise)."""
    int(row["expanded"])
    if row.get("steps"):
        int(row["steps"])
    if row["solved"] == "1":
        int(row["length"])
    return int(row["round"]), int(row["problem"]), row["solved"], int(row["budget"])


class TestProgress(Protocol):
    """Told, during a test round, how many of its searches have finished."""

    def __call__(self, round_number: int, budget: int, finished: int, *, total: int) -> None: ...


@dataclass(frozen=True)
class TestSummary:
    """The paper's table row, plus the effort spent on failed rounds."""

    problems: int
    solved: int
    mean_expansions: float | None  # over solved problems, the successful attempt only (as the paper)
    mean_length: float | None
    total_expansions: int  # every attempt of every round
    total_domain_steps: int = 0  # primitive transitions of every attempt (HIPS-ε's rollouts included)

    def table_row(self) -> str:
        expansions = "-" if self.mean_expansions is None else f"{self.mean_expansions:,.1f}"
        length = "-" if self.mean_length is None else f"{self.mean_length:.2f}"
        return (f"solved {self.solved}/{self.problems} | mean expansions {expansions} | mean length {length} | "
                f"low-level steps {self.total_domain_steps:,}")  # fmt: skip


def run_test(
    domain: Domain[Any],
    levels: Sequence[Any],
    algorithm: Algorithm,
    evaluator: Evaluator,
    *,
    budget: int = 4000,
    rounds: int = 1,
    epsilon: float = 0.01,
    csv_path: Path | None = None,
    search_batch: Callable[[Sequence[Any], int], list[SearchResult]] | None = None,
    children: ChildGenerator[Any] | None = None,
    progress: TestProgress | None = None,
) -> TestSummary:
    """Round r searches every still-unsolved problem with budget `budget` * 2^(r-1), in exact order.

    The CSV has a row per attempt; its `steps` column counts the primitive transitions
    the search computed (`SearchResult.domain_steps`), the measure of effort that
    compares HIPS-ε, whose budget does not count its rollouts, with the other searches.

    `search_batch(levels, budget)`: where a round's searches run (e.g. Ray actors holding
    the same model); None searches in this process, in lockstep with `evaluator`, expanding
    through `children` when given (HIPS-ε's hybrid children), and tells `progress`
    (round, budget, searches finished, searches in the round) as searches finish.
    """
    rows = []
    solved: dict[int, tuple[int, int]] = {}  # problem -> (expansions, length) of the solving attempt
    total = steps = 0
    unsolved = list(range(len(levels)))
    for round_number in range(1, rounds + 1):
        if not unsolved:
            break
        round_budget = budget * 2 ** (round_number - 1)
        batch = [levels[i] for i in unsolved]
        if search_batch is not None:
            results = search_batch(batch, round_budget)
        else:
            on_finished = None if progress is None else functools.partial(progress, round_number, round_budget,
                                                                         total=len(batch))  # fmt: skip
            if on_finished is not None:
                on_finished(0)
            results = search_lockstep(domain, batch, algorithm, evaluator, budget=round_budget, epsilon=epsilon,
                                      children=children, on_finished=on_finished)  # fmt: skip
        for problem, result in zip(unsolved, results, strict=True):
            total += result.expanded
            steps += result.domain_steps
            rows.append([round_number, problem, int(result.solved), result.expanded, result.generated,
                         result.length if result.solved else "", round_budget, f"{result.seconds:.4f}",
                         result.domain_steps])  # fmt: skip
            if result.solved:
                solved[problem] = (result.expanded, result.length)
        unsolved = [p for p in unsolved if p not in solved]
    if csv_path is not None:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(TEST_COLUMNS)
        writer.writerows(rows)
        atomic_write_text(csv_path, buffer.getvalue())
    count = len(solved)
    return TestSummary(
        problems=len(levels),
        solved=count,
        mean_expansions=sum(e for e, _ in solved.values()) / count if count else None,
        mean_length=sum(n for _, n in solved.values()) / count if count else None,
        total_expansions=total,
        total_domain_steps=steps,
    )
