"""Priority functions of best-first search over (g, ln π, h), and the policy noise.

All probabilities are natural logarithms (spec/algorithms.md section 1.2). Every
function is pure and works on Python floats; lower values are expanded first.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Added inside every logarithm of a probability, as the reference does.
LOG_EPSILON = 1e-8

CostFunction = Callable[[int, float, float], float]
#: A cost that also reads the node's low-level distance (g counts search edges, dist primitive actions).
DistanceCostFunction = Callable[[int, float, float, int], float]


def levin_cost(g: int, log_pi: float, h: float = 0.0, *, plus_one: bool = False) -> float:
    """LevinTS: ln g - ln π (the reference code), or ln(d + 1) - ln π (the paper's (d+1)/π).

    `h` is ignored. The root (g = 0) costs 0 in the code form.
    """
    if plus_one:
        return math.log(g + 1) - log_pi
    if g == 0:
        return 0.0
    return math.log(g) - log_pi


def phs_cost(g: int, log_pi: float, h: float) -> float:
    """PHS*: ln(η g / π) = ln(g + h) - (1 + h/g) ln π, with h clamped at 0 and the root at 0.

    The log form of φ(n) = η(n) g(n) / π(n), η = (1 + h/g) / π^{h/g} (paper eq. 1-2).
    """
    if g == 0:
        return 0.0
    h = max(h, 0.0)
    return math.log(g + h + LOG_EPSILON) - (1.0 + h / g) * log_pi


def hips_cost(g: int, log_pi: float, h: float, dist: int) -> float:
    """HIPS-ε's PHS*-like cost (spec/algorithms.md 8.3): ln(g m) - m ln π with m = 1 + max(h, 0)/dist.

    g counts search edges (a subgoal edge is one), dist the primitive actions from the
    root, so the heuristic's low-level distance is compared with the low-level distance
    travelled. The root (g = 0) costs 0.
    """
    if g == 0:
        return 0.0
    m = 1.0 + max(h, 0.0) / max(dist, 1)
    return math.log(g * m) - m * log_pi


def wastar_cost(g: int, log_pi: float, h: float, *, weight: float = 1.5) -> float:
    """Weighted A*: g + w h, with the raw (unclamped) heuristic."""
    return g + weight * h


def astar_cost(g: int, log_pi: float, h: float) -> float:
    """A*: g + h."""
    return g + h


def gbfs_cost(g: int, log_pi: float, h: float) -> float:
    """Greedy best-first search: h."""
    return h


def uniform_cost(g: int, log_pi: float, h: float) -> float:
    """Breadth-first order under unit costs: g (ties first-in, first-out)."""
    return float(g)


def noisy_log_policy(log_policy: np.ndarray, epsilon: float) -> np.ndarray:
    """ln((1 - ε) π(a) + ε/|A| + 1e-8) for log-probabilities `log_policy` [..., |A|] (spec 1.3).

    ε = 0 is exact (ln(π + 1e-8)), unlike the reference, which sums raw probabilities then.
    """
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"policy noise epsilon must be in [0, 1], got {epsilon}")
    probabilities = np.exp(np.asarray(log_policy, dtype=np.float64))
    return np.log((1.0 - epsilon) * probabilities + (epsilon / probabilities.shape[-1] + LOG_EPSILON))


@dataclass(frozen=True)
class Algorithm:
    """A best-first search configuration: its priority and what it needs evaluated.

    `goal_test_at_expansion` and `reopen` give textbook A* (optimal with an
    admissible heuristic); every other algorithm follows the reference skeleton:
    goal test when a state is generated, and the first generated copy of a state
    kept for ever. `lazy_duplicates` gives the paper's Algorithm 1 instead: every
    child enters the open list, and a popped node whose state was already expanded
    is skipped but counted against the budget.
    """

    name: str
    cost: CostFunction | DistanceCostFunction
    uses_policy: bool
    uses_heuristic: bool
    goal_test_at_expansion: bool = False
    reopen: bool = False
    lazy_duplicates: bool = False
    uses_distance: bool = False  # the cost is a `DistanceCostFunction`

    def __post_init__(self) -> None:
        if self.lazy_duplicates and self.reopen:
            raise ValueError("lazy duplicate detection and reopening cannot be combined")


#: How a search treats a state generated again: ``eager`` (the reference code: the first
#: generated copy wins) or ``lazy`` (the paper's pseudo-code: closed set over expanded states).
DUPLICATE_RULES = ("eager", "lazy")


def make_algorithm(name: str, *, weight: float = 1.5, plus_one: bool = False, duplicates: str = "eager") -> Algorithm:
    """The algorithm called `name`: levin, phs, wastar, astar, gbfs or bfs.

    `plus_one`: LevinTS with the paper's (d + 1)/π instead of the code's g/π.
    `duplicates`: one of `DUPLICATE_RULES` (A* always reopens instead).
    ``hips`` is HIPS-ε's cost; its search takes ln π from a child generator's edges.
    """
    if duplicates not in DUPLICATE_RULES:
        raise ValueError(f"duplicates must be one of {', '.join(DUPLICATE_RULES)}, not {duplicates!r}")
    lazy = duplicates == "lazy"
    # functools.partial rather than closures: an Algorithm is pickled to search processes
    if name == "levin":
        cost = functools.partial(levin_cost, plus_one=plus_one)
        return Algorithm("levin", cost, uses_policy=True, uses_heuristic=False, lazy_duplicates=lazy)
    if name == "phs":
        return Algorithm("phs", phs_cost, uses_policy=True, uses_heuristic=True, lazy_duplicates=lazy)
    if name == "wastar":
        if weight < 0:
            raise ValueError(f"the WA* weight must be non-negative, got {weight}")
        weighted = functools.partial(wastar_cost, weight=weight)
        return Algorithm("wastar", weighted, uses_policy=False, uses_heuristic=True, lazy_duplicates=lazy)
    if name == "astar":
        return Algorithm(
            "astar", astar_cost, uses_policy=False, uses_heuristic=True, goal_test_at_expansion=True, reopen=True
        )
    if name == "gbfs":
        return Algorithm("gbfs", gbfs_cost, uses_policy=False, uses_heuristic=True, lazy_duplicates=lazy)
    if name == "bfs":
        return Algorithm("bfs", uniform_cost, uses_policy=False, uses_heuristic=False, lazy_duplicates=lazy)
    if name == "hips":
        return Algorithm("hips", hips_cost, uses_policy=False, uses_heuristic=True, uses_distance=True)
    raise ValueError(f"unknown search algorithm {name!r}; choose from {', '.join(ALGORITHM_NAMES)} (or hips)")


ALGORITHM_NAMES = ("bfs", "astar", "wastar", "gbfs", "levin", "phs")
