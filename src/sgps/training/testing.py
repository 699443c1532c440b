"""The test procedure (spec/algorithms.md 6.7): budget doubling over rounds on unsolved problems."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.domains.base import Domain
from sgps.fileio import atomic_write_text
from sgps.search.costs import Algorithm
from sgps.search.drivers import search_lockstep
from sgps.search.engine import SearchResult
from sgps.search.evaluators import Evaluator


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
) -> TestSummary:
    """Round r searches every still-unsolved problem with budget `budget` * 2^(r-1), in exact order.

    The CSV has a row per attempt; its `steps` column counts the primitive transitions
    the search computed (`SearchResult.domain_steps`), the measure of effort that
    compares HIPS-ε, whose budget does not count its rollouts, with the other searches.

    `search_batch(levels, budget)`: where a round's searches run (e.g. Ray actors holding
    the same model); None searches in this process, in lockstep with `evaluator`.
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
            results = search_lockstep(domain, batch, algorithm, evaluator, budget=round_budget, epsilon=epsilon)
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
        writer.writerow(["round", "problem", "solved", "expanded", "generated", "length", "budget", "seconds", "steps"])
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
