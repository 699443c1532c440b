"""Domain throughput: `step` calls/s and observation encoding states/s (batch 32), one core.

Targets (issue "Foundation"): >= 100,000 steps/s and >= 20,000 observed states/s per
domain, so that later the network, not the domain, is the bottleneck of a search.

Usage::

    python benchmarks/domains.py [--domains tsp,boxworld,sokoban,boulderdash/gravity] [--levels 20] [--seconds 2]

Each domain is measured on generated `standard` levels (`boulderdash/gravity`: with gravity
on, 6 stones, a firefly and a butterfly, which the official end-of-step scan plays): the benchmark collects states along
short random walks from them, then times `step` for every action from each of those
states (what a search expansion does; blocked moves count too, as in a search), and
`observe` on batches of 32 of those states. The domains are pure Python + NumPy (single-threaded), so this is one core.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence

from sgps.domains import domain_names, get_domain
from sgps.domains.generation import generate_levels, resolve_params

#: Extra rows: a name, its domain and generator parameters beyond the `standard` variant.
CASES = {"boulderdash/gravity": ("boulderdash", {"gravity": True, "stones": 6, "fireflies": 1, "butterflies": 1})}
STEP_TARGET = 100_000
OBSERVE_TARGET = 20_000
BATCH = 32


def timed_rate(work: Callable[[], int], seconds: float) -> float:
    """Repeat `work` (which returns how many items it processed) for about `seconds`; items/s."""
    done = 0
    start = time.perf_counter()
    while True:
        done += work()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def benchmark_domain(name: str, levels: int, seconds: float, seed: int) -> tuple[float, float]:
    """Return (steps/s, observed states/s) for domain (or extra row) `name`."""
    domain_name, overrides = CASES.get(name, (name, {}))
    domain = get_domain(domain_name)
    starts = generate_levels(domain, resolve_params(domain, "standard", overrides), seed, levels)
    rng = random.Random(seed)
    actions = [rng.randrange(domain.num_actions) for _ in range(64)]

    visited = []
    for start in starts:
        state = start
        for action in actions:
            if domain.is_goal(state) or domain.is_dead(state):
                state = start
            state = domain.step(state, action)
            visited.append(state)
    batches = [visited[i : i + BATCH] for i in range(0, len(visited) - BATCH + 1, BATCH)]

    def expand() -> int:
        step = domain.step
        for state in visited:
            for action in range(domain.num_actions):
                step(state, action)
        return len(visited) * domain.num_actions

    def observe() -> int:
        batch: Sequence = batches[rng.randrange(len(batches))]
        domain.observe(batch)
        return len(batch)

    return timed_rate(expand, seconds), timed_rate(observe, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--domains", default=",".join([*domain_names(), *CASES]), help="comma-separated domain names or extra rows"
    )
    parser.add_argument("--levels", type=int, default=20, help="generated levels per domain")
    parser.add_argument("--seconds", type=float, default=2.0, help="timing window per measurement")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(f"{'domain':<20} {'steps/s':>12} {'observe states/s':>18}  targets: {STEP_TARGET:,} / {OBSERVE_TARGET:,}")
    failures = []
    for name in args.domains.split(","):
        steps, observed = benchmark_domain(name, args.levels, args.seconds, args.seed)
        ok = steps >= STEP_TARGET and observed >= OBSERVE_TARGET
        if not ok:
            failures.append(name)
        print(f"{name:<20} {steps:>12,.0f} {observed:>18,.0f}  {'ok' if ok else 'BELOW TARGET'}")
    if failures:
        print("below target:", ", ".join(failures))


if __name__ == "__main__":
    main()
