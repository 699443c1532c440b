"""How much `sgps test --workers N` gains over testing in one process, continued rounds over
rounds searched afresh (`--restart-rounds`), and refilled searches over groups, on hard BoulderDash.

By default a `cpu`-preset run is trained for one batch (its network barely trained: what
matters here is the cost of the searches, not how many it solves), then `sgps test` runs on
the same generated levels with each worker count, each way of searching the rounds and each
scheduling; `--run RUN --problems FILE` tests that run (its last weights) on those levels
instead, where the searches end at very different expansions, as a trained model's do.

Schedulings (`--scheduling`): ``refill`` (sgps test's), where each search process keeps its
share of `--at-once` searches running and takes the next level as soon as one ends; ``groups``
(sgps test before it), where the levels go in groups of `--at-once`, each waiting for its
longest search while the other processes idle. `--at-once` (default: as many as fit in half
this machine's memory, `sgps.runs.memory.concurrent_searches`, rounded down to a multiple of the
processes for groups; often every level at small budgets, where the two are the same) stands
for the memory limit of a test at the paper's 512,000.

Places (`--places`): ``copies``, local search processes with a model copy each (a CPU run's
default); ``shared``, local search processes around one shared evaluator (`run.evaluator =
"shared"`, a GPU run's default); ``ray``, Ray actors on a local Ray instance
(`sgps test --executor ray`: one actor per CPU of the instance, whatever `--workers` says, so
measured once). With one worker, ``copies`` and ``shared`` are both the in-process search,
measured once.

Printed per test: wall seconds of the whole test (pool start included), the nodes its
searches expanded (a continued problem's last attempt holds its earlier rounds'; the
record's own total counts them again) and those per second, problems solved, and whether
the record equals the first test's attempt for attempt (timings aside). Nothing is written
to `--run`'s folder. Usage::

    python benchmarks/test_workers.py [--workers 1,2] [--count 64] [--budget 1000] [--rounds 1]
                                      [--modes continued,afresh] [--algorithm phs]
                                      [--run RUN --problems FILE] [--scheduling refill,groups] [--at-once N]
                                      [--places copies,shared,ray]
"""

from __future__ import annotations

import argparse
import csv
import shutil
import tempfile
import time
from pathlib import Path

import torch

from sgps.domains import get_domain, write_levels
from sgps.domains.generation import generate_levels, resolve_params
from sgps.execution.ray_pool import cluster_cpus, connect
from sgps.runs import runner
from sgps.runs.rundir import to_toml
from sgps.training.config import read_toml

PLACES = ("copies", "shared", "ray")


def record(run: Path, name: str) -> list[dict[str, str]]:
    with open(run / "metrics" / f"test-{name}.csv", newline="") as handle:
        return [{key: value for key, value in row.items() if key != "seconds"} for row in csv.DictReader(handle)]


