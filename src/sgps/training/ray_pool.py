"""Searching Bootstrap batches and test rounds on a Ray cluster (`--executor ray`, the `ray` extra).

The local backend (`sgps.training.pool.SearchPool`) keeps its workers in processes of
this machine. `RaySearchPool` does the same job with Ray actors, so a cluster's cores
can search one run's batches:

- each actor is a `SearchWorker`: a copy of the method's model, one torch thread, and
  lockstep search of the share of the batch it is sent (shares are dealt round-robin,
  as in the local pool, and the results come back in the batch's order);
- the weights of the current model go into Ray's object store once per batch
  (`ray.put`) and every actor reads them from there: one copy per node, not one per
  problem or per actor;
- an actor that dies (its node lost, its process killed) is replaced by a new actor,
  which Ray places wherever a CPU is free, and the dead actor's whole share is searched
  again there. A share's results are kept only when its call returns, so every problem
  appears exactly once in the batch's results whatever failed; the searches are
  deterministic, so the re-run gives what the lost one would have.

Without an address `connect` starts a Ray instance on this machine; with one
(`--ray-address auto`, or the head's `HOST:6379` printed by `ray start --head`) it joins
that cluster. The driver keeps the run directory: only search requests and results
travel. Every node needs the same Python environment with `sgps` installed (and any
`--plugin` domain importable), as Ray's own rules for remote functions require.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import torch

from sgps.domains.base import Domain
from sgps.errors import ConfigError
from sgps.search.engine import SearchResult
from sgps.training.config import TrainConfig
from sgps.training.pool import SearchWorker, deal, gather

EXECUTORS = ("local", "ray")
#: How often one batch may lose an actor before the run gives up (a cluster that keeps failing).
MAX_REPLACEMENTS_PER_BATCH = 8
INSTALL_HINT = "pip install -c constraints.txt -e '.[ray]' in a clone, or pip install 'sgps[ray]'"


def require_ray() -> ModuleType:
    """The `ray` module, or a `ConfigError` that says how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ConfigError(f"--executor ray needs Ray, which is not installed here: {INSTALL_HINT}") from None


def connect(address: str | None = None) -> ModuleType:
    """Join the Ray cluster at `address`, or start a local instance (once per process); the `ray` module."""
    ray = require_ray()
    if not ray.is_initialized():
        try:
            ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as error:
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise ConfigError(f"could not connect to {where}: {error}") from None
    return ray


def cluster_cpus(ray: ModuleType) -> int:
    """The CPUs of the cluster Ray is connected to (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


class RaySearchPool:
    """`workers` Ray actors that search batches of problems with a copy of the method's model."""

    def __init__(
        self, workers: int, domain: Domain[Any], example: Any, config: TrainConfig, *, address: str | None = None
    ) -> None:
        """`workers`: actors to start; 0 means one per CPU of the cluster."""
        self.ray = connect(address)
        self.workers = workers or cluster_cpus(self.ray)
        self._actor_class = self.ray.remote(num_cpus=1)(SearchWorker)
        self._actor_arguments = (domain, example, config)
        self.actors = [self._start_actor() for _ in range(self.workers)]
        self.replaced = 0  # actors replaced after a failure, over the pool's life

    def _start_actor(self) -> Any:
        return self._actor_class.remote(*self._actor_arguments)

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
        """Search `levels` on the actors; results in input order, each problem exactly once."""
        ray = self.ray
        shares = deal(levels, self.workers)
        stored = ray.put(weights)

        def submit(share: int) -> Any:
            call = self.actors[share].search.remote(stored, shares[share], budget, epsilon, record_graph, test)
            pending[call] = share
            return call

        pending: dict[Any, int] = {}
        for share in range(len(shares)):
            submit(share)
        answers: list[list[SearchResult] | None] = [None] * len(shares)
        failures = 0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            share = pending.pop(ready[0])
            try:
                answers[share] = ray.get(ready[0])
            except ray.exceptions.RayActorError as error:
                failures += 1
                if failures > MAX_REPLACEMENTS_PER_BATCH:
                    raise RuntimeError(f"Ray actors failed {failures} times in one batch; last: {error}") from error
                lost = f"a search actor died ({type(error).__name__}); its {len(shares[share])} problems"
                warnings.warn(f"{lost} are searched again on a new actor", RuntimeWarning, stacklevel=2)
                self.actors[share] = self._start_actor()
                self.replaced += 1
                submit(share)
        return gather([answer for answer in answers if answer is not None], len(levels))

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []

    def __enter__(self) -> RaySearchPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
