"""Two runs that searched the same problems in the same order, compared search by search.

Forks of one run (`sgps fork`), or runs that share problems, seed and loop, search the same
problem in the same batch, so their training searches pair up: which did each solve? This
script reads the runs' metrics/train.csv, keeps the searches both made (same iteration,
batch and problem; from batch `--from-batch` on), and prints per run the searches, solves
and expansions, the solves per window of `--window` batches, each solve (batch, problem,
expansions, moves), and the problems only one of them solved with the exact one-sided sign
test on those (the chance that the run with more would get at least that many of them if
each were a fair coin). Usage::

    python benchmarks/paired_runs.py fork-a-16000 fork-j-16000 --from-batch 157

``--learning COLUMN ...`` also compares what the two learners measured on the batches both
learned from (metrics/learning.csv, docs/training.md): one line per `--window` batches with
the mean of each column in either run. ``COLUMN/N`` divides it by N (``loss_low/16000``: π_low's
loss over the Levin weight of a budget of 16,000, a mean cross-entropy). Usage::

    python benchmarks/paired_runs.py relu linear --window 5 \
        --learning probe_low_nll probe_low_accuracy loss_low/16000 probe_reached
"""

from __future__ import annotations

import argparse
import csv
from math import comb
from pathlib import Path


def metrics_rows(run: Path, name: str, from_batch: int, keys: tuple[str, ...]) -> dict[tuple[int, ...], dict[str, str]]:
    """The rows of the run's metrics/`name`.csv from batch `from_batch` of the first pass on, by the
    integer values of their `keys` columns."""
    with (run / "metrics" / f"{name}.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {tuple(int(row[key]) for key in keys): row for row in rows
            if (int(row["iteration"]), int(row["batch"])) >= (0, from_batch)}  # fmt: skip


def searches(run: Path, from_batch: int) -> dict[tuple[int, ...], dict[str, str]]:
    """The run's training searches from `from_batch` on, by (iteration, batch, problem)."""
    return metrics_rows(run, "train", from_batch, ("iteration", "batch", "problem"))


def learning(run: Path, from_batch: int) -> dict[tuple[int, ...], dict[str, str]]:
    """The run's learning updates from `from_batch` on, by (iteration, batch)."""
    return metrics_rows(run, "learning", from_batch, ("iteration", "batch"))


def column_means(rows: list[dict[str, str]], column: str) -> str:
    """The mean of `column` (``NAME/N``: of NAME divided by N) over `rows`, where it was measured."""
    name, _, divisor = column.partition("/")
    values = [float(row[name]) / float(divisor or 1) for row in rows if row.get(name)]
    return f"{sum(values) / len(values):.2f}" if values else "-"


def compare_learning(runs: list[Path], from_batch: int, window: int, columns: list[str]) -> None:
    """Print, per `window` batches both runs learned from, the mean of each of `columns` in each run."""
    found = [learning(run, from_batch) for run in runs]
    shared = sorted(found[0].keys() & found[1].keys())
    if not shared:
        raise SystemExit("the two runs have no learning update of the same batch (metrics/learning.csv)")
    missing = [column for column in columns if column.partition("/")[0] not in found[0][shared[0]]]
    if missing:
        raise SystemExit(f"metrics/learning.csv has no column {', '.join(missing)}")
    print(f"learning updates both made: {len(shared)}; per window, {runs[0]} | {runs[1]}")
    print("batches | " + " | ".join(f"{column}: a / b" for column in columns))
    for start in range(0, len(shared), window):
        keys = shared[start : start + window]
        means = [" / ".join(column_means([rows[key] for key in keys], column) for rows in found) for column in columns]
        print(f"{keys[0][1]}-{keys[-1][1]} | " + " | ".join(means))


def sign_test(more: int, fewer: int) -> float:
    """One-sided exact sign test: P(X >= more) for X ~ Binomial(more + fewer, 1/2)."""
    total = more + fewer
    return sum(comb(total, k) for k in range(more, total + 1)) / 2**total if total else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs=2, help="two run folders")
    parser.add_argument("--from-batch", type=int, default=0, help="the first batch of the first pass to count")
    parser.add_argument("--window", type=int, default=10, help="batches per line of solves (and of --learning)")
    parser.add_argument("--learning", nargs="+", default=[], metavar="COLUMN",
                        help="also compare these metrics/learning.csv columns (COLUMN/N: divided by N)")  # fmt: skip
    args = parser.parse_args()
    if args.window < 1:
        parser.error(f"--window must be at least 1, got {args.window}")
    found = [searches(run, args.from_batch) for run in args.runs]
    shared = sorted(found[0].keys() & found[1].keys())
    if not shared:
        parser.error("the two runs made no search of the same problem in the same batch")
    batches = sorted({key[:2] for key in shared})
    print(f"{len(shared):,} searches both made, batches {batches[0]} to {batches[-1]} (iteration, batch)")
    solved = []
    for run, rows in zip(args.runs, found, strict=True):
        mine = {key for key in shared if rows[key]["solved"] == "1"}
        solved.append(mine)
        expanded = sum(int(rows[key]["expanded"]) for key in shared)
        windows = [sum(1 for key in mine if start <= batches.index(key[:2]) < start + args.window)
                   for start in range(0, len(batches), args.window)]  # fmt: skip
        print(f"{run}: {len(mine)} solved, {expanded:,} expansions; per {args.window} batches: {windows}")
        for key in sorted(mine):
            print(f"    batch {key[1]}: problem {key[2]}, {int(rows[key]['expanded']):,} expansions, "
                  f"{rows[key]['length']} moves")  # fmt: skip
    only = [len(solved[0] - solved[1]), len(solved[1] - solved[0])]
    more = max(only)
    print(f"both solved {len(solved[0] & solved[1])}; only {args.runs[0]}: {only[0]}, only {args.runs[1]}: {only[1]}; "
          f"one-sided sign test p = {sign_test(more, sum(only) - more):.3f}")  # fmt: skip
    if args.learning:
        compare_learning(args.runs, args.from_batch, args.window, args.learning)


if __name__ == "__main__":
    main()
