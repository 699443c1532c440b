"""Best-first policy and heuristic search (LevinTS, PHS*, WA*, A*, GBFS, BFS).

The engine (`BestFirstSearch`) is a state machine that asks its caller to evaluate
states, so one engine serves exact, buffered and lockstep evaluation. This package
does not import torch: evaluators are any callables returning numpy arrays.
"""

from sgps.search.children import ChildGenerator, Edge
from sgps.search.costs import (
    ALGORITHM_NAMES,
    Algorithm,
    astar_cost,
    gbfs_cost,
    hips_cost,
    levin_cost,
    make_algorithm,
    noisy_log_policy,
    phs_cost,
    wastar_cost,
)
from sgps.search.drivers import run, run_lockstep, run_lockstep_stream, search, search_lockstep, search_lockstep_stream
from sgps.search.engine import BestFirstSearch, SearchResult
from sgps.search.evaluators import DomainHeuristic, Evaluator, UniformPolicy
from sgps.search.graph import SearchGraph

__all__ = [
    "ALGORITHM_NAMES",
    "Algorithm",
    "BestFirstSearch",
    "ChildGenerator",
    "DomainHeuristic",
    "Edge",
    "Evaluator",
    "SearchGraph",
    "SearchResult",
    "UniformPolicy",
    "astar_cost",
    "gbfs_cost",
    "hips_cost",
    "levin_cost",
    "make_algorithm",
    "noisy_log_policy",
    "phs_cost",
    "run",
    "run_lockstep",
    "run_lockstep_stream",
    "search",
    "search_lockstep",
    "search_lockstep_stream",
    "wastar_cost",
]
