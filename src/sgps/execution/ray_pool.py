"""Searching Bootstrap batches and test rounds on a Ray cluster (`--executor ray`, the `ray` extra).

The local backend (`sgps.execution.pool.SearchPool`) keeps its workers in processes of
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
  again there; when no replacement starts within `REPLACEMENT_SECONDS` (no CPU left),
  the pool goes on with one actor fewer and a surviving actor searches the share. A
  share's results are kept only when its call returns, so every problem appears exactly
  once in the batch's results whatever failed; the searches are deterministic, so the
  re-run gives what the lost one would have. An actor that fails in its constructor
  (a setup error, which would fail again) ends the run with that error.

Without an address `connect` starts a Ray instance on this machine; with one
(`--ray-address auto`, or the head's `HOST:6379` printed by `ray start --head`) it joins
that cluster. The driver keeps the run directory: only search requests and results
travel. Every node needs the same Python environment with `sgps` installed (and any
`--plugin` domain importable), as Ray's own rules for remote functions require.
"""

from __future__ import annotations

import dataclasses
import importlib
import socket
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from sgps.domains.base import Domain
from sgps.errors import ConfigError
from sgps.execution.pool import SearchWorker, deal, drawer_parts, gather
from sgps.search.engine import SearchResult
from sgps.training.bootstrap import Method, ResultDrawer
from sgps.training.config import TrainConfig

EXECUTORS = ("local", "ray")
#: How often one batch may lose an actor before the run gives up (a cluster that keeps failing).
MAX_REPLACEMENTS_PER_BATCH = 8
#: How long a replacement actor may take to start before the pool goes on without it.
REPLACEMENT_SECONDS = 120.0
INSTALL_HINT = "pip install -c constraints.txt -e '.[ray]' in a clone, or pip install 'sgps[ray]'"


def check_executor(executor: str) -> None:
    """A `ConfigError` unless `executor` names a backend of `EXECUTORS`."""
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")


def require_ray() -> ModuleType:
    """The `ray` module, or a `ConfigError` that says how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ConfigError(f"--executor ray needs Ray, which is not installed here: {INSTALL_HINT}") from None


#: Seconds to wait for a Ray cluster's address to answer before refusing it.
PROBE_SECONDS = 5.0


def connect(address: str | None = None) -> ModuleType:
    """Join the Ray cluster at `address`, or start a local instance (once per process); the `ray` module."""
    ray = require_ray()
    _check_reachable(address)  # also in a process already joined to Ray: a bad address is an error either way
    if not ray.is_initialized():
        try:
            ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as error:
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise ConfigError(f"could not connect to {where}: {error}") from None
    return ray


def _check_reachable(address: str | None, timeout: float = PROBE_SECONDS) -> None:
    """Refuse a HOST:PORT (or ray://HOST:PORT) that nothing answers at, before Ray retries it for minutes.

    `ray.init` keeps retrying an address where no cluster listens; one TCP connection
    attempt tells at once whether anything is there. Other addresses ("auto", none) are
    left to Ray.
    """
    if not address or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--ray-address {address!r}: not auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        raise ConfigError(f"could not connect to the Ray cluster at {address}: nothing answers there "
                          f"({error.strerror or error}); start it with `ray start --head` or fix the address") from None


def cluster_cpus(ray: ModuleType) -> int:
    """The CPUs of the cluster Ray is connected to (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


class RaySearchPool:
    """`workers` Ray actors that search batches of problems with a copy of the method's model."""

    def __init__(
        self, workers: int, domain: Domain[Any], example: Any, config: TrainConfig, *, address: str | None = None
    ) -> None:
        """`workers`: actors to start; 0 means one per CPU of the cluster.

        The actors search on their node's CPU whatever `run.device` says: Ray gives them
        no GPU (the driver keeps the model it trains where the run asked).
        """
        self.ray = connect(address)
        cpu_config = dataclasses.replace(config, run=dataclasses.replace(config.run, device="cpu"))
        self._actor_class = self.ray.remote(num_cpus=1)(SearchWorker)
        self._actor_arguments = (domain, example, cpu_config)
        count = workers or cluster_cpus(self.ray)
        self.actors = [self._actor_class.remote(*self._actor_arguments) for _ in range(count)]
        self.replaced = 0  # actors replaced after a failure, over the pool's life

    def search(
        self,
        method: Method,
        levels: Sequence[Any],
        *,
        budget: int,
        epsilon: float,
        record_graph: bool,
        batch_size: int = 1,
        test: bool = False,
        drawer: ResultDrawer | None = None,
        interim_budgets: tuple[int, ...] = (),
    ) -> list[SearchResult]:
        """Search `levels` on the actors with `method`'s weights; results in input order, each problem exactly once."""
        ray = self.ray
        shares = deal(levels, len(self.actors))
        parts = drawer_parts(drawer, len(shares), len(self.actors))
        stored = ray.put(method.model_weights())
        pending: dict[Any, tuple[int, Any]] = {}  # call -> (share, actor)

        def submit(share: int, actor: Any) -> None:
            call = actor.search.remote(stored, shares[share], budget, epsilon, record_graph, batch_size, test,
                                       parts[share], interim_budgets)
            pending[call] = (share, actor)

        for share, actor in enumerate(self.actors[: len(shares)]):
            submit(share, actor)
        answers: list[list[SearchResult] | None] = [None] * len(shares)
        failures = 0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            share, actor = pending.pop(ready[0])
            try:
                answers[share] = ray.get(ready[0])
            except ray.exceptions.RayActorError as error:
                failures += 1
                if getattr(error, "actor_init_failed", False):  # it would fail again: a setup error, not a loss
                    raise RuntimeError(f"a Ray search actor could not start: {error}") from error
                if failures > MAX_REPLACEMENTS_PER_BATCH:
                    raise RuntimeError(f"Ray actors failed {failures} times in one batch; last: {error}") from error
                lost = f"a search actor died ({type(error).__name__}); its {len(shares[share])} problems"
                warnings.warn(f"{lost} are searched again", RuntimeWarning, stacklevel=2)
                submit(share, self._replace(actor))
        return gather([answer for answer in answers if answer is not None], len(levels))

    def _replace(self, dead: Any) -> Any:
        """A new actor in the place of `dead`; where none can start (its node is gone and no
        CPU is free), `dead` leaves the pool and a surviving actor takes its work."""
        self.ray.kill(dead)
        index = next(i for i, actor in enumerate(self.actors) if actor is dead)
        replacement = self._actor_class.remote(*self._actor_arguments)
        started, _ = self.ray.wait([replacement.ready.remote()], timeout=REPLACEMENT_SECONDS)
        if started:
            self.ray.get(started[0])  # raises if the new actor failed in its constructor
            self.actors[index] = replacement
            self.replaced += 1
            return replacement
        self.ray.kill(replacement)
        del self.actors[index]
        if not self.actors:
            raise RuntimeError(f"no Ray search actor is left, and none could start in {REPLACEMENT_SECONDS} s")
        return self.actors[index % len(self.actors)]

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []

    def __enter__(self) -> RaySearchPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
