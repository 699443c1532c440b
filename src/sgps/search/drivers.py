"""Running searches to the end: one search with an evaluator, or many in lockstep."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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
    run_lockstep_stream(enumerate(searches), evaluator, concurrency=max(1, len(searches)),
                        on_finished=on_finished, on_result=on_result)  # fmt: skip
    return [s.result for s in searches]


def run_lockstep_stream(
    pending: Iterable[tuple[int, BestFirstSearch[Any]]],
    evaluator: Evaluator,
    *,
    concurrency: int,
    on_finished: Callable[[int], None] | None = None,
    on_result: Callable[[int, SearchResult], None] | None = None,
) -> int:
    """Run the (index, search) pairs of `pending` in lockstep, at most `concurrency` at a time: a
    search is taken from `pending` (and may be built only then) as soon as one finishes, so the
    evaluator's batches stay full until `pending` runs dry. Returns how many searches ran.

    Each search's order is its own (exact, or buffered with its evaluation batch), so the
    results do not depend on `concurrency` nor on the order of `pending`; only the batches the
    evaluator sees do. `on_finished`, `on_result`: as in `run_lockstep` (`index` from `pending`).
    """
    if concurrency < 1:
        raise ValueError(f"at least one search must run at a time, got {concurrency}")
    source = iter(pending)
    active: list[tuple[int, BestFirstSearch[Any]]] = []
    finished = 0

    def take() -> None:
        nonlocal finished
        while len(active) < concurrency:
            item = next(source, None)
            if item is None:
                return
            index, search = item
            if search.done:  # finished before it came here (e.g. its root is a goal)
                finished += 1
                if on_result is not None:
                    on_result(index, search.result)
                continue
            active.append(item)

    take()
    while active:
        requests = [(s, s.advance()) for _, s in active]
        requests = [(s, states) for s, states in requests if states]
        if requests:
            batch = [state for _, states in requests for state in states]
            log_policy, heuristic = evaluator(batch)
            start = 0
            for s, states in requests:
                end = start + len(states)
                s.receive(_rows(log_policy, start, end), _rows(heuristic, start, end))
                start = end
        done = [(index, s) for index, s in active if s.done]
        if done:
            active = [(index, s) for index, s in active if not s.done]
            finished += len(done)
            if on_result is not None:
                for index, s in done:
                    on_result(index, s.result)
            take()  # before telling the count, which then holds searches done as they were taken
            if on_finished is not None:
                on_finished(finished)
    return finished


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
    concurrency: int | None = None,
) -> list[SearchResult]:
    """Search every root in lockstep (one evaluator batch per round).

    `batch_size`: children each search gathers before a round asks for their evaluation
    (1: exact best-first order per search; k > 1: the reference's buffered order).
    `children`: expand through this generator (`sgps.search.children`) instead of one child per action.
    `on_finished`, `on_result`: as in `run_lockstep`. `interim_budgets`: each search also records
    the results of these smaller budgets on its way (`BestFirstSearch`, `SearchResult.within`).
    `concurrency`: at most this many searches at a time (their trees in memory at once), the
    next root's search starting as one finishes (`run_lockstep_stream`); None: all at once.
    The results are the same either way.
    """
    results: list[SearchResult | None] = [None] * len(roots)

    def keep(index: int, result: SearchResult) -> None:
        results[index] = result
        if on_result is not None:
            on_result(index, result)

    search_lockstep_stream(domain, enumerate(roots), algorithm, evaluator,
                           concurrency=max(1, len(roots)) if concurrency is None else concurrency,
                           on_finished=on_finished, on_result=keep, budget=budget, epsilon=epsilon,
                           batch_size=batch_size, record_graph=record_graph, children=children,
                           interim_budgets=interim_budgets)  # fmt: skip
    return results  # type: ignore[return-value]


def search_lockstep_stream(
    domain: Domain[Any],
    roots: Iterable[tuple[int, Any]],
    algorithm: Algorithm,
    evaluator: Evaluator,
    *,
    concurrency: int,
    on_finished: Callable[[int], None] | None = None,
    on_result: Callable[[int, SearchResult], None] | None = None,
    **options: Any,
) -> int:
    """Search the (index, root) pairs of `roots` in lockstep, `concurrency` at a time, each root's
    search built only when it starts (`run_lockstep_stream`; `roots` may be a queue that hands
    out work as it comes); `options`: `BestFirstSearch`'s keywords (budget, epsilon, batch_size,
    record_graph, children, interim_budgets), as `search_lockstep` takes them. Returns how many ran."""
    pending = ((index, BestFirstSearch(domain, root, algorithm, **options)) for index, root in roots)
    return run_lockstep_stream(pending, evaluator, concurrency=concurrency, on_finished=on_finished,
                               on_result=on_result)  # fmt: skip


def _rows(values: np.ndarray | None, start: int, end: int) -> np.ndarray | None:
    return None if values is None else values[start:end]
