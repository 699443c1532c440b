"""Choosing the `cpu` preset's network size: which size learns fastest per wall-clock second here?

Trains flat PHS*(π) with the `cpu` preset, changing only the network size, for the
same wall-clock time on the same problems, and prints per size: passes, batches,
training problems solved, training expansions, best validation count, and the
lockstep search rate. Runs `--parallel` trainings at a time, each in one process
with one torch thread (`--workers 1`), so the sizes compete on equal terms.
Usage::

    python benchmarks/cpu_preset.py --problems TRAIN --validation VAL [--minutes 6] [--sizes 16x1,32x2,64x2,64x4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sgps.runs.rundir import RunDirectory


def train(size: str, args: argparse.Namespace, root: Path) -> dict[str, float]:
    """One time-limited training run with `size` = CHANNELSxBLOCKS; its summary."""
    channels, blocks = (int(x) for x in size.split("x"))
    config = root / f"{size}.toml"
    config.write_text(f"[network]\nchannels = {channels}\nblocks = {blocks}\n")
    run = root / f"run-{size}"
    command = [
        sys.executable, "-m", "sgps", "train", "--problems", str(args.problems), "--validation", str(args.validation),
        "--out", str(run), "--config", str(config), "--workers", "1", "--device", "cpu", "--quiet",
        "--time-limit", str(args.minutes), "--max-iterations", "100", "--seed", str(args.seed),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(command, check=True, env=env, capture_output=True, text=True)
    metrics = RunDirectory(run)
    rows, validation = metrics.read("train"), metrics.read("validate")
    by_pass = Counter(row["iteration"] for row in validation if row["solved"] == "1")
    batch_seconds: dict[tuple[str, str], float] = {}  # a lockstep batch lasts as long as its longest search
    for r in rows:
        key = (r["iteration"], r["batch"])
        batch_seconds[key] = max(batch_seconds.get(key, 0.0), float(r["seconds"]))
    seconds = sum(batch_seconds.values())
    expanded = sum(int(r["expanded"]) for r in rows)
    return {
        "passes": len({row["iteration"] for row in validation}),
        "batches": len(batch_seconds),
        "solved": len({r["problem"] for r in rows if r["solved"] == "1"}),
        "expansions": expanded,
        "validation": max(by_pass.values(), default=0),
        "search_rate": expanded / seconds if seconds else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, required=True, help="training levels")
    parser.add_argument("--validation", type=Path, required=True, help="validation levels")
    parser.add_argument("--minutes", type=float, default=6.0, help="wall-clock limit of each run")
    parser.add_argument("--sizes", default="16x1,32x2,64x2,64x4", help="CHANNELSxBLOCKS, comma-separated")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time (default: 2)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = args.sizes.split(",")
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(args.parallel) as pool:
        summaries = list(pool.map(lambda size: train(size, args, Path(folder)), sizes))
    print(f"flat PHS*(pi), cpu preset, {args.minutes} min per run, {args.parallel} runs at a time, seed {args.seed}")
    header = ("size", "passes", "batches", "solved", "expansions", "validation", "search exp/s")
    print("{:<7} {:>6} {:>7} {:>6} {:>11} {:>10} {:>12}".format(*header))
    for size, s in zip(sizes, summaries, strict=True):
        print(f"{size:<7} {s['passes']:>6} {s['batches']:>7} {s['solved']:>6} {s['expansions']:>11,} "
              f"{s['validation']:>10} {s['search_rate']:>12,.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