def trial_copy(run: Path, into: Path) -> Path:
    """A copy of `run`'s config and last weights in `into`, which the tests may write their records in."""
    copy = into / "run"
    (copy / "checkpoints").mkdir(parents=True)
    (copy / "metrics").mkdir()
    shutil.copy2(run / "config.toml", copy / "config.toml")
    shutil.copy2(run / "checkpoints" / "latest.safetensors", copy / "checkpoints" / "latest.safetensors")
    return copy


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
    parser.add_argument("--run", type=Path, help="test this run's last weights instead of a one-batch run")
    parser.add_argument("--problems", type=Path, help="with --run: its first --count levels are tested")
    parser.add_argument("--scheduling", default="refill",
                        help="comma-separated: refill (sgps test's), groups (each group of --at-once waits for its "
                             "longest search) (default: refill)")  # fmt: skip
    parser.add_argument("--at-once", type=int, help="searches at a time over all processes (default: what memory "
                        "allows at the last round's budget)")  # fmt: skip
    parser.add_argument("--places", default="copies",
                        help="comma-separated: copies (local processes, a model copy each), shared (local processes "
                             "around a shared evaluator), ray (Ray actors) (default: copies)")  # fmt: skip
    args = parser.parse_args()
    if (args.run is None) != (args.problems is None):
        parser.error("--run and --problems go together")
    schedulings = args.scheduling.split(",")
    if not set(schedulings) <= {"refill", "groups"}:
        parser.error(f"--scheduling: {args.scheduling!r} is not a list of refill and groups")
    places = args.places.split(",")
    if not set(places) <= set(PLACES):
        parser.error(f"--places: {args.places!r} is not a list of {', '.join(PLACES)}")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        test = root / "levels.txt"
        if args.run is None:
            run = one_batch_run(root, test, args.count, args.algorithm)
            print(f"hard BoulderDash, {args.count} levels, {args.algorithm}, cpu preset, one batch, "
                  f"budget {args.budget} over {args.rounds} rounds, torch {torch.__version__}")  # fmt: skip
        else:
            run = trial_copy(args.run, root)
            lines = [line for line in args.problems.read_text().splitlines() if line.strip()]
            levels = [line for line in lines if not line.startswith(";")][: args.count]
            test.write_text("\n".join([line for line in lines if line.startswith(";")] + levels) + "\n")
            print(f"{args.run}'s last weights, the first {len(levels)} levels of {args.problems}, "
                  f"budget {args.budget} over {args.rounds} rounds, torch {torch.__version__}")  # fmt: skip
        header = (f"{'workers':>7s} {'place':>10s} {'mode':>9s} {'scheduling':>10s} {'seconds':>8s} "
                  f"{'expanded':>10s} {'exp/s':>9s} {'solved':>7s}")  # fmt: skip
        print(f"{header}  same record")
        first = None
        modes = args.modes.split(",")
        if not set(modes) <= {"continued", "afresh"}:
            parser.error(f"--modes: {args.modes!r} is not a list of continued and afresh")
        for workers, place in trials([int(text) for text in args.workers.split(",")], places):
            place_evaluator(run, place)
            for mode in modes:
                for scheduling in schedulings:
                    started = time.perf_counter()
                    summary = runner.test(run, test, budget=args.budget, rounds=args.rounds, workers=workers,
                                          executor="ray" if place == "ray" else "local", checkpoint="last",
                                          restart_rounds=mode == "afresh", refill=scheduling == "refill",
                                          at_once=args.at_once)  # fmt: skip
                    seconds = time.perf_counter() - started
                    rows = record(run, "levels")
                    expanded = searched_expansions(rows, continued=mode == "continued")
                    first = rows if first is None else first
                    label = place if place == "ray" or workers > 1 else "in-process"
                    print(f"{workers:7d} {label:>10s} {mode:>9s} {scheduling:>10s} {seconds:8.2f} "
                          f"{expanded:10,d} {expanded / seconds:9,.0f} {summary.solved:7d}  {rows == first}",
                          flush=True)  # fmt: skip


def trials(worker_counts: list[int], places: list[str]) -> list[tuple[int, str]]:
    """(workers, place) to time: each local place at each worker count, once where one worker makes
    `copies` and `shared` the same in-process search; Ray once, with its actor count, since `sgps test
    --executor ray` starts one actor per CPU of the cluster whatever `--workers` says."""
    local = [place for place in places if place != "ray"]
    chosen = []
    for workers in worker_counts:
        chosen += [(workers, place) for place in (local if workers > 1 else local[:1])]
    if "ray" in places:
        chosen.append((cluster_cpus(connect()), "ray"))
    return chosen


def place_evaluator(run: Path, place: str) -> None:
    """Set the trial run's `run.evaluator` for `place` (`sgps test` reads it from the run's config)."""
    config = read_toml(run / "config.toml")
    config["run"]["evaluator"] = "shared" if place == "shared" else "per-process"
    (run / "config.toml").write_text(to_toml(config))


def one_batch_run(root: Path, test: Path, count: int, algorithm: str) -> Path:
    """A `cpu`-preset run of `algorithm` trained for one batch on generated hard BoulderDash levels,
    and `count` of the paper's hard test levels in `test`."""
    domain = get_domain("boulderdash")
    params = resolve_params(domain, "hard")
    train = root / "train.txt"
    write_levels(train, domain, generate_levels(domain, params, 7, 40), variant="hard", seed=7, params=params)
    write_levels(test, domain, generate_levels(domain, params, 40000, count), variant="hard", seed=40000,
                 params=params)  # fmt: skip
    run = root / "run"
    overrides = {"run": {"algorithm": algorithm, "device": "cpu", "workers": 1}}
    runner.train(train, run, preset="cpu", overrides=overrides, quiet=True, max_batches=1)
    return run


def searched_expansions(rows: list[dict[str, str]], *, continued: bool) -> int:
    """The nodes a test's searches expanded: every attempt's afresh; a continued problem's last attempt only."""
    if not continued:
        return sum(int(row["expanded"]) for row in rows)
    last = {row["problem"]: int(row["expanded"]) for row in rows}  # the record's rows go round by round
    return sum(last.values())


if __name__ == "__main__":
    main()
