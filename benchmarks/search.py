"""Search-engine throughput and memory, with the model-free uniform evaluator, on one core.

Prints, per domain:

- expansions/s of LevinTS with the uniform policy in `exact` mode (one search, an
  evaluation after every expansion) and in `lockstep` mode (32 searches, one
  evaluation batch per round);
- the engine's own time per expansion: wall time minus the time spent in the
  domain (`step`, `is_goal`, `is_dead`, `key`) and in the evaluator, and minus the
  stopwatch's own cost outside its timed intervals (the wrapper's call and return, measured
  on a no-op and counted per wrapped call);

then the peak Python memory (tracemalloc) of one long search, divided by the number
of generated nodes, states and recorded graph included.

Targets (issue "Search engine"): >= 20,000 expansions/s on TSP; <= 1 KB per generated
node. Usage::

    python benchmarks/search.py [--budget 20000] [--memory-budget 512000] [--domains ...]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from sgps.domains import domain_names, get_domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.search import BestFirstSearch, UniformPolicy, make_algorithm, run, run_lockstep

EXPANSIONS_TARGET = 20_000
BYTES_PER_NODE_TARGET = 1024
LOCKSTEP_N = 32


class Stopwatch:
    """Accumulates the time spent inside wrapped callables."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        clock = time.perf_counter

        def timed(*args: Any) -> Any:
            self.calls += 1
            start = clock()
            try:
                return function(*args)
            finally:
                self.seconds += clock() - start

        return timed


def untimed_cost_per_call(calls: int = 200_000) -> float:
    """Seconds a `Stopwatch` wrapper adds per call outside the interval it times: a wrapped
    no-op's wall time less its timed seconds, less the bare no-op's wall time, each the best of 5.

    Each loop's best is taken on its own: the best of the 5 differences can pick a round in which
    only the bare loop was preempted, whose difference falls below zero (clamped to 0)."""

    def nothing(value: Any) -> Any:
        return value

    best_wrapped = best_bare = float("inf")
    for _ in range(5):
        watch = Stopwatch()
        timed = watch.wrap(nothing)
        start = time.perf_counter()
        for _ in range(calls):
            timed(None)
        best_wrapped = min(best_wrapped, time.perf_counter() - start - watch.seconds)
        start = time.perf_counter()
        for _ in range(calls):
            nothing(None)
        best_bare = min(best_bare, time.perf_counter() - start)
    return max((best_wrapped - best_bare) / calls, 0.0)


def timed_domain(name: str, watch: Stopwatch) -> Any:
    """A domain object whose rule methods report their time to `watch`."""
    domain = get_domain(name)
    for method in ("step", "is_goal", "is_dead", "key"):
        setattr(domain, method, watch.wrap(getattr(domain, method)))
    return domain


def throughput(name: str, budget: int, seed: int) -> dict[str, float]:
    """Expansions/s in exact and lockstep modes, and the engine's own microseconds per expansion."""
    levin = make_algorithm("levin")
    plain = get_domain(name)
    levels = generate_levels(plain, resolve_params(plain, "standard"), seed, LOCKSTEP_N)

    start = time.perf_counter()
    expanded = 0
    for level in levels[:4]:
        expanded += run(BestFirstSearch(plain, level, levin, budget=budget), UniformPolicy(plain)).expanded
    exact_rate = expanded / (time.perf_counter() - start)

    start = time.perf_counter()
    searches = [BestFirstSearch(plain, level, levin, budget=budget) for level in levels]
    results = run_lockstep(searches, UniformPolicy(plain))
    lockstep_rate = sum(r.expanded for r in results) / (time.perf_counter() - start)

    domain_watch, evaluator_watch = Stopwatch(), Stopwatch()
    domain = timed_domain(name, domain_watch)
    evaluator = evaluator_watch.wrap(UniformPolicy(domain))
    start = time.perf_counter()
    expanded = 0
    for level in levels[:4]:
        expanded += run(BestFirstSearch(domain, level, levin, budget=budget), evaluator).expanded
    total = time.perf_counter() - start
    untimed = (domain_watch.calls + evaluator_watch.calls) * untimed_cost_per_call()
    overhead = (total - domain_watch.seconds - evaluator_watch.seconds - untimed) / expanded
    return {"exact": exact_rate, "lockstep": lockstep_rate, "overhead_us": overhead * 1e6}


def memory_per_node(name: str, variant: str, budget: int, seed: int) -> tuple[int, float, float]:
    """(generated nodes, peak bytes per generated node, seconds) of one long LevinTS search with its graph."""
    domain = get_domain(name)
    level = domain.generate(seed, **resolve_params(domain, variant))
    tracemalloc.start()
    start = time.perf_counter()
    result = run(
        BestFirstSearch(domain, level, make_algorithm("levin"), budget=budget, record_graph=True),
        UniformPolicy(domain),
    )
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result.generated, peak / max(result.generated, 1), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", default=",".join(domain_names()), help="comma-separated domain names")
    parser.add_argument("--budget", type=int, default=20_000, help="expansion budget per throughput search")
    parser.add_argument("--memory-budget", type=int, default=512_000, help="budget of the long memory search")
    parser.add_argument(
        "--memory-levels",
        default="boulderdash:hard,craftworld:hard",
        help="DOMAIN:VARIANT of the long memory searches (levels whose search outlasts the budget)",
    )
    parser.add_argument("--seed", type=int, default=1000)
    args = parser.parse_args()

    print(f"LevinTS, uniform policy, budget {args.budget:,}; target {EXPANSIONS_TARGET:,} expansions/s on tsp")
    print(f"{'domain':<12} {'exact exp/s':>12} {'lockstep exp/s':>15} {'engine us/exp':>14}")
    for name in args.domains.split(","):
        row = throughput(name, args.budget, args.seed)
        print(f"{name:<12} {row['exact']:>12,.0f} {row['lockstep']:>15,.0f} {row['overhead_us']:>14.1f}")

    print(f"\nOne search of {args.memory_budget:,} expansions with its graph; target <= {BYTES_PER_NODE_TARGET} B/node")
    for spec in args.memory_levels.split(","):
        name, _, variant = spec.partition(":")
        generated, per_node, seconds = memory_per_node(name, variant or "standard", args.memory_budget, args.seed)
        verdict = "ok" if per_node <= BYTES_PER_NODE_TARGET else "ABOVE TARGET"
        print(
            f"{spec:<17} {generated:>10,} generated  {per_node:>7.0f} B/node  "
            f"peak {per_node * generated / 2**20:,.0f} MiB  ({seconds:.0f} s)  {verdict}"
        )


if __name__ == "__main__":
    main()
