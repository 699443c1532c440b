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
  (a setup error, which would fail again) ends the run with that error;
- a test's rounds stream instead (`search_stream`): the levels wait in one Ray queue and
  each actor takes the next as soon as one of its searches ends, so none idles while
  levels remain; an actor that dies loses only the levels it had taken and not answered,
  streamed again once the other actors have finished (on its replacement, where one
  can start, and the survivors).

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
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from sgps.domains.base import Domain
from sgps.errors import ConfigError
from sgps.execution.pool import (
    STREAM_POLL_SECONDS,
    SearchWorker,
    StreamOptions,
    deal,
    drawer_parts,
    gather,
    stream_shares,
)
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


def _raise_if_it_could_not_start(error: Exception) -> None:
    """Raise for an actor that failed in its constructor: a new one would fail again (a setup
    error, such as a model the actors cannot build), so it is not a loss to make good."""
    if getattr(error, "actor_init_failed", False):
        raise RuntimeError(f"a Ray search actor could not start: {error}") from error


def _warn_of_dead_actors(dead: int, unanswered: int) -> None:
    """Say, once a stream is over and its dead actors replaced, what they cost: the levels still
    without a result, streamed again (none where a dead actor's last result was already queued)."""
    actors = "1 search actor" if dead == 1 else f"{dead} search actors"
    if unanswered:
        levels = "the 1 level" if unanswered == 1 else f"the {unanswered} levels"
        cost = f"{levels} still without a result {'is' if unanswered == 1 else 'are'} searched again"
    else:
        cost = "every level has its result, so none is searched again"
    warnings.warn(f"{actors} died; {cost}", RuntimeWarning, stacklevel=3)


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
        self.calls = 0  # streams started (`search_stream`), to tell one stream's results from another's
        self.broken = False  # a stream stopped by an error: its actors may still be searching

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
        if self.broken:
            raise RuntimeError("this search pool stopped after an earlier failure; start a new one")
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
                _raise_if_it_could_not_start(error)
                if failures > MAX_REPLACEMENTS_PER_BATCH:
                    raise RuntimeError(f"Ray actors failed {failures} times in one batch; last: {error}") from error
                lost = f"a search actor died ({type(error).__name__}); its {len(shares[share])} problems"
                warnings.warn(f"{lost} are searched again", RuntimeWarning, stacklevel=2)
                submit(share, self._replace(actor))
        return gather([answer for answer in answers if answer is not None], len(levels))

    def search_stream(
        self,
        method: Method,
        levels: Sequence[Any],
        options: StreamOptions,
        on_result: Callable[[int, SearchResult], None],
    ) -> None:
        """Search `levels` with `method`'s weights, `options.concurrency` searches at a time over
        the actors, each taking the next level from one queue as soon as one of its searches ends
        (`SearchWorker.search_stream`, as `SearchPool.search_stream`); `on_result(index, result)`
        is told each result as it arrives, once per level.

        The queues are Ray's (`ray.util.queue`): actors of no CPU on this process's node. An
        actor that dies loses the levels it had taken and not answered: once the other actors
        have finished, it is replaced (where a new one can start, as in `search`) and those
        levels, the ones still without a result, are streamed again. A stream stopped by an
        error leaves the actors searching, so the pool then takes no other call."""
        if self.broken:
            raise RuntimeError("this search pool stopped after an earlier failure; start a new one")
        if options.concurrency < 1:
            raise ValueError(f"at least one search must run at a time, got {options.concurrency}")
        ray = self.ray
        stored, shared_levels = ray.put(method.model_weights()), ray.put(list(levels))
        remaining = set(range(len(levels)))
        failures = 0
        try:
            while remaining:
                dead = self._stream_once(stored, shared_levels, sorted(remaining), options, remaining, on_result)
                if not dead and remaining:
                    raise RuntimeError(f"the Ray search actors ended with {len(remaining)} levels unanswered")
                failures += len(dead)
                if failures > MAX_REPLACEMENTS_PER_BATCH:
                    raise RuntimeError(f"Ray actors failed {failures} times in one stream of searches")
                for actor in dead:  # now that the others have finished and their CPUs are free
                    self._replace(actor)
                if dead:
                    _warn_of_dead_actors(len(dead), len(remaining))
        except BaseException:
            self.broken = True
            raise

    def _stream_once(
        self,
        stored: Any,
        shared_levels: Any,
        indices: list[int],
        options: StreamOptions,
        remaining: set[int],
        on_result: Callable[[int, SearchResult], None],
    ) -> list[Any]:
        """One stream of the levels `indices` over the actors until every actor has finished; each
        result not told before is told and leaves `remaining`. Returns the actors that died."""
        from ray.util.queue import Queue
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        self.calls += 1
        call = self.calls
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        queues: list[Any] = []
        try:
            for _ in range(2):
                queues.append(Queue(actor_options={"num_cpus": 0, "scheduling_strategy": here}))
            tasks, results = queues
            shares = stream_shares(len(self.actors), min(options.concurrency, len(indices)))
            tasks.put_nowait_batch([(call, index) for index in indices] + [(call, None)] * len(shares))
            pending = {}
            for actor, share in zip(self.actors, shares, strict=False):
                share_options = dataclasses.replace(options, concurrency=share)
                pending[actor.search_stream.remote(stored, call, shared_levels, share_options, tasks, results)] = actor
            dead = []
            while pending:
                self._tell(results, call, STREAM_POLL_SECONDS, remaining, on_result)
                ended, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
                for ref in ended:
                    actor = pending.pop(ref)
                    if self._died(ref):
                        dead.append(actor)
            self._tell(results, call, None, remaining, on_result)  # an actor's results are queued before it returns
            return dead
        finally:
            for channel in queues:
                channel.shutdown(force=True)

    def _tell(
        self,
        results: Any,
        call: int,
        wait: float | None,
        remaining: set[int],
        on_result: Callable[[int, SearchResult], None],
    ) -> None:
        """Tell `on_result` the results of stream `call` in the `results` queue not told before
        (after waiting up to `wait` seconds for the first; None: only those there now)."""
        from ray.util.queue import Empty

        try:
            answers = []
            if wait is not None:
                try:
                    answers.append(results.get(timeout=wait))
                except Empty:
                    return
            answers += results.get_nowait_batch(results.qsize())  # only this process takes from it
        except self.ray.exceptions.RayActorError as error:
            raise RuntimeError(f"the queue of a stream of searches on Ray was lost: {error}") from error
        for tag, index, result in answers:
            if tag == call and index in remaining:
                remaining.discard(index)
                on_result(index, result)

    def _died(self, ref: Any) -> bool:
        """Whether the stream call `ref`, which has ended, ended because its actor died; any
        other failure (a search that raised, a queue lost while the actor used it) is raised."""
        exceptions = self.ray.exceptions
        try:
            self.ray.get(ref)
        except exceptions.RayTaskError:  # raised in the call (a lost queue looks like a dead actor there)
            raise
        except exceptions.RayActorError as error:
            _raise_if_it_could_not_start(error)
            return True
        return False

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
