"""Training throughput on hard BoulderDash, learning included: processes, device, evaluation settings.

Each row trains one Bootstrap run (the real loop: lockstep searches, failed trees for
π^SG, one learning step per batch) on generated hard BoulderDash levels and prints

- ``exp/s``: expansions per second of the loop, learning included;
- ``search exp/s``: expansions per second of the searches alone (learning left out);
- ``learn s``: seconds per batch in the learning step;
- ``batch``: the mean number of observations per evaluator call of a shared evaluator.

The first batch of every row is a warm-up (pool start, CUDA and kernel selection) and is
not timed; the next `--batches` are. Every row searches the same problems from the same
seed. A row is named ``ALGORITHM/DEVICE/PLACE/PRECISION/kK/wN``: N search processes (1: in
the training process, in lockstep), PLACE ``shared`` (one evaluator in the training
process answering every process, `sgps.execution.shared`) or ``per-process`` (a CPU model copy
per process), PRECISION the searches' number format (``search.precision``) and, after a
``+``, the learning step's where it is not float32 (``learner.precision``), K the evaluation
batch (children a search gathers before one call).

``--set SECTION.KEY=VALUE`` (repeatable) sets any other setting for every row, e.g.
``--set subgoal.tree_rng=per-search``; the header lists them.

``--check`` also searches one batch in the training process, in lockstep, and with the
first row's settings through the pool, and says whether every search expanded the same
nodes (the equal-results check on the machine at hand). Usage::

    python benchmarks/scaling.py --preset paper --device cuda --workers 1,16 --precisions float32,bfloat16
    python benchmarks/scaling.py --preset cpu --device cpu --workers 1,2 --places per-process,shared

Targets (issue: docs/training.md, "Scaling"): on a 16-core box with one H100/H200, paper
preset, PHS*(π^SG) >= 25,000 exp/s learning included (>= 40,000 in its searches) and
PHS*(π) >= 40,000; without its GPU, cpu preset, 16 processes >= 10x one; on two cores, 2
processes >= 1.7x one.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import tempfile
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from sgps.domains import get_domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.execution.placement import search_pool
from sgps.execution.pool import SharedEvaluatorPool
from sgps.runs.rundir import RunDirectory
from sgps.search import search_lockstep
from sgps.training.bootstrap import BatchRecord, Bootstrap, PassRecord
from sgps.training.config import resolve_config
from sgps.training.setup import build_method, setup_frozen

SEARCHES = 32  # the paper's Bootstrap batch


class Timings:
    """A loop listener that keeps each batch's clock and expansions, and the time spent searching."""

    def __init__(self) -> None:
        self.batches: list[BatchRecord] = []
        self.search_seconds: list[float] = []

    def batch_done(self, record: BatchRecord) -> None:
        self.batches.append(record)

    def pass_done(self, record: PassRecord) -> None:
        """Validation is not part of the measurement (a row ends before its pass does)."""


