"""Best-first search as a state machine that asks its caller for evaluations.

The engine never calls a model. `advance()` expands nodes until generated children
need a policy and/or heuristic, and returns their states; the caller evaluates them
and hands the answers to `receive(log_policy, heuristic)`; repeat until `advance()`
returns nothing. How often the engine asks is its `batch_size`:

- 1 (exact mode): after every expansion that generated children, so nodes are
  expanded in exact best-first order;
- k > 1 (buffered mode): once k children are waiting or the open list is empty, the
  approximate order of the reference implementation;
- lockstep (`sgps.search.drivers.search_lockstep`): many searches in exact mode,
  each advanced one expansion, their requests evaluated as one batch.

Semantics (spec/algorithms.md section 1.4), chosen to match the reference:

- Goal test at generation (the goal child is neither evaluated nor counted as
  generated); the root is tested first. A* (`Algorithm.goal_test_at_expansion`)
  tests when a node is popped instead, and reopens states reached more cheaply.
- Duplicate detection over every generated state: the first copy is kept for ever,
  so every pop is a new state. Terminal non-goal children are dropped, unlinked.
- `expanded` counts pops. Budget B: the B-th pop is counted and ends the search
  (status "budget") before generating anything, so a solved search used at most
  B - 1 expansions. Children still waiting for evaluation then are counted as
  generated and kept in the graph, as the reference's final flush does.
- The budget only cuts: no priority depends on it, so a search with budget B pops
  exactly the first B nodes that a search with a larger budget pops. Given
  `interim_budgets`, one search records at each of their B-th pops what a search with
  that budget would have returned (`SearchResult.interim`, `SearchResult.within`), and
  goes on: the test procedure's doubling rounds then continue one tree instead of
  starting again (`sgps.runs.testing.run_test`).
- `generated` counts the root and every evaluated node.
- Ties in priority are broken by node id (generation order): first in, first out.

With `Algorithm.lazy_duplicates` the engine follows the paper's best-first search
(its Algorithm 1) instead: every non-goal child gets a node of its own and enters
the open list; a popped node whose state was already expanded counts as an expansion
(against the budget) and is skipped. The recorded graph is then the search tree.

A `ChildGenerator` (`sgps.search.children`) replaces the one-child-per-action
expansion: it returns the node's outgoing edges, each a sequence of primitive actions
with its own probability (HIPS-ε's subgoal and primitive children, spec 8.3). The
engine then keeps each node's low-level distance (the number of primitive actions
from the root, which an `Algorithm.uses_distance` cost reads), takes ln π from the
edges instead of asking for a policy, and returns the solution as primitive actions.
Duplicates, goal test at generation and the budget work as above. `domain_steps`
counts every primitive transition the search computed, the generator's rollouts
included, so searches of different kinds can be compared by their simulator work.
"""

from __future__ import annotations

import heapq
import time
from array import array
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import numpy as np

from sgps.domains.base import Domain
from sgps.search.children import ChildGenerator
from sgps.search.costs import Algorithm, noisy_log_policy
from sgps.search.graph import SearchGraph

S = TypeVar("S")
Status = Literal["solved", "budget", "no_solution"]


@dataclass(frozen=True)
class InterimStop:
    """Where a search with a smaller budget would have stopped: at the pop that ends it."""

    budget: int  # the smaller budget (= the nodes it expanded)
    generated: int  # its `SearchResult.generated`, the children then waiting included
    domain_steps: int
    seconds: float


