"""Where a training run's wall clock went: searching, validating, and learning (everything else).

Reads only a run directory's metrics. A batch's searches run side by side in lockstep, so the
batch's search time is its longest search (`metrics/train.csv`, `seconds`), and likewise for
each validation batch; the loop's clock (`metrics/outstanding.csv`, `seconds`) holds the rest:
learning (the model update after every batch: for π^SG the VQ-VAE, the cluster hierarchy, the
pairs and the three networks), checkpoints and logging. Prints one line per run::

    python benchmarks/batch_time.py RUN [RUN ...] [--batches FIRST LAST]

``--batches FIRST LAST`` counts only the run's FIRST-th to LAST-th batches (from 0, across
passes: in the first pass, the batch number), so that runs are compared on the same batches:
a fork's metrics hold its parent's rows, and two runs stopped at different points mix
different phases. A run without those batches is refused. The validation of a pass counts
with the batch after it (the loop's clock between the two holds it); the validation after
the last batch counted lies outside the clock read and is left out.

The runs must have searched in-process (`run.workers = 1`, as `sgps compare` runs them): with a
worker pool the searches of a batch overlap across processes and the split means nothing.
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

Batch = tuple[int, int]  # (iteration, batch)


def longest_per_batch(path: Path) -> dict[Batch, float]:
    """Each (iteration, batch)'s longest search of `path` (train.csv or validate.csv), in seconds."""
    longest: dict[Batch, float] = defaultdict(float)
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            key = (int(row["iteration"]), int(row["batch"]))
            longest[key] = max(longest[key], float(row["seconds"]))
    return longest


def split(run: Path, batches: tuple[int, int] | None = None) -> tuple[int, int, float, float, float, float]:
    """(batches, expansions, total s, search s, validation s, learning and the rest s) of `run`'s
    batches `batches` (first and last, counted from 0 across passes; None: all of them)."""
    with open(run / "metrics" / "outstanding.csv", newline="") as handle:
        clock = [row for row in csv.DictReader(handle)]  # the first row (batch -1) is the start
    rows = [row for row in clock if int(row["batch"]) >= 0]
    first, last = batches if batches is not None else (0, len(rows) - 1)
    if not 0 <= first <= last < len(rows):
        raise SystemExit(f"{run}: has batches 0 to {len(rows) - 1}, not {first} to {last}")
    before = clock[clock.index(rows[first]) - 1]
    chosen = rows[first : last + 1]
    keys = {(int(row["iteration"]), int(row["batch"])) for row in chosen}
    total = float(chosen[-1]["seconds"]) - float(before["seconds"])
    expansions = int(chosen[-1]["cumulative_expansions"]) - int(before["cumulative_expansions"])
    search = sum(seconds for key, seconds in longest_per_batch(run / "metrics" / "train.csv").items() if key in keys)
    # A pass's validation runs between its last batch and the next pass's first (iteration i + 1, batch 0).
    validated = {iteration - 1 for iteration, batch in keys if batch == 0}
    validation = sum(seconds for (iteration, _), seconds in longest_per_batch(run / "metrics" / "validate.csv").items()
                     if iteration in validated)  # fmt: skip
    return len(chosen), expansions, total, search, validation, total - search - validation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    parser.add_argument("--batches", nargs=2, type=int, metavar=("FIRST", "LAST"),
                        help="count only these batches of each run (from 0, across passes)")  # fmt: skip
    args = parser.parse_args()
    print(f"{'run':<28} {'batches':>7} {'expansions':>11} {'minutes':>7} {'search':>7} {'validation':>10} "
          f"{'learning+':>9} {'train exp/s':>11} {'s/batch learning+':>17}")  # fmt: skip
    for run in args.runs:
        batches, expansions, total, search, validation, rest = split(run, args.batches)
        print(f"{run.name:<28} {batches:>7} {expansions:>11,} {total / 60:>7.1f} {search / total:>7.0%} "
              f"{validation / total:>10.0%} {rest / total:>9.0%} {expansions / search:>11,.0f} "
              f"{rest / batches:>17.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