def measure(
    domain: Any, levels: Sequence[Any], *, algorithm: str, preset: str, device: str, place: str, precision: str,
    learning_precision: str, evaluation_batch: int, workers: int, budget: int, batches: int, threads: int,
    folder: Path, settings: dict[str, dict[str, Any]],
) -> dict[str, Any]:  # fmt: skip
    """Train `batches` + 1 batches of one row; its rates over the timed batches."""
    overrides = {
        "run": {"algorithm": algorithm, "device": device, "workers": workers, "evaluator": place},
        "search": {"precision": precision, "evaluation_batch": evaluation_batch},
        "learner": {"precision": learning_precision},
        "bootstrap": {"initial_budget": budget, "batch_size": SEARCHES, "max_iterations": 1000, "seed": 0},
    }
    for section, values in settings.items():
        overrides.setdefault(section, {}).update(values)
    config = resolve_config(preset, overrides=overrides)
    torch.set_num_threads(threads)
    method = build_method(domain, levels[0], config)
    formats = precision if learning_precision == "float32" else f"{precision}+{learning_precision}"
    where = place if workers > 1 else "in-process"
    name = f"{algorithm}/{device}/{where}/{formats}/k{evaluation_batch}/w{workers}"
    run_dir = RunDirectory(folder / name.replace("/", "-"), method.report_columns)
    run_dir.create(config.as_dict())
    timings = Timings()
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(search_pool("local", workers, domain, levels[0], method, config))
        bootstrap = Bootstrap(domain, levels, [], method, config.bootstrap, run_dir, pool, listeners=[timings],
                              evaluation_batch=evaluation_batch)  # fmt: skip
        search = bootstrap._search

        def timed_search(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            results = search(*args, **kwargs)
            timings.search_seconds.append(time.perf_counter() - started)
            return results

        bootstrap._search = timed_search  # type: ignore[method-assign]
        with setup_frozen():  # as `sgps train` runs its loop
            bootstrap.run(max_batches=batches + 1)
        server = getattr(pool, "server", None)
        mean_batch = server.statistics.mean_batch if server is not None else None
    first, last = timings.batches[0], timings.batches[-1]
    expansions = last.cumulative_expansions - first.cumulative_expansions
    seconds = last.seconds - first.seconds
    searching = sum(timings.search_seconds[1:])
    return {
        "row": name,
        "settings": (algorithm, device, precision, evaluation_batch, workers),
        "exp/s": expansions / seconds,
        "search exp/s": expansions / searching,
        "learn s": (seconds - searching) / batches,
        "batch": mean_batch,
        "solved": sum(b.solved for b in timings.batches[1:]),
        "expansions": expansions,
    }


def check_equal(
    domain: Any, levels: Sequence[Any], row: dict[str, Any], preset: str, budget: int,
    settings: dict[str, dict[str, Any]],
) -> str:  # fmt: skip
    """One batch in-process and through a shared-evaluator pool of the row's size: same expansions?"""
    algorithm, device, precision, evaluation_batch, workers = row["settings"]
    overrides = {"run": {"algorithm": algorithm, "device": device}, "search": {"precision": precision}}
    for section, values in settings.items():
        overrides.setdefault(section, {}).update(values)
    method = build_method(domain, levels[0], resolve_config(preset, overrides=overrides))
    batch = list(levels[:SEARCHES])
    options = {"budget": budget, "epsilon": 0.01, "batch_size": evaluation_batch}
    local = search_lockstep(domain, batch, method.algorithm, method.evaluator(), **options)
    with SharedEvaluatorPool(max(workers, 2), domain, batch[0], method.algorithm, 4096) as pool:
        pooled = pool.search(method, batch, record_graph=False, **options)
    same = sum((a.expanded, a.status, a.actions) == (b.expanded, b.status, b.actions)
               for a, b in zip(local, pooled, strict=True))  # fmt: skip
    return f"equal results: {same} of {len(batch)} searches identical (expansions, status, solution)"


def parse_settings(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``SECTION.KEY=VALUE`` items as `resolve_config` overrides (VALUE read as TOML, else a string)."""
    settings: dict[str, dict[str, Any]] = {}
    for item in items:
        name, _, text = item.partition("=")
        section, _, key = name.partition(".")
        if not (section and key and text):
            raise SystemExit(f"--set {item!r}: expected SECTION.KEY=VALUE")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        settings.setdefault(section, {})[key] = value
    return settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu", choices=("tiny", "cpu", "paper"))
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--algorithms", default="phs,phs-sg")
    parser.add_argument("--workers", default="1,2", help="comma-separated process counts")
    parser.add_argument("--places", default="shared", help="shared and/or per-process (rows with workers > 1)")
    parser.add_argument("--precisions", default="float32", help="search.precision values")
    parser.add_argument("--learning-precisions", default="float32", help="learner.precision values")
    parser.add_argument("--evaluation-batches", default="1", help="comma-separated k")
    parser.add_argument("--budget", type=int, default=1000, help="expansion budget of every search")
    parser.add_argument("--batches", type=int, default=2, help="timed batches per row (after one warm-up)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads of the training process (0: cores)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="also compare one batch in-process and pooled")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="another setting for every row (a TOML value; a bare word is a string)")
    args = parser.parse_args()
    settings = parse_settings(args.set)
    domain = get_domain("boulderdash")
    count = SEARCHES * (args.batches + 1)
    levels = generate_levels(domain, resolve_params(domain, "hard", {}), args.seed, count)
    all_threads = torch.get_num_threads()
    print(f"hard BoulderDash, {count} levels (seed {args.seed}), preset {args.preset}, budget {args.budget}, "
          f"{args.batches} timed batches of {SEARCHES}; torch {torch.__version__}, "
          f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}"
          + "".join(f"; {item}" for item in args.set), flush=True)  # fmt: skip
    header = f"{'row':<52} {'exp/s':>9} {'search exp/s':>13} {'learn s':>8} {'batch':>7} {'solved':>7}"
    print(header, flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        grid = itertools.product(args.algorithms.split(","), [int(w) for w in args.workers.split(",")],
                                 args.places.split(","), args.precisions.split(","),
                                 args.learning_precisions.split(","),
                                 [int(k) for k in args.evaluation_batches.split(",")])  # fmt: skip
        seen = set()
        for algorithm, workers, place, precision, learning_precision, k in grid:
            key = (algorithm, workers, place if workers > 1 else "", precision, learning_precision, k)
            if key in seen:
                continue
            seen.add(key)
            threads = args.threads or (1 if workers == 1 and args.device == "cpu" else all_threads)
            row = measure(domain, levels, algorithm=algorithm, preset=args.preset, device=args.device, place=place,
                          precision=precision, learning_precision=learning_precision, evaluation_batch=k,
                          workers=workers, budget=args.budget, batches=args.batches, threads=threads,
                          folder=Path(folder), settings=settings)  # fmt: skip
            rows.append(row)
            batch = "-" if row["batch"] is None else f"{row['batch']:.0f}"
            print(f"{row['row']:<52} {row['exp/s']:>9,.0f} {row['search exp/s']:>13,.0f} {row['learn s']:>8.2f} "
                  f"{batch:>7} {row['solved']:>7}", flush=True)  # fmt: skip
    if args.check and rows:
        print(check_equal(domain, levels, rows[-1], args.preset, args.budget, settings), flush=True)


if __name__ == "__main__":
    main()
