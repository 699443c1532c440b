"""How to search a Bootstrap batch fastest on this machine: lockstep in one process, or a process pool.

For each domain, one batch of 32 problems (flat PHS*(π), `cpu` preset, untrained
network, budget B) is searched in these ways, and the wall time of the batch and the
expansions/s are printed:

- ``lockstep-1t``: lockstep in this process, torch with 1 thread (the default);
- ``lockstep-Nt``: lockstep in this process, torch with N threads;
- ``pool-exact``: N worker processes (one model copy and 1 torch thread each), each
  searching its share of the problems one by one in exact mode;
- ``pool-lockstep``: N worker processes, each searching its share in lockstep.

Pool timings exclude starting the pool (done once per run) but include sending the
current weights to every worker (done once per batch, since the model changes after
every batch). Usage::

    python benchmarks/parallel.py [--domains tsp,sokoban] [--workers 2] [--budget 500]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch

from sgps.domains import domain_names, get_domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.search import search, search_lockstep
from sgps.training.config import resolve_config
from sgps.training.setup import build_flat_method

BATCH = 32

_worker: dict[str, Any] = {}


def _config() -> Any:
    return resolve_config("cpu", overrides={"run": {"device": "cpu"}})


def _start_worker(domain_name: str, example: Any) -> None:
    torch.set_num_threads(1)
    domain = get_domain(domain_name)
    _worker["domain"] = domain
    _worker["method"] = build_flat_method(domain, example, _config())


def _search_share(weights: dict[str, torch.Tensor], levels: list[Any], budget: int, lockstep: bool) -> int:
    """Load the batch's weights, search `levels`; the expansions made."""
    domain, method = _worker["domain"], _worker["method"]
    method.learner.network.load_state_dict(weights)
    evaluator = method.evaluator()
    if lockstep:
        results = search_lockstep(domain, levels, method.algorithm, evaluator, budget=budget)
    else:
        results = [search(domain, level, method.algorithm, evaluator, budget=budget) for level in levels]
    return sum(r.expanded for r in results)


def measure(name: str, workers: int, budget: int, seed: int) -> list[tuple[str, float, float]]:
    """(way, seconds per batch, expansions/s) for one domain."""
    domain = get_domain(name)
    levels = generate_levels(domain, resolve_params(domain, "standard"), seed, BATCH)
    method = build_flat_method(domain, levels[0], _config())
    network = method.learner.network
    rows = []
    for threads in (1, workers):
        torch.set_num_threads(threads)
        start = time.perf_counter()
        results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=budget)
        elapsed = time.perf_counter() - start
        rows.append((f"lockstep-{threads}t", elapsed, sum(r.expanded for r in results) / elapsed))
    torch.set_num_threads(1)
    shares = [levels[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(workers, initializer=_start_worker, initargs=(name, levels[0])) as pool:
        list(pool.map(_search_share, [network.state_dict()] * workers, [s[:1] for s in shares], [1] * workers,
                      [True] * workers))  # fmt: skip
        for lockstep in (False, True):
            start = time.perf_counter()
            weights = network.state_dict()
            expanded = sum(pool.map(_search_share, [weights] * workers, shares, [budget] * workers,
                                    [lockstep] * workers))  # fmt: skip
            elapsed = time.perf_counter() - start
            rows.append(("pool-lockstep" if lockstep else "pool-exact", elapsed, expanded / elapsed))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", default=",".join(domain_names()), help="comma-separated domain names")
    parser.add_argument("--workers", type=int, default=2, help="worker processes / torch threads (default: 2)")
    parser.add_argument("--budget", type=int, default=500, help="expansion budget per search")
    parser.add_argument("--seed", type=int, default=2000)
    args = parser.parse_args()
    print(f"one batch of {BATCH} problems, flat PHS*(pi), cpu preset, budget {args.budget}, {args.workers} workers")
    print(f"{'domain':<12} {'way':<14} {'s/batch':>8} {'exp/s':>9}")
    for name in args.domains.split(","):
        for way, seconds, rate in measure(name, args.workers, args.budget, args.seed):
            print(f"{name:<12} {way:<14} {seconds:>8.2f} {rate:>9,.0f}")


if __name__ == "__main__":
    main()
