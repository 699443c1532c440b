"""How hard is generated "hard" TSP for a complete search? State-space size against budgets.

The paper reports that flat PHS*(π) and LevinTS(π) solved none of 10,000 hard TSP training
problems in 16 hours, with budgets that reached 32,000 and more (B0 = 4000, doubled when a
pass solves nothing). On our generated hard TSP (10×10, 6 cities, spec/domains.md 5.4: the
city count is inferred) flat PHS*(π) solves every problem once its budget passes about
8,000. This script measures why. For each city count it generates levels of the hard
generator and prints:

- the number of reachable states (a breadth-first enumeration by duplicate key): with the
  closed set over generated states, no search expands more states than this, so a budget
  at or above it solves the level whatever the policy;
- the optimal solution length (the paper's hard-TSP test means are 40.9-41.7);
- the expansions PHS* needs with a uniform policy and h = 0 (an untrained search), and
  the share of levels it solves within budgets 4,000 / 8,000 / 16,000 / 32,000.

With `--run RUN_DIR` it also reads a training run's `metrics/train.csv` and prints, for
each budget the run reached, how many training problems were first solved at it.

Usage::

    python benchmarks/tsp_hardness.py [--cities 6,7,8] [--levels 40] [--seed 0] [--run RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections import Counter, deque
from pathlib import Path
from typing import Any

from sgps.domains import get_domain
from sgps.domains.base import Domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.domains.solver import solve
from sgps.search import BestFirstSearch, make_algorithm, run
from sgps.search.evaluators import UniformPolicy

BUDGETS = (4_000, 8_000, 16_000, 32_000)
#: A search with a uniform policy stops here; no 10×10 level with at most 9 cities has more states.
UNLIMITED = 2_000_000


def reachable_states(domain: Domain[Any], start: Any) -> int:
    """The number of distinct states (by duplicate key) reachable from `start`, goals included."""
    seen = {domain.key(start)}
    frontier = deque([start])
    while frontier:
        state = frontier.popleft()
        if domain.is_goal(state):
            continue
        for child in domain.successors(state):
            key = domain.key(child)
            if key not in seen:
                seen.add(key)
                frontier.append(child)
    return len(seen)


def uniform_expansions(domain: Domain[Any], level: Any) -> int:
    """Expansions PHS* needs to solve `level` with a uniform policy and h = 0."""
    search = BestFirstSearch(domain, level, make_algorithm("phs"), budget=UNLIMITED)
    result = run(search, UniformPolicy(domain))
    if not result.solved:
        raise RuntimeError(f"a uniform-policy search did not solve a level ({result.status})")
    return result.expanded


def measure_cities(cities: int, levels: int, seed: int) -> None:
    domain = get_domain("tsp")
    params = {**resolve_params(domain, "hard"), "cities": cities}
    states = generate_levels(domain, params, seed, levels)
    sizes = [reachable_states(domain, state) for state in states]
    lengths = [solve(domain, state).length for state in states]
    expansions = [uniform_expansions(domain, state) for state in states]
    shares = "  ".join(f"{sum(e <= b for e in expansions) / levels:>6.0%}" for b in BUDGETS)
    print(f"{cities:>6} {statistics.mean(sizes):>10,.0f} {min(sizes):>8,} {max(sizes):>8,} "
          f"{statistics.mean(lengths):>8.1f} {statistics.mean(expansions):>11,.0f} {max(expansions):>9,}  "
          f"{shares}")  # fmt: skip


def first_solved_budgets(run_dir: Path) -> None:
    """Print how many training problems a run first solved at each budget."""
    first: dict[str, int] = {}
    with open(run_dir / "metrics" / "train.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["solved"] == "1" and row["problem"] not in first:
                first[row["problem"]] = int(row["budget"])
    counts = Counter(first.values())
    print(f"\n{run_dir}: training problems first solved, by the budget of that pass")
    for budget in sorted(counts):
        print(f"  budget {budget:>7,}: {counts[budget]:>4}")
    print(f"  total {len(first)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cities", default="6,7,8", help="comma-separated city counts (the hard generator uses 6)")
    parser.add_argument("--levels", type=int, default=40, help="levels per city count")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first level")
    parser.add_argument("--run", type=Path, action="append", default=[], help="a training run to summarise")
    args = parser.parse_args()
    print(f"hard TSP generator (10x10, walls), {args.levels} levels per row from seed {args.seed}")
    budget_heads = "  ".join(f"{'<=' + format(b // 1000) + 'k':>6}" for b in BUDGETS)
    print(f"{'cities':>6} {'states':>10} {'min':>8} {'max':>8} {'optimal':>8} {'uniform exp':>11} {'max':>9}  "
          f"{budget_heads}")  # fmt: skip
    for cities in (int(c) for c in args.cities.split(",") if c):  # --cities "": only the runs
        measure_cities(cities, args.levels, args.seed)
    for run_dir in args.run:
        first_solved_budgets(run_dir)


if __name__ == "__main__":
    main()
