"""Exact solvers over the `Domain` protocol: breadth-first search and A*.

They check generated levels, give optimal lengths to compare with the reference, and
build offline datasets. Both stop at a cap on the number of distinct states stored.

States are compared by `Domain.solver_key` (the duplicate-detection key, or a sound
coarsening of it such as BoulderDash's dirt-blind grid).

- `bfs`: unit costs, goal test at generation, actions tried in order 0..|A|-1, so its
  first solution is optimal and is the same action sequence as the reference's BFS.
- `astar`: A* with the domain's admissible `heuristic`, goal test at expansion, ties
  broken towards larger g then first in; a state reached again more cheaply is
  reopened, so an admissible but inconsistent heuristic still gives optimal lengths.
"""

from __future__ import annotations

import heapq
import math
import pickle
import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal

from sgps.domains.base import Domain

Status = Literal["solved", "unsolvable", "cap"]

#: The default state cap: at most 2M states, and no more than fit in about 4 GiB.
MAX_STATES = 2_000_000
MEMORY_BUDGET = 4 * 2**30


@dataclass(frozen=True)
class SolveResult:
    """The outcome of an exact search."""

    status: Status
    actions: tuple[int, ...] | None  # an optimal action sequence when solved
    expanded: int  # states whose successors were generated
    generated: int  # successors produced, duplicates included
    stored: int  # distinct states kept
    seconds: float

    @property
    def length(self) -> int | None:
        """The optimal solution length, when solved."""
        return None if self.actions is None else len(self.actions)


def solve(
    domain: Domain[Any],
    state: Any,
    *,
    method: Literal["auto", "bfs", "astar"] = "auto",
    max_states: int = 2_000_000,
) -> SolveResult:
    """Find an optimal solution of the level whose initial state is `state`.

    `auto` uses the domain's `exact_solver` if it names one, else A* when the domain
    has a heuristic (it is not the zero default of `Domain.heuristic`), else BFS.
    """
    if method == "auto":
        method = domain.exact_solver or ("bfs" if type(domain).heuristic is Domain.heuristic else "astar")
    if method == "bfs":
        return _bfs(domain, state, max_states)
    if method == "astar":
        return _astar(domain, state, max_states)
    raise ValueError(f"unknown solver method {method!r}; use 'auto', 'bfs' or 'astar'")


def default_state_cap(domain: Domain[Any], state: Any) -> int:
    """`MAX_STATES`, lowered for large levels so the stored states fit in `MEMORY_BUDGET`.

    A stored state costs its key in the parent table and, on the frontier, the state
    itself; four times their pickled size is a generous estimate of their size in memory.
    """
    size = 4 * len(pickle.dumps((state, domain.solver_key(state)), protocol=pickle.HIGHEST_PROTOCOL))
    return max(1, min(MAX_STATES, MEMORY_BUDGET // size))


def _path(parents: dict[Hashable, tuple[Hashable, int] | None], key: Hashable) -> tuple[int, ...]:
    actions = []
    link = parents[key]
    while link is not None:
        key, action = link
        actions.append(action)
        link = parents[key]
    return tuple(reversed(actions))


def _bfs(domain: Domain[Any], root: Any, max_states: int) -> SolveResult:
    started = time.perf_counter()
    key_of, successors, is_goal, is_dead = domain.solver_key, domain.successors, domain.is_goal, domain.is_dead
    if is_goal(root):
        return SolveResult("solved", (), 0, 0, 1, time.perf_counter() - started)
    parents: dict[Hashable, tuple[Hashable, int] | None] = {key_of(root): None}
    frontier = deque([root])
    expanded = generated = 0
    while frontier:
        state = frontier.popleft()
        parent_key = key_of(state)
        expanded += 1
        for action, child in enumerate(successors(state)):
            generated += 1
            key = key_of(child)
            if key in parents:
                continue
            parents[key] = (parent_key, action)
            if is_goal(child):
                return SolveResult(
                    "solved", _path(parents, key), expanded, generated, len(parents), time.perf_counter() - started
                )
            if not is_dead(child):
                frontier.append(child)
        if len(parents) >= max_states:
            return SolveResult("cap", None, expanded, generated, len(parents), time.perf_counter() - started)
    return SolveResult("unsolvable", None, expanded, generated, len(parents), time.perf_counter() - started)


def _astar(domain: Domain[Any], root: Any, max_states: int) -> SolveResult:
    started = time.perf_counter()
    key_of, successors, is_goal, is_dead = domain.solver_key, domain.successors, domain.is_goal, domain.is_dead
    heuristic = domain.heuristic
    root_key = key_of(root)
    parents: dict[Hashable, tuple[Hashable, int] | None] = {root_key: None}
    best_g: dict[Hashable, int] = {root_key: 0}
    h0 = heuristic(root)
    if h0 == math.inf:
        return SolveResult("unsolvable", None, 0, 0, 1, time.perf_counter() - started)
    counter = 0
    # Entries: (f, -g, insertion counter, g, state); stale entries are skipped on pop.
    open_list = [(h0, 0, counter, 0, root)]
    expanded = generated = 0
    while open_list:
        _, _, _, g, state = heapq.heappop(open_list)
        key = key_of(state)
        if best_g[key] < g:
            continue
        if is_goal(state):
            return SolveResult(
                "solved", _path(parents, key), expanded, generated, len(parents), time.perf_counter() - started
            )
        expanded += 1
        child_g = g + 1
        for action, child in enumerate(successors(state)):
            generated += 1
            child_key = key_of(child)
            if best_g.get(child_key, math.inf) <= child_g or is_dead(child):
                continue
            h = heuristic(child)
            if h == math.inf:
                continue
            best_g[child_key] = child_g
            parents[child_key] = (key, action)
            counter += 1
            heapq.heappush(open_list, (child_g + h, -child_g, counter, child_g, child))
        if len(parents) >= max_states:
            return SolveResult("cap", None, expanded, generated, len(parents), time.perf_counter() - started)
    return SolveResult("unsolvable", None, expanded, generated, len(parents), time.perf_counter() - started)