@dataclass(frozen=True)
class SearchResult:
    """The outcome of one search."""

    status: Status
    states: tuple[Any, ...] | None  # s_0 ... s_T of the solution
    actions: tuple[int, ...] | None  # a_0 ... a_{T-1}
    expanded: int
    generated: int
    seconds: float  # wall time from the start of the search to its end, evaluations included
    solution_log_prob: float | None  # ln π of the goal node (noisy policy), policy searches only
    graph: SearchGraph | None = None  # when the search was asked to record it
    domain_steps: int = 0  # primitive transitions computed (expansions' children and any rollouts)
    #: What the caller drew from the graph where the search ran, the graph then left out (a
    #: training method's draw: `sgps.training.bootstrap.ResultDrawer`).
    draw: Any = None
    #: The searches with smaller budgets that ended inside this one (`BestFirstSearch`'s
    #: `interim_budgets` that its pops reached), in increasing budget.
    interim: tuple[InterimStop, ...] = ()
    #: Whether its goal was recognised when popped (A*) rather than when generated: then a
    #: search whose budget is exactly its expansions solves it too.
    goal_at_pop: bool = False

    @property
    def solved(self) -> bool:
        return self.status == "solved"

    @property
    def length(self) -> int | None:
        """The solution cost (= number of actions), when solved."""
        return None if self.actions is None else len(self.actions)

    def within(self, budget: int) -> SearchResult:
        """The result of the same search with `budget` instead of its own, where this one tells it:
        at one of its interim budgets, at its own (a search cut by its budget), and at any budget
        its search ended before reaching (solved or out of nodes before the `budget`-th pop, or
        solved by that pop itself when goals are tested at expansion). Other budgets raise.

        A stop recorded on the way is a failed search ("budget") that carries no graph."""
        for stop in self.interim:
            if stop.budget == budget:
                return SearchResult("budget", None, None, budget, stop.generated, stop.seconds, None,
                                    domain_steps=stop.domain_steps)  # fmt: skip
        if self.status == "budget":
            known = self.expanded == budget
        else:
            known = self.expanded < budget or (self.expanded == budget and self.solved and self.goal_at_pop)
        if not known:
            raise ValueError(f"this search ({self.status}, {self.expanded:,} expansions) recorded no stop at "
                             f"{budget:,}: what a search with that budget returns is not known from it")  # fmt: skip
        return self


