"""When training runs reached their milestones: the first solve, then 10%, 50% and 90% of their problems.

The recipe comparison (docs/results/recipes.md) ranks training recipes by
the expansions a run needs to solve its training problems; this script reads them off
each run's ``metrics/outstanding.csv``, whose rows give, after every batch, the run's
cumulative expansions and the problems still unsolved (its first row, batch -1, the
count before any search). A milestone is the first batch after which at least that share
of the problems is solved (the first solve: at least one), and it is given as the
cumulative expansions, the batches searched (that one included) and the hours then. π^SG
learns once after each batch, so the searches that reached a milestone in batch N had N - 1
updates behind them. A run that has
not reached one shows how far it got: "not by E". The counts depend only on the runs'
searches, so they are the same on any machine (the hours aside). Usage::

    python benchmarks/milestones.py recipe/runs/memory-16000-s0 campaign/runs/phs-sg-s0 \\
        --names "hard recipe" "the paper's loop"
"""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import dataclass
from pathlib import Path

#: The shares of the training problems a milestone stands for (the first solve is always reported).
FRACTIONS = (0.1, 0.5, 0.9)


@dataclass(frozen=True)
class Point:
    """The state of a run after one batch."""

    batches: int  # batches searched so far, this one included
    expansions: int  # cumulative training expansions
    solved: int  # training problems solved so far
    hours: float  # cumulative training time


def progress(run: Path) -> tuple[int, list[Point]]:
    """The run's number of training problems and its state after each batch (metrics/outstanding.csv)."""
    with (run / "metrics" / "outstanding.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise SystemExit(f"{run}: metrics/outstanding.csv has no rows")
    total = int(rows[0]["outstanding"])  # the first row is written before the first batch
    points = [Point(batches, int(row["cumulative_expansions"]), total - int(row["outstanding"]),
                    float(row["seconds"]) / 3600) for batches, row in enumerate(rows[1:], start=1)]  # fmt: skip
    return total, points


def reached(points: list[Point], solved: int) -> Point | None:
    """The first point with at least `solved` problems solved (None: not yet)."""
    return next((point for point in points if point.solved >= solved), None)


def describe(point: Point | None, last: Point | None) -> str:
    if point is None:
        return f"not by {last.expansions / 1e6:.2f} M" if last else "no batch yet"
    return f"{point.expansions / 1e6:.2f} M ({point.batches} batches, {point.hours:.1f} h)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders")
    parser.add_argument("--names", nargs="+", help="a name for each run in the table (default: the folders)")
    parser.add_argument("--fractions", nargs="+", type=float, default=list(FRACTIONS),
                        help="shares of the training problems to report (default: 0.1 0.5 0.9)")  # fmt: skip
    args = parser.parse_args()
    names = args.names or [str(run) for run in args.runs]
    if len(names) != len(args.runs):
        raise SystemExit("give one --names entry per run")
    shares = [f"{fraction:.0%}" for fraction in args.fractions]
    print("| run | problems | first solve | " + " | ".join(shares) + " | last batch |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in shares) + " | --- |")
    for name, run in zip(names, args.runs, strict=True):
        total, points = progress(run)
        last = points[-1] if points else None
        cells = [describe(reached(points, 1), last)]
        cells += [describe(reached(points, math.ceil(fraction * total)), last) for fraction in args.fractions]
        end = f"{last.solved:,} solved at {last.expansions / 1e6:.2f} M ({last.batches} batches)" if last else "-"
        print(f"| {name} | {total:,} | " + " | ".join(cells) + f" | {end} |")


if __name__ == "__main__":
    main()
