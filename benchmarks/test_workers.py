"""How much `sgps test --workers N` gains over testing in one process, and continued rounds over
rounds searched afresh (`--restart-rounds`), on hard BoulderDash.

A `cpu`-preset run is trained for one batch (its network barely trained: what matters
here is the cost of the searches, not how many it solves), then `sgps test` runs on the
same generated levels with each worker count and each way of searching the rounds.
Printed per test: wall seconds of the whole test (pool start included), the nodes its
searches expanded (a continued problem's last attempt holds its earlier rounds'; the
record's own total counts them again) and those per second, problems solved, and whether
the record equals the first test's attempt for attempt (timings aside). Usage::

    python benchmarks/test_workers.py [--workers 1,2] [--count 64] [--budget 1000] [--rounds 1]
                                      [--modes continued,afresh] [--algorithm phs]
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

import torch

from sgps.domains import get_domain, write_levels
from sgps.domains.generation import generate_levels, resolve_params
from sgps.runs import runner


def record(run: Path, name: str) -> list[dict[str, str]]:
    with open(run / "metrics" / f"test-{name}.csv", newline="") as handle:
        return [{key: value for key, value in row.items() if key != "seconds"} for row in csv.DictReader(handle)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (default: 1,2)")
    parser.add_argument("--count", type=int, default=64, help="test levels (default: 64)")
    parser.add_argument("--budget", type=int, default=1000, help="first-round budget (default: 1000)")
    parser.add_argument("--rounds", type=int, default=1, help="test rounds, doubling the budget (default: 1)")
    parser.add_argument("--modes", default="continued",
                        help="comma-separated: continued (each problem's search goes on through its rounds, "
                             "sgps test's default), afresh (--restart-rounds) (default: continued)")  # fmt: skip
    parser.add_argument("--algorithm", default="phs", help="phs, levin, wastar, phs-sg or levin-sg (default: phs)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    domain = get_domain("boulderdash")
    params = resolve_params(domain, "hard")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        train, test = root / "train.txt", root / "levels.txt"
        write_levels(train, domain, generate_levels(domain, params, 7, 40), variant="hard", seed=7, params=params)
        write_levels(test, domain, generate_levels(domain, params, 40000, args.count), variant="hard", seed=40000,
                     params=params)  # fmt: skip
        run = root / "run"
        overrides = {"run": {"algorithm": args.algorithm, "device": "cpu", "workers": 1}}
        runner.train(train, run, preset="cpu", overrides=overrides, quiet=True, max_batches=1)
        print(f"hard BoulderDash, {args.count} levels, {args.algorithm}, cpu preset, budget {args.budget} "
              f"over {args.rounds} rounds, torch {torch.__version__}")  # fmt: skip
        header = f"{'workers':>7s} {'rounds':>9s} {'seconds':>8s} {'expanded':>10s} {'exp/s':>9s} {'solved':>7s}"
        print(f"{header}  same record")
        first = None
        for workers in (int(text) for text in args.workers.split(",")):
            for mode in args.modes.split(","):
                if mode not in ("continued", "afresh"):
                    parser.error(f"--modes: {mode!r} is neither continued nor afresh")
                started = time.perf_counter()
                summary = runner.test(run, test, budget=args.budget, rounds=args.rounds, workers=workers,
                                      restart_rounds=mode == "afresh")  # fmt: skip
                seconds = time.perf_counter() - started
                rows = record(run, "levels")
                expanded = searched_expansions(rows, continued=mode == "continued")
                first = rows if first is None else first
                print(f"{workers:7d} {mode:>9s} {seconds:8.2f} {expanded:10,d} {expanded / seconds:9,.0f} "
                      f"{summary.solved:7d}  {rows == first}")  # fmt: skip


def searched_expansions(rows: list[dict[str, str]], *, continued: bool) -> int:
    """The nodes a test's searches expanded: every attempt's afresh; a continued problem's last attempt only."""
    if not continued:
        return sum(int(row["expanded"]) for row in rows)
    last = {row["problem"]: int(row["expanded"]) for row in rows}  # the record's rows go round by round
    return sum(last.values())


if __name__ == "__main__":
    main()