class BestFirstSearch(Generic[S]):
    """One best-first search of one problem; see the module docstring for the protocol."""

    def __init__(
        self,
        domain: Domain[S],
        root: S,
        algorithm: Algorithm,
        *,
        budget: int | None = None,
        epsilon: float = 0.01,
        batch_size: int = 1,
        record_graph: bool = False,
        children: ChildGenerator[S] | None = None,
        interim_budgets: tuple[int, ...] = (),
    ) -> None:
        if budget is not None and budget < 1:
            raise ValueError(f"the expansion budget must be at least 1 (or None), got {budget}")
        below = budget if budget is not None else float("inf")
        if list(interim_budgets) != sorted(set(interim_budgets)) or not all(0 < b < below for b in interim_budgets):
            raise ValueError(f"interim budgets must increase from 1 to below the budget ({budget}): {interim_budgets}")
        if batch_size < 1:
            raise ValueError(f"the evaluation batch size must be at least 1, got {batch_size}")
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"policy noise epsilon must be in [0, 1], got {epsilon}")
        self.domain = domain
        self.algorithm = algorithm
        self.budget = budget
        self.epsilon = epsilon
        self.batch_size = batch_size
        self.record_graph = record_graph
        self.children = children
        self.expanded = 0
        self.generated = 0
        self.domain_steps = 0
        self._num_actions = domain.num_actions
        self._states: list[S] = [root]
        self._parent = array("i", [-1])
        self._action = array("b", [-1])
        self._g = array("i", [0])
        self._log_p = array("d", [0.0])
        self._policy = array("f")  # |A| noisy log-probabilities per evaluated node, by id
        self._ids: dict[Hashable, int] = {domain.key(root): 0}
        self._closed: set[Hashable] = set()  # expanded states, lazy duplicate detection only
        self._open: list[tuple[float, int]] = []
        self._pending: list[int] = [0]
        self._superseded: set[int] = set()
        self._edges = array("i")  # rediscovery edges, flattened pairs
        self._dist = array("i", [0])  # low-level distance from the root, with a child generator
        self._edge_actions: list[tuple[int, ...]] = [()]  # primitive actions into each node, with a generator
        self._interim_budgets = list(reversed(interim_budgets))  # the next one last
        self._interim: list[InterimStop] = []
        self._started = time.perf_counter()
        self._result: SearchResult | None = None
        if domain.is_goal(root):
            self._finish("solved", goal_parent=None, goal_action=-1, goal_state=root)

    # -- the protocol -----------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._result is not None

    @property
    def result(self) -> SearchResult:
        if self._result is None:
            raise RuntimeError("the search has not finished")
        return self._result

    def advance(self) -> list[S]:
        """Expand until children need evaluating; their states, or [] once finished."""
        while self._result is None:
            pending = self._pending
            if pending and (len(pending) >= self.batch_size or not self._open):
                return [self._states[node] for node in pending]
            if not self._open:
                self._finish("no_solution")
                break
            self._expand_next()
        return []

    def receive(self, log_policy: np.ndarray | None, heuristic: np.ndarray | None) -> None:
        """Answers for the states `advance()` returned: log π [B, |A|] and h [B] (either may be None
        when the algorithm does not use it)."""
        pending = self._pending
        count = len(pending)
        algorithm = self.algorithm
        if algorithm.uses_policy:
            if log_policy is None or np.shape(log_policy) != (count, self._num_actions):
                raise ValueError(f"expected log_policy of shape ({count}, {self._num_actions}) for {algorithm.name}")
            noisy = noisy_log_policy(log_policy, self.epsilon).astype(np.float32)
            if np.isnan(noisy).any():
                raise ValueError("the evaluator returned NaN in log_policy")
            self._policy.frombytes(noisy.tobytes())
        if algorithm.uses_heuristic:
            if heuristic is None or np.shape(heuristic) != (count,):
                raise ValueError(f"expected heuristic of shape ({count},) for {algorithm.name}")
            h_array = np.asarray(heuristic, dtype=np.float64)
            if np.isnan(h_array).any():
                raise ValueError("the evaluator returned NaN in heuristic")
            h_values = h_array.tolist()
        else:
            h_values = [0.0] * count
        cost, g, log_p, open_list = algorithm.cost, self._g, self._log_p, self._open
        if algorithm.uses_distance:
            dist = self._dist if self.children is not None else g
            for node, h in zip(pending, h_values, strict=True):
                heapq.heappush(open_list, (cost(g[node], log_p[node], h, dist[node]), node))
        else:
            for node, h in zip(pending, h_values, strict=True):
                heapq.heappush(open_list, (cost(g[node], log_p[node], h), node))
        self.generated += count
        self._pending = []

    # -- expansion --------------------------------------------------------------------

    def _expand_next(self) -> None:
        _, node = heapq.heappop(self._open)
        if node in self._superseded:
            return
        self.expanded += 1
        domain = self.domain
        state = self._states[node]
        if self.algorithm.goal_test_at_expansion and domain.is_goal(state):
            self._finish("solved", goal_parent=node, goal_at_pop=True)
            return
        if self.budget is not None and self.expanded >= self.budget:
            self.generated += len(self._pending)
            self._pending = []
            self._finish("budget")
            return
        if self._interim_budgets and self.expanded == self._interim_budgets[-1]:
            self._stop_at_interim_budget()
        if self.children is not None:
            self._expand_edges(node, state, self.children)
            return
        if self.algorithm.lazy_duplicates:
            self._expand_lazily(node, state)
            return
        ids, key_of, step = self._ids, domain.key, domain.step
        child_g = self._g[node] + 1
        parent_log_p = self._log_p[node]
        uses_policy = self.algorithm.uses_policy
        row = node * self._num_actions
        reopen = self.algorithm.reopen
        test_goal = not self.algorithm.goal_test_at_expansion
        for action in range(self._num_actions):
            child = step(state, action)
            key = key_of(child)
            known = ids.get(key)
            if known is not None:
                if known == node:
                    continue
                if self.record_graph:
                    self._edges.extend((node, known) if node < known else (known, node))
                if not (reopen and child_g < self._g[known]):
                    continue
                self._superseded.add(known)
            if test_goal and domain.is_goal(child):
                self.domain_steps += action + 1
                self._finish("solved", goal_parent=node, goal_action=action, goal_state=child)
                return
            if domain.is_dead(child):
                continue
            child_id = len(self._states)
            ids[key] = child_id
            self._states.append(child)
            self._parent.append(node)
            self._action.append(action)
            self._g.append(child_g)
            self._log_p.append(parent_log_p + self._policy[row + action] if uses_policy else 0.0)
            self._pending.append(child_id)
        self.domain_steps += self._num_actions

    def _expand_lazily(self, node: int, state: S) -> None:
        """Expand `node` unless its state was expanded before; every child becomes a new node."""
        key = self.domain.key(state)
        if key in self._closed:
            return
        self._closed.add(key)
        domain, uses_policy = self.domain, self.algorithm.uses_policy
        child_g, parent_log_p, row = self._g[node] + 1, self._log_p[node], node * self._num_actions
        for action in range(self._num_actions):
            child = domain.step(state, action)
            if domain.is_goal(child):
                self.domain_steps += action + 1
                self._finish("solved", goal_parent=node, goal_action=action, goal_state=child)
                return
            if domain.is_dead(child):
                continue
            self._states.append(child)
            self._parent.append(node)
            self._action.append(action)
            self._g.append(child_g)
            self._log_p.append(parent_log_p + self._policy[row + action] if uses_policy else 0.0)
            self._pending.append(len(self._states) - 1)
        self.domain_steps += self._num_actions

    def _expand_edges(self, node: int, state: S, children: ChildGenerator[S]) -> None:
        """Expand `node` through the generator's edges: eager duplicates, goal test at generation."""
        edges, steps = children.expand(state)
        self.domain_steps += steps
        domain, ids = self.domain, self._ids
        child_g, parent_dist, parent_log_p = self._g[node] + 1, self._dist[node], self._log_p[node]
        for edge in edges:
            key = domain.key(edge.state)
            known = ids.get(key)
            if known is not None:
                if self.record_graph and known != node:
                    self._edges.extend((node, known) if node < known else (known, node))
                continue
            if domain.is_goal(edge.state):
                self._finish("solved", goal_parent=node, goal_state=edge.state, goal_edge=edge.actions,
                             goal_log_prob=edge.log_prob)  # fmt: skip
                return
            if domain.is_dead(edge.state):
                continue
            child_id = len(self._states)
            ids[key] = child_id
            self._states.append(edge.state)
            self._parent.append(node)
            self._action.append(edge.actions[0] if len(edge.actions) == 1 else -1)
            self._g.append(child_g)
            self._dist.append(parent_dist + len(edge.actions))
            self._edge_actions.append(edge.actions)
            self._log_p.append(parent_log_p + edge.log_prob)
            self._pending.append(child_id)

    # -- results ----------------------------------------------------------------------

    def _stop_at_interim_budget(self) -> None:
        """Record what a search with the next interim budget returns at this, its last pop (the
        children waiting for evaluation counted as generated, as at the budget), and go on."""
        budget = self._interim_budgets.pop()
        generated = self.generated + len(self._pending)
        seconds = time.perf_counter() - self._started
        self._interim.append(InterimStop(budget, generated, self.domain_steps, seconds))

    def _finish(
        self,
        status: Status,
        goal_parent: int | None = None,
        goal_action: int = -1,
        goal_state: S | None = None,
        goal_edge: tuple[int, ...] = (),
        goal_log_prob: float = 0.0,
        goal_at_pop: bool = False,
    ) -> None:
        states = actions = log_prob = None
        if status == "solved" and self.children is not None:
            states, actions, log_prob = self._edge_solution(goal_parent, goal_edge, goal_log_prob)
        elif status == "solved":
            nodes = self._path(goal_parent)
            states = [self._states[n] for n in nodes]
            actions = [self._action[n] for n in nodes[1:]]
            if goal_state is not None:  # the goal was found at generation (or is the root)
                states.append(goal_state)
                if goal_parent is not None:
                    actions.append(goal_action)
            if self.algorithm.uses_policy and goal_parent is not None:
                log_prob = self._log_p[goal_parent]
                if goal_action >= 0:
                    log_prob += self._policy[goal_parent * self._num_actions + goal_action]
            states, actions = tuple(states), tuple(actions)
        self._result = SearchResult(
            status,
            states,
            actions,
            self.expanded,
            self.generated,
            time.perf_counter() - self._started,
            log_prob,
            self._graph() if self.record_graph else None,
            self.domain_steps,
            interim=tuple(self._interim),
            goal_at_pop=goal_at_pop,
        )

    def _path(self, last: int | None) -> list[int]:
        """The node ids from the root to `last` (empty for None: the root itself was the goal)."""
        nodes: list[int] = []
        node = -1 if last is None else last
        while node >= 0:
            nodes.append(node)
            node = self._parent[node]
        nodes.reverse()
        return nodes

    def _edge_solution(
        self, goal_parent: int | None, goal_edge: tuple[int, ...], goal_log_prob: float
    ) -> tuple[tuple[Any, ...], tuple[int, ...], float]:
        """States, primitive actions and ln π of a solution found through a child generator."""
        actions = [a for n in self._path(goal_parent)[1:] for a in self._edge_actions[n]] + list(goal_edge)
        states = [self._states[0]]
        for action in actions:  # the low-level states between subgoals, replayed (true dynamics)
            states.append(self.domain.step(states[-1], action))
        log_prob = 0.0 if goal_parent is None else self._log_p[goal_parent] + goal_log_prob
        return tuple(states), tuple(actions), log_prob

    def _graph(self) -> SearchGraph:
        parents = np.frombuffer(self._parent, dtype=np.int32).copy()
        edges = np.frombuffer(self._edges, dtype=np.int32).reshape(-1, 2)
        if len(edges):
            edges = np.unique(edges, axis=0)
            is_tree = parents[edges[:, 1]] == edges[:, 0]
            is_tree |= parents[edges[:, 0]] == edges[:, 1]
            edges = edges[~is_tree]
        return SearchGraph(
            states=self._states,
            parents=parents,
            actions=np.frombuffer(self._action, dtype=np.int8).copy(),
            depths=np.frombuffer(self._g, dtype=np.int32).copy(),
            rediscovered=np.ascontiguousarray(edges, dtype=np.int32),
        )
