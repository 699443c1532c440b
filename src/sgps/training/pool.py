"""Searching a Bootstrap batch with a pool of worker processes.

Each worker holds its own copy of the method's model, runs torch with one thread,
and searches its share of the batch in lockstep. Before every batch the current
weights go to every worker (the model changes after every batch). Measured on a
2-core machine (`benchmarks/parallel.py`, docs/training.md), two workers search a
batch 1.0-1.3x faster than lockstep in one process with two torch threads, and
1.3-2.3x faster than with one thread.

Workers start with the "spawn" method: a fresh interpreter per worker, so no torch
or OpenMP state is inherited from the parent. A domain registered by a plugin must
therefore be importable by the workers (its `Domain` object is pickled by reference).
Each search follows its exact best-first order whatever the split, so the results
are those of one in-process lockstep run.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch

from sgps.domains.base import Domain
from sgps.search.drivers import search_lockstep
from sgps.search.engine import SearchResult
from sgps.training.config import TrainConfig
from sgps.training.setup import build_method


class SearchWorker:
    """One worker's copy of the method: searches shares of a batch with the weights it is sent.

    Used in each process of `SearchPool` and by each actor of `sgps.training.ray_pool`.
    """

    def __init__(self, domain: Domain[Any], example: Any, config: TrainConfig) -> None:
        torch.set_num_threads(1)
        self.domain = domain
        self.method = build_method(domain, example, config)

    def ready(self) -> bool:
        """True once the worker is built (Ray waits on it to know an actor has started)."""
        return True

    def search(
        self,
        weights: dict[str, torch.Tensor],
        levels: Sequence[Any],
        budget: int,
        epsilon: float,
        record_graph: bool,
        test: bool = False,
    ) -> list[SearchResult]:
        """Search `levels` in lockstep; `test`: with the method's test evaluator (π^SG's test α)."""
        self.method.load_model_weights(weights)
        evaluator = self.method.test_evaluator() if test else self.method.evaluator()
        return search_lockstep(self.domain, levels, self.method.algorithm, evaluator, budget=budget,
                               epsilon=epsilon, record_graph=record_graph)  # fmt: skip


def deal(levels: Sequence[Any], workers: int) -> list[list[Any]]:
    """`levels` dealt round-robin into at most `workers` non-empty shares (share i: levels i, i + n, ...)."""
    shares = [list(levels[i::workers]) for i in range(workers)]
    return [share for share in shares if share]


def gather(answers: Sequence[Sequence[SearchResult]], count: int) -> list[SearchResult]:
    """The results of `deal`'s shares back in the order of the `count` levels."""
    results: list[SearchResult] = [None] * count  # type: ignore[list-item]
    for index, answer in enumerate(answers):
        results[index :: len(answers)] = answer
    return results


_worker: SearchWorker | None = None


def _start_worker(domain: Domain[Any], example: Any, config: TrainConfig) -> None:
    global _worker
    _worker = SearchWorker(domain, example, config)


def _search_share(
    weights: dict[str, torch.Tensor], levels: Sequence[Any], budget: int, epsilon: float, record_graph: bool,
    test: bool,
) -> list[SearchResult]:  # fmt: skip
    assert _worker is not None, "the worker process was not initialised"
    return _worker.search(weights, levels, budget, epsilon, record_graph, test)


class SearchPool:
    """`workers` processes that search batches of problems with a copy of the method's model."""

    def __init__(self, workers: int, domain: Domain[Any], example: Any, config: TrainConfig) -> None:
        if workers < 2:
            raise ValueError("a search pool needs at least 2 workers")
        self.workers = workers
        self.executor = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(domain, example, config),
        )

    def search(
        self,
        weights: dict[str, torch.Tensor],
        levels: Sequence[Any],
        *,
        budget: int,
        epsilon: float,
        record_graph: bool,
        test: bool = False,
    ) -> list[SearchResult]:
        """Search `levels` (dealt round-robin to the workers); results in input order."""
        shares = deal(levels, self.workers)
        futures = [self.executor.submit(_search_share, weights, share, budget, epsilon, record_graph, test)
                   for share in shares]  # fmt: skip
        return gather([future.result() for future in futures], len(levels))

    def close(self) -> None:
        self.executor.shutdown(cancel_futures=True)

    def __enter__(self) -> SearchPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
