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

_worker_method: Any = None
_worker_domain: Any = None


def _start_worker(domain: Domain[Any], example: Any, config: TrainConfig) -> None:
    global _worker_method, _worker_domain
    torch.set_num_threads(1)
    _worker_domain = domain
    _worker_method = build_method(domain, example, config)


def _search_share(
    weights: dict[str, torch.Tensor], levels: Sequence[Any], budget: int, epsilon: float, record_graph: bool
) -> list[SearchResult]:
    _worker_method.load_model_weights(weights)
    return search_lockstep(
        _worker_domain,
        levels,
        _worker_method.algorithm,
        _worker_method.evaluator(),
        budget=budget,
        epsilon=epsilon,
        record_graph=record_graph,
    )


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
    ) -> list[SearchResult]:
        """Search `levels` (dealt round-robin to the workers); results in input order."""
        shares = [list(levels[i :: self.workers]) for i in range(self.workers)]
        shares = [share for share in shares if share]
        futures = [
            self.executor.submit(_search_share, weights, share, budget, epsilon, record_graph) for share in shares
        ]
        answers = [future.result() for future in futures]
        results: list[SearchResult] = [None] * len(levels)  # type: ignore[list-item]
        for worker, answer in enumerate(answers):
            results[worker :: len(shares)] = answer
        return results

    def close(self) -> None:
        self.executor.shutdown(cancel_futures=True)

    def __enter__(self) -> SearchPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
