"""Where a training run's wall clock went: searching, validating, and learning (everything else).

Reads only a run directory's metrics. A batch's searches run side by side in lockstep, so the
batch's search time is its longest search (`metrics/train.csv`, `seconds`), and likewise for
each validation batch; the loop's clock (`metrics/outstanding.csv`, `seconds`) holds the rest:
learning (the model update after every batch: for π^SG the VQ-VAE, the cluster hierarchy, the
pairs and the three networks), checkpoints and logging. Prints one line per run::

    python benchmarks/batch_time.py RUN [RUN ...]

The runs must have searched in-process (`run.workers = 1`, as `sgps compare` runs them): with a
worker pool the searches of a batch overlap across processes and the split means nothing.
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path


def longest_per_batch(path: Path) -> float:
    """The sum over batches of each batch's longest search, in seconds."""
    longest: dict[tuple[str, str], float] = defaultdict(float)
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            key = (row["iteration"], row["batch"])
            longest[key] = max(longest[key], float(row["seconds"]))
    return sum(longest.values())


def split(run: Path) -> tuple[int, int, float, float, float, float]:
    """(batches, expansions, total s, search s, validation s, learning and the rest s) of `run`."""
    with open(run / "metrics" / "outstanding.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["batch"]) >= 0]
    total = float(rows[-1]["seconds"])
    search = longest_per_batch(run / "metrics" / "train.csv")
    validation = longest_per_batch(run / "metrics" / "validate.csv")
    return len(rows), int(rows[-1]["cumulative_expansions"]), total, search, validation, total - search - validation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    args = parser.parse_args()
    print(f"{'run':<28} {'batches':>7} {'expansions':>11} {'minutes':>7} {'search':>7} {'validation':>10} "
          f"{'learning+':>9} {'train exp/s':>11} {'s/batch learning+':>17}")  # fmt: skip
    for run in args.runs:
        batches, expansions, total, search, validation, rest = split(run)
        print(f"{run.name:<28} {batches:>7} {expansions:>11,} {total / 60:>7.1f} {search / total:>7.0%} "
              f"{validation / total:>10.0%} {rest / total:>9.0%} {expansions / search:>11,.0f} "
              f"{rest / batches:>17.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
