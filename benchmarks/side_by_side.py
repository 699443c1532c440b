"""Expansions/s of a comparison's runs beside one another against the same runs alone.

`sgps compare` runs one training per core. This script measures what that costs each
run: for every run named (default: seed 0 of each algorithm) it trains the run again
*alone*, with the comparison's own config, problems and thread count, for its first
`--batches` batches, and compares the wall-clock seconds with those the run took for
the same batches inside the comparison (its `metrics/outstanding.csv`). Training is
deterministic, so both searched the same expansions (the script checks this); the
ratio of the times is the slowdown of running beside the others. Run it on an idle
machine. Usage::

    python benchmarks/side_by_side.py COMPARE_DIR [--runs phs-s0,phs-sg-s0] [--batches 4] [--scratch DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def outstanding_row(run: Path, batches: int) -> tuple[int, float]:
    """(cumulative expansions, seconds) after the run's first `batches` batches."""
    with open(run / "metrics" / "outstanding.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["batch"]) >= 0]
    if len(rows) < batches:
        raise SystemExit(f"{run} logged only {len(rows)} batches; ask for --batches {len(rows)} or fewer")
    row = rows[batches - 1]
    return int(row["cumulative_expansions"]), float(row["seconds"])


def train_alone(compare_dir: Path, name: str, batches: int, scratch: Path) -> Path:
    """Train run `name` of the comparison alone for `batches` batches, as the comparison started it."""
    command_line = (compare_dir / "logs" / f"{name}.log").read_text().splitlines()[0]
    arguments = command_line.removeprefix("$ ").split()
    arguments = arguments[arguments.index("train") :]  # the log names the interpreter differently by version
    out = scratch / name
    shutil.rmtree(out, ignore_errors=True)
    arguments[arguments.index("--out") + 1] = str(out)
    arguments += ["--max-batches", str(batches)]
    threads = arguments[arguments.index("--threads") + 1]
    environment = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    subprocess.run([sys.executable, "-m", "sgps", *arguments], check=True, stdout=subprocess.DEVNULL, env=environment)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compare_dir", type=Path)
    parser.add_argument("--runs", help="comma-separated run names (default: seed 0 of each algorithm)")
    parser.add_argument("--batches", type=int, default=4, help="batches to time (default: 4)")
    parser.add_argument("--scratch", type=Path, help="where the lone runs go (default: a temporary folder)")
    args = parser.parse_args()
    runs_dir = args.compare_dir / "runs"
    names = args.runs.split(",") if args.runs else sorted(p.name for p in runs_dir.iterdir() if p.name.endswith("-s0"))
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="side-by-side-"))
    print(f"{args.compare_dir}: first {args.batches} batches of each run, beside the others vs alone")
    print(f"{'run':<14} {'expansions':>11} {'beside: s':>10} {'exp/s':>8} {'alone: s':>9} {'exp/s':>8} {'slowdown':>9}")
    for name in names:
        expansions, beside = outstanding_row(runs_dir / name, args.batches)
        alone_expansions, alone = outstanding_row(train_alone(args.compare_dir, name, args.batches, scratch),
                                                  args.batches)  # fmt: skip
        if alone_expansions != expansions:
            raise SystemExit(f"{name}: {alone_expansions:,} expansions alone against {expansions:,}: not the same run")
        print(f"{name:<14} {expansions:>11,} {beside:>10.1f} {expansions / beside:>8,.0f} {alone:>9.1f} "
              f"{expansions / alone:>8,.0f} {beside / alone:>8.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
