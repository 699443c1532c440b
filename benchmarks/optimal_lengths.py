"""Are our generated training levels as hard as the official test levels? Optimal lengths.

The Bootstrap methods train on levels of our generators and are tested on the official
test sets, which our generators reproduce bit for bit from their seeds (docs/domains.md).
A training set that is easier or harder than the test set would change what a comparison
means, so this script solves levels of both exactly (`sgps.domains.solver.solve`, BFS for
CraftWorld and BoulderDash) and prints, per set, the optimal solution length (mean, min,
max), the stored states of the largest search and the seconds per level.

The default sets are the hard training and test sets of `configs/hard-*-scale-1000.toml`:

- BoulderDash hard training levels (seeds 0+) against the hard test set (seeds 40000+;
  spec/domains.md 3.4: mean 65.42, min 42, max 94 over its 100 levels);
- CraftWorld hard training levels (seeds 0+, mixed goals, as the configs generate them)
  against the hard test set (seeds 20000+, iron pick; spec/domains.md 2.4: mean 117.45
  over its first 20 levels).

Usage::

    python benchmarks/optimal_lengths.py [--levels 20] [--sets boulderdash,craftworld]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from sgps.domains import get_domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.domains.solver import solve

#: (domain, label, variant, parameter overrides, first seed, the spec's test-set figure).
SETS: dict[str, list[tuple[str, str, dict[str, Any], int, str]]] = {
    "boulderdash": [
        ("hard training", "hard", {}, 0, ""),
        ("hard test", "hard", {}, 40000, "spec: 65.42 mean over 100 (42-94)"),
    ],
    "craftworld": [
        ("hard training", "hard", {}, 0, ""),
        ("hard test", "hard", {"goal": "iron_pick"}, 20000, "spec: 117.45 mean over the first 20 (81-149)"),
    ],
}


def measure(domain_name: str, variant: str, params: dict[str, Any], seed: int, count: int) -> dict[str, Any]:
    """Solve `count` generated levels exactly; their optimal lengths and solver cost."""
    domain = get_domain(domain_name)
    levels = generate_levels(domain, resolve_params(domain, variant, params), seed, count)
    lengths, unsolved, largest, seconds = [], 0, 0, 0.0
    for level in levels:
        start = time.perf_counter()
        result = solve(domain, level)
        seconds += time.perf_counter() - start
        largest = max(largest, result.stored)
        if result.length is None:
            unsolved += 1
        else:
            lengths.append(result.length)
    return {"lengths": lengths, "unsolved": unsolved, "largest": largest, "seconds": seconds / max(count, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=20, help="levels per set (default 20)")
    parser.add_argument("--sets", default="boulderdash,craftworld", help="domains, comma-separated")
    args = parser.parse_args()
    print(f"{'set':<28} {'levels':>6} {'mean':>7} {'min':>4} {'max':>4} {'unsolved':>8} "
          f"{'largest search':>14} {'s/level':>7}  reference")  # fmt: skip
    for name in args.sets.split(","):
        for label, variant, params, seed, reference in SETS[name]:
            figures = measure(name, variant, params, seed, args.levels)
            lengths = figures["lengths"]
            mean = f"{statistics.mean(lengths):7.2f}" if lengths else f"{'-':>7}"
            low, high = (f"{min(lengths):4d}", f"{max(lengths):4d}") if lengths else ("   -", "   -")
            cost = f"{figures['unsolved']:>8} {figures['largest']:>14,} {figures['seconds']:>7.2f}"
            print(f"{name + ' ' + label + f' ({seed}+)':<28} {args.levels:>6} {mean} {low} {high} {cost}  {reference}")


if __name__ == "__main__":
    main()
