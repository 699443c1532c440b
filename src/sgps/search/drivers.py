"""Running searches to the end: one search with an evaluator, or many in lockstep."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sgps.domains.base import Domain
from sgps.search.children import ChildGenerator
from sgps.search.costs import Algorithm
from sgps.search.engine import BestFirstSearch, SearchResult
from sgps.search.evaluators import Evaluator


def run(search: BestFirstSearch[Any], evaluator: Evaluator) -> SearchResult:
    """Answer `search`'s evaluation requests with `evaluator` until it finishes."""
    while True:
        states = search.advance()
        if not states:
            return search.result
        search.receive(*evaluator(states))


def search(
    domain: Domain[Any],
    root: Any,
    algorithm: Algorithm,
    evaluator: Evaluator,
    *,
    budget: int | None = None,
    epsilon: float = 0.01,
    batch_size: int = 1,
    record_graph: bool = False,
    children: ChildGenerator[Any] | None = None,
    interim_budgets: tuple[int, ...] = (),
) -> SearchResult:
    """One search of `root`: exact best-first order with `batch_size` 1, buffered with k > 1;
    `children`: expand through this generator (`sgps.search.children`) instead of one child per action;
    `interim_budgets`: also record the results of these smaller budgets (`SearchResult.within`)."""
    engine = BestFirstSearch(domain, root, algorithm, budget=budget, epsilon=epsilon, batch_size=batch_size,
                             record_graph=record_graph, children=children, interim_budgets=interim_budgets)  # fmt: skip
    return run(engine, evaluator)


def run_lockstep(
    searches: Sequence[BestFirstSearch[Any]],
    evaluator: Evaluator,
    on_finished: Callable[[int], None] | None = None,
    on_result: Callable[[int, SearchResult], None] | None = None,
) -> list[SearchResult]:
    """Advance every unfinished search to its next request and evaluate all requests as one batch.

    With searches in exact mode (batch size 1) each search follows exactly the order
    it would follow alone, while the evaluator sees batches of up to N x |A| states.
    Results come back in input order. `on_finished(count)` is told how many searches
    have finished whenever that number grows (a progress display); `on_result(index,
    result)` gets each search's result as soon as it finishes (e.g. to journal it).
    """
    active = [s for s in searches if not s.done]
    if on_result is not None:
        index_of = {id(s): i for i, s in enumerate(searches)}
        for s in searches:
            if s.done:
                on_result(index_of[id(s)], s.result)
    while active:
        requests = [(s, s.advance()) for s in active]
        requests = [(s, states) for s, states in requests if states]
        if requests:
            batch = [state for _, states in requests for state in states]
            log_policy, heuristic = evaluator(batch)
            start = 0
            for s, states in requests:
                end = start + len(states)
                s.receive(_rows(log_policy, start, end), _rows(heuristic, start, end))
                start = end
        running = len(active)
        if on_result is not None:
            for s in active:
                if s.done:
                    on_result(index_of[id(s)], s.result)
        active = [s for s in active if not s.done]
        if on_finished is not None and len(active) < running:
            on_finished(len(searches) - len(active))
    return [s.result for s in searches]


def search_lockstep(
    domain: Domain[Any],
    roots: Sequence[Any],
    algorithm: Algorithm,
    evaluator: Evaluator,
    *,
    budget: int | None = None,
    epsilon: float = 0.01,
    batch_size: int = 1,
    record_graph: bool = False,
    children: ChildGenerator[Any] | None = None,
    on_finished: Callable[[int], None] | None = None,
    on_result: Callable[[int, SearchResult], None] | None = None,
    interim_budgets: tuple[int, ...] = (),
) -> list[SearchResult]:
    """Search every root in lockstep (one evaluator batch per round).

    `batch_size`: children each search gathers before a round asks for their evaluation
    (1: exact best-first order per search; k > 1: the reference's buffered order).
    `children`: expand through this generator (`sgps.search.children`) instead of one child per action.
    `on_finished`, `on_result`: as in `run_lockstep`. `interim_budgets`: each search also records
    the results of these smaller budgets on its way (`BestFirstSearch`, `SearchResult.within`).
    """
    options = {"budget": budget, "epsilon": epsilon, "batch_size": batch_size, "record_graph": record_graph,
               "children": children, "interim_budgets": interim_budgets}  # fmt: skip
    searches = [BestFirstSearch(domain, root, algorithm, **options) for root in roots]
    return run_lockstep(searches, evaluator, on_finished, on_result)


def _rows(values: np.ndarray | None, start: int, end: int) -> np.ndarray | None:
    return None if values is None else values[start:end]
