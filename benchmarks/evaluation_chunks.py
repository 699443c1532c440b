"""CPU evaluation in chunks: what `sgps.models.evaluator.CPU_CHUNK_BYTES` buys, per domain and method.

A lockstep call of 32 searches that gather 32 children each (`search.evaluation_batch = 32`,
the hard campaigns' setting) holds about 1,000 states. On a CPU their activations fill tens
of MB, more than a core's caches, and the convolutions slow down per state; the evaluator
therefore passes a large call through the networks in chunks of `CPU_CHUNK_BYTES` of
observations. This prints, with untrained `cpu`-preset networks and one thread:

1. the bare forward: milliseconds for 1,024 states of each domain's levels, in one call and
   in chunks of 1-16 MiB of observations (the median of `--repeats` interleaved rounds), and
   the speed-up of the default chunk over one call;
2. the search: lockstep-32 with evaluation batches of 32 on `--levels` levels at `--budget`,
   seconds per expansion with chunks off and on (median of `--repeats` passes in ABBA order),
   and how many of the searches expanded the same nodes either way (a chunk rounds as a
   call of its size does, which may break a near-tie differently).

Usage::

    python benchmarks/evaluation_chunks.py [--domains craftworld,boulderdash] [--budget 2000] [--repeats 4]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch

from sgps.domains import domain_names, get_domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.models import evaluator as evaluators
from sgps.search import BestFirstSearch, run_lockstep
from sgps.training.config import resolve_config
from sgps.training.setup import build_method

MIB = 2**20
CHUNKS_MIB = (1, 2, 4, 8, 16)
UNCHUNKED = 2**62  # bytes: every call in one chunk
ALGORITHMS = ("phs", "phs-sg")


def method_for(domain: Any, example: Any, algorithm: str) -> Any:
    """The untrained method at the `cpu` preset."""
    overrides = {"run": {"device": "cpu", "algorithm": algorithm}}
    return build_method(domain, example, resolve_config("cpu", overrides=overrides))


def forward_times(evaluator: Any, observations: Any, repeats: int) -> dict[int, float]:
    """Median seconds of `evaluate_observations` on all `observations` per chunk size in bytes."""
    sizes = [UNCHUNKED, *(mib * MIB for mib in CHUNKS_MIB)]
    times: dict[int, list[float]] = {size: [] for size in sizes}
    evaluator.evaluate_observations(observations)
    for repeat in range(repeats):
        for size in sizes if repeat % 2 == 0 else reversed(sizes):
            evaluators.CPU_CHUNK_BYTES = size
            start = time.perf_counter()
            evaluator.evaluate_observations(observations)
            times[size].append(time.perf_counter() - start)
    return {size: statistics.median(values) for size, values in times.items()}


def search_pass(domain: Any, levels: Sequence[Any], method: Any, budget: int, chunk: int) -> tuple[float, list[Any]]:
    """Seconds per expansion of one lockstep-32 pass with buffered evaluation (32 children), and its results."""
    evaluators.CPU_CHUNK_BYTES = chunk
    evaluator = method.evaluator()
    searches = [BestFirstSearch(domain, level, method.algorithm, budget=budget, batch_size=32) for level in levels]
    start = time.perf_counter()
    results = run_lockstep(searches, evaluator)
    return (time.perf_counter() - start) / sum(result.expanded for result in results), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", default="craftworld,boulderdash,boxworld,sokoban,tsp")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--levels", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    names = args.domains.split(",")
    unknown = sorted(set(names) - set(domain_names()))
    if unknown:
        parser.error(f"unknown domains: {', '.join(unknown)}")
    torch.set_num_threads(1)
    default = evaluators.CPU_CHUNK_BYTES
    print(f"default chunk: {default / MIB:g} MiB of observations; one thread; untrained `cpu` preset")
    print("\nforward, ms for 1,024 states (median):")
    print(f"{'domain':<12} {'method':<7} {'state KiB':>9} {'one call':>9}"
          + "".join(f" {f'{mib} MiB':>7}" for mib in CHUNKS_MIB) + f" {'default x':>9}")  # fmt: skip
    rows = []
    for name in names:
        domain = get_domain(name)
        variant = "hard" if "hard" in domain.variants else "standard"
        levels = generate_levels(domain, resolve_params(domain, variant), args.seed, args.levels)
        observations = domain.observe([levels[i % len(levels)] for i in range(1024)])
        for algorithm in ALGORITHMS:
            method = method_for(domain, levels[0], algorithm)
            times = forward_times(method.evaluator(), observations, args.repeats)
            per_state = observations[0].nbytes / 1024
            print(f"{name:<12} {algorithm:<7} {per_state:>9.1f} {times[UNCHUNKED] * 1e3:>9.0f}"
                  + "".join(f" {times[mib * MIB] * 1e3:>7.0f}" for mib in CHUNKS_MIB)
                  + f" {times[UNCHUNKED] / times[default]:>9.2f}")  # fmt: skip
            rows.append((name, variant, algorithm, domain, levels, method))
    print(f"\nlockstep-32 search, evaluation batches of 32, budget {args.budget}, {args.levels} levels of each "
          "(hard where the domain has them; median of ABBA passes):")  # fmt: skip
    print(f"{'domain':<12} {'variant':<9} {'method':<7} {'exp/s off':>10} {'exp/s on':>9} {'speed-up':>8} "
          f"{'same searches':>14}")  # fmt: skip
    for name, variant, algorithm, domain, levels, method in rows:
        seconds: dict[int, list[float]] = {UNCHUNKED: [], default: []}
        results: dict[int, list[Any]] = {}
        for repeat in range(args.repeats):
            for chunk in (UNCHUNKED, default) if repeat % 2 == 0 else (default, UNCHUNKED):
                spent, results[chunk] = search_pass(domain, levels, method, args.budget, chunk)
                seconds[chunk].append(spent)
        off, on = (statistics.median(seconds[chunk]) for chunk in (UNCHUNKED, default))
        same = sum((a.expanded, a.solved, a.actions) == (b.expanded, b.solved, b.actions)
                   for a, b in zip(results[UNCHUNKED], results[default], strict=True))  # fmt: skip
        print(f"{name:<12} {variant:<9} {algorithm:<7} {1 / off:>10,.0f} {1 / on:>9,.0f} {off / on:>8.2f} "
              f"{f'{same} of {len(levels)}':>14}")  # fmt: skip
    evaluators.CPU_CHUNK_BYTES = default


if __name__ == "__main__":
    main()
