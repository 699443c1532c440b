"""Searching a Bootstrap batch with a pool of worker processes.

Two kinds of pool, chosen by `run.evaluator` (`sgps.execution.placement.search_pool`):

- `SharedEvaluatorPool` ("shared"): the workers only search; every evaluation request
  goes through shared memory to the method's own evaluator in the training process
  (`sgps.execution.shared`), which batches the requests of all workers. The model stays
  where it is (on the GPU, say) and no weights travel.
- `SearchPool` ("per-process"): each worker holds its own copy of the model on the CPU.

In a `SearchPool` each worker runs torch with one thread and searches its share of the
batch in lockstep. Before every batch the current weights go to every worker (the model
changes after every batch). Measured on a
2-core machine (`benchmarks/parallel.py`, docs/training.md), two workers search a
batch 1.0-1.3x faster than lockstep in one process with two torch threads, and
1.3-2.3x faster than with one thread.

Workers start with the "spawn" method: a fresh interpreter per worker, so no torch
or OpenMP state is inherited from the parent. A domain registered by a plugin must
therefore be importable by the workers (its `Domain` object is pickled by reference).
Each search follows its own order (exact, or buffered with an evaluation batch) whatever
the split, so the results are those of one in-process lockstep run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import queue
import signal
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

import torch

from sgps.domains.base import Domain
from sgps.errors import SearchProcessLostError
from sgps.execution.shared import (
    FAILED,
    FOUND,
    NEXT,
    READY,
    RESULTS,
    ChannelLayout,
    EvaluationServer,
    RemoteEvaluator,
    SearchProcessError,
    ServerLostError,
    create_layouts,
    remove_layouts,
)
from sgps.processes import end_with_parent, leave_quietly, parent_sentinel
from sgps.search.costs import Algorithm
from sgps.search.drivers import search_lockstep, search_lockstep_stream
from sgps.search.engine import SearchResult
from sgps.training.bootstrap import Method, ResultDrawer
from sgps.training.config import TrainConfig
from sgps.training.setup import build_method, freeze_setup

#: Rows of one evaluation request through shared memory at most (larger ones go in parts).
MAX_REQUEST_ROWS = 2048
#: Seconds a shared-evaluator worker may take to start (spawn, imports) and to stop.
STARTUP_SECONDS = 120
CLOSE_SECONDS = 10
#: How long a search process whose link to the training process broke waits to see that process end.
PARENT_EXIT_SECONDS = 1.0
#: How often `SearchPool.search_stream` (and `RaySearchPool`'s) looks at its workers while no result
#: arrives (seconds), and how long the former waits for results still on their way once every worker
#: has returned.
STREAM_POLL_SECONDS = 0.5
STREAM_DRAIN_SECONDS = 30.0
#: What multiprocessing's resource tracker is started with (`start_resource_tracker`): its warnings off.
TRACKER_WARNINGS = "ignore::UserWarning:multiprocessing.resource_tracker"


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker, if this process has none yet, so that it cleans up after
    a stopped or killed command without a word.

    The tracker removes what a killed command's processes leave behind (the semaphores of a
    process pool in /dev/shm). Started as multiprocessing starts it, it ignores SIGINT and
    SIGTERM but dies of the SIGHUP a closed terminal sends the whole process group; the pool's
    clean-up then starts another, which prints a warning and a `KeyError` traceback per
    semaphore. And after a SIGKILL it warns, in two lines, of the "leaked" semaphores it removes.
    So it is started here with SIGHUP blocked (the mask is inherited across exec, and the tracker
    never unblocks it) and with its own warnings ignored (`PYTHONWARNINGS`, set for it alone).
    """
    before = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = TRACKER_WARNINGS if not before else f"{before},{TRACKER_WARNINGS}"
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        if before is None:
            del os.environ["PYTHONWARNINGS"]
        else:
            os.environ["PYTHONWARNINGS"] = before


def guard_search_process() -> None:
    """Set up a search process: Ctrl-C is the training process's to handle, and the process ends,
    without a word, with its parent.

    A Ctrl-C in a terminal reaches every process of the group; the workers leave it to the
    training process, which stops them (no worker tracebacks). A training process killed
    outright (SIGKILL, the out-of-memory killer) cannot stop them, so a thread of each worker
    waits on the sentinel multiprocessing gives a child (a pipe that only the parent holds
    open) and ends the worker as soon as the parent is gone, even one that was gone before the
    worker got here (`leave_quietly`); the multiprocessing resource tracker then removes what
    they shared.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_with_parent()


def request_rows(searches: int, evaluation_batch: int, num_actions: int) -> int:
    """Rows a worker's lockstep round over `searches` searches can ask for at most (capped)."""
    return max(num_actions, min(MAX_REQUEST_ROWS, searches * (evaluation_batch + num_actions - 1)))


class SearchWorker:
    """One worker's copy of the method: searches shares of a batch with the weights it is sent.

    Used in each process of `SearchPool` and by each actor of `sgps.execution.ray_pool`.
    """

    def __init__(self, domain: Domain[Any], example: Any, config: TrainConfig) -> None:
        torch.set_num_threads(1)
        self.domain = domain
        self.method = build_method(domain, example, config)
        freeze_setup()  # the worker's process lives for the pool's batches

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
        batch_size: int = 1,
        test: bool = False,
        drawer: ResultDrawer | None = None,
        interim_budgets: tuple[int, ...] = (),
    ) -> list[SearchResult]:
        """Search `levels` in lockstep; `test`: with the method's test evaluator (π^SG's test α);
        `drawer`: applied to the results (the share's part of the batch's drawer); `interim_budgets`:
        as in `search_lockstep`."""
        self.method.load_model_weights(weights)
        evaluator = self.method.test_evaluator() if test else self.method.evaluator()
        results = search_lockstep(self.domain, levels, self.method.algorithm, evaluator, budget=budget,
                                  epsilon=epsilon, batch_size=batch_size, record_graph=record_graph,
                                  interim_budgets=interim_budgets)  # fmt: skip
        return results if drawer is None else drawer(results)

    def search_stream(self, weights: dict[str, torch.Tensor], call: int, levels: Sequence[Any], options: StreamOptions,
                      tasks: Any, results: Any) -> int:  # fmt: skip
        """Search the levels whose indices `tasks` hands out for `call`, `options.concurrency` at a
        time, taking the next as soon as one finishes, until the call's end mark; each result goes
        to `results` as (call, index, result) when its search finishes. Returns how many it searched."""
        self.method.load_model_weights(weights)
        evaluator = self.method.test_evaluator() if options.test else self.method.evaluator()

        def taken() -> Iterator[tuple[int, Any]]:
            while True:
                tag, index = tasks.get()
                if tag != call:  # left by an earlier call that stopped before its end
                    continue
                if index is None:
                    return
                yield index, levels[index]

        return search_lockstep_stream(self.domain, taken(), self.method.algorithm, evaluator,
                                      concurrency=options.concurrency,
                                      on_result=lambda index, result: results.put((call, index, result)),
                                      budget=options.budget, epsilon=options.epsilon, batch_size=options.batch_size,
                                      interim_budgets=options.interim_budgets)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class StreamOptions:
    """How the searches of a pool's `search_stream` run: their budget, ε, evaluation batch, interim
    budgets, test or training evaluator, and how many run at a time (over all the pool's
    processes; each process is sent its share)."""

    budget: int
    epsilon: float
    batch_size: int
    interim_budgets: tuple[int, ...]
    test: bool
    concurrency: int


def stream_shares(workers: int, concurrency: int) -> list[int]:
    """The searches at a time of each worker a stream uses: `concurrency` split as evenly as it
    goes over at most `workers` of them (never more trees at once than `concurrency`)."""
    used = min(workers, concurrency)
    return [concurrency // used + (i < concurrency % used) for i in range(used)]


def deal(levels: Sequence[Any], workers: int) -> list[list[Any]]:
    """`levels` dealt round-robin into at most `workers` non-empty shares (share i: levels i, i + n, ...)."""
    shares = [list(levels[i::workers]) for i in range(workers)]
    return [share for share in shares if share]


def drawer_parts(drawer: ResultDrawer | None, shares: int, workers: int) -> list[ResultDrawer | None]:
    """The part of `drawer` for each of `deal`'s `shares` shares over `workers` (None: no drawer)."""
    return [None if drawer is None else drawer.part(index, workers) for index in range(shares)]


def gather(answers: Sequence[Sequence[SearchResult]], count: int) -> list[SearchResult]:
    """The results of `deal`'s shares back in the order of the `count` levels."""
    results: list[SearchResult] = [None] * count  # type: ignore[list-item]
    for index, answer in enumerate(answers):
        results[index :: len(answers)] = answer
    return results


_worker: SearchWorker | None = None
_stream_queues: tuple[Any, Any] | None = None  # (tasks, results) of `SearchPool.search_stream`


def _start_worker(domain: Domain[Any], example: Any, config: TrainConfig, tasks: Any, results: Any) -> None:
    global _worker, _stream_queues
    guard_search_process()
    _worker = SearchWorker(domain, example, config)
    _stream_queues = (tasks, results)


def _search_share(
    weights: SharedWeights, levels: Sequence[Any], budget: int, epsilon: float, record_graph: bool,
    batch_size: int, test: bool, drawer: ResultDrawer | None, interim_budgets: tuple[int, ...],
) -> list[SearchResult]:  # fmt: skip
    assert _worker is not None, "the worker process was not initialised"
    return _worker.search(weights.load(), levels, budget, epsilon, record_graph, batch_size, test, drawer,
                          interim_budgets)  # fmt: skip


def _search_stream(weights: SharedWeights, call: int, levels: Sequence[Any], options: StreamOptions) -> int:
    """A `SearchPool.search_stream` task in a worker process: search levels from the pool's task queue."""
    assert _worker is not None and _stream_queues is not None, "the worker process was not initialised"
    return _worker.search_stream(weights.load(), call, levels, options, *_stream_queues)


class SharedWeights:
    """A model's weights on their way to one share of a `SearchPool` batch, unpickled by the
    worker's `_search_share` rather than by the executor's queue.

    The tensors travel as shared memory whose file descriptors the training process hands
    over while the worker unpickles them (torch's ``file_descriptor`` strategy, through
    multiprocessing's resource sharer; each handed over once, so one instance per share).
    A training process killed meanwhile used to leave a `BrokenPipeError`, `ConnectionResetError`
    or `EOFError` traceback from the worker, raised inside `concurrent.futures` before any code of
    sgps ran; unpickled here, the worker sees that its parent is gone and ends without a word.
    """

    def __init__(self, weights: dict[str, torch.Tensor]) -> None:
        self.pickled = bytes(ForkingPickler.dumps(weights))

    def load(self) -> dict[str, torch.Tensor]:
        """The weights (in a search process)."""
        try:
            return ForkingPickler.loads(self.pickled)
        except (OSError, EOFError):  # the resource sharer did not answer: is the training process gone?
            if wait([parent_sentinel()], timeout=PARENT_EXIT_SECONDS):
                leave_quietly()
            raise


_sharer_quiet = False  # whether `_quiet_resource_sharer` has filtered sys.excepthook in this process


def _quiet_resource_sharer() -> None:
    """Drop the errors of multiprocessing's resource-sharer thread once the workers are stopped.

    The weights reach a worker as shared memory whose file descriptors a thread of this
    process hands over; a worker stopped in the middle resets that connection, and the
    thread would print a traceback (through `sys.excepthook`) after the command's one
    line. Every other error is printed as before. The filter is set once per process.
    """
    global _sharer_quiet
    if _sharer_quiet:
        return
    _sharer_quiet = True
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, trace: types.TracebackType | None) -> None:
        frames = traceback.extract_tb(trace)
        from_sharer = bool(frames) and frames[0].filename.endswith("resource_sharer.py")
        if not (from_sharer and isinstance(error, OSError | EOFError)):
            previous(kind, error, trace)

    sys.excepthook = hook


class SearchPool:
    """`workers` processes that search batches of problems with a copy of the method's model."""

    def __init__(self, workers: int, domain: Domain[Any], example: Any, config: TrainConfig) -> None:
        if workers < 2:
            raise ValueError("a search pool needs at least 2 workers")
        start_resource_tracker()  # before the executor's semaphores, which it removes if this process is killed
        context = multiprocessing.get_context("spawn")
        self.workers = workers
        self.tasks = context.Queue()  # (call, level index) for `search_stream`, then (call, None) per task
        self.results = context.Queue()  # (call, level index, result) from `search_stream`'s workers
        self.calls = 0
        self.broken = False  # set when a stream stopped before its end (`search_stream`)
        self.closed = False
        on_cpu = dataclasses.replace(config, run=dataclasses.replace(config.run, device="cpu"))
        self.executor = ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=_start_worker,
            initargs=(domain, example, on_cpu, self.tasks, self.results),
        )

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
        """Search `levels` (dealt round-robin to the workers) with `method`'s weights; results in input order."""
        if self.broken:
            raise RuntimeError("this search pool stopped after an earlier failure; start a new one")
        shares = deal(levels, self.workers)
        weights = method.model_weights()
        parts = drawer_parts(drawer, len(shares), self.workers)
        try:
            futures = [self.executor.submit(_search_share, SharedWeights(weights), share, budget, epsilon,
                                            record_graph, batch_size, test, part, interim_budgets)
                       for share, part in zip(shares, parts, strict=True)]  # fmt: skip
            return gather([future.result() for future in futures], len(levels))
        except BrokenProcessPool:
            raise SearchProcessLostError(cause="killed, out of memory, or it failed to start: see above") from None

    def search_stream(
        self,
        method: Method,
        levels: Sequence[Any],
        options: StreamOptions,
        on_result: Callable[[int, SearchResult], None],
    ) -> None:
        """Search `levels` with `method`'s weights, `options.concurrency` searches at a time over
        all the workers (each running its share), each worker taking the next level as soon as one
        of its searches finishes; `on_result(index, result)` is told each result as it arrives
        (in the order the searches finish).

        Unlike `search`, whose shares are dealt before any search starts, no worker idles while
        another has levels left, and no worker's lockstep thins out while levels remain: a test
        whose searches end at very different expansions (the solved ones early, the unsolved at
        the last round's budget) keeps every worker busy. Each search's order is its own, so the
        results are those of `search` (up to the batches' float rounding, docs/training.md).
        """
        if self.broken:
            raise RuntimeError("this search pool stopped after an earlier failure; start a new one")
        if options.concurrency < 1:
            raise ValueError(f"at least one search must run at a time, got {options.concurrency}")
        self.calls += 1
        call = self.calls
        shares = stream_shares(self.workers, options.concurrency)
        for index in range(len(levels)):
            self.tasks.put((call, index))
        for _ in shares:
            self.tasks.put((call, None))
        weights = method.model_weights()
        try:
            futures = [self.executor.submit(_search_stream, SharedWeights(weights), call, list(levels),
                                            dataclasses.replace(options, concurrency=share))
                       for share in shares]  # fmt: skip
            self._receive(call, futures, len(levels), on_result)
        except BrokenProcessPool:
            self._break()
            raise SearchProcessLostError(cause="killed, out of memory, or it failed to start: see above") from None
        except BaseException:  # a worker may still be searching this call: its tasks and results would
            self._break()  # mix with the next call's, so the pool takes no other
            raise

    def _receive(
        self, call: int, futures: Sequence[Future[int]], count: int, on_result: Callable[[int, SearchResult], None]
    ) -> None:
        """Tell `on_result` the `count` results of stream `call` as they arrive; raise a worker's error."""
        received = 0
        quiet_since = None
        while received < count:
            try:
                tag, index, result = self.results.get(timeout=STREAM_POLL_SECONDS)
            except queue.Empty:
                for future in futures:
                    if future.done():
                        future.result()  # a worker's error, raised here
                if all(future.done() for future in futures):  # results may still be on their way
                    quiet_since = quiet_since or time.monotonic()
                    if time.monotonic() - quiet_since > STREAM_DRAIN_SECONDS:
                        raise SearchProcessLostError(cause=f"the searches ended with {received} of {count} "
                                                           "results sent") from None  # fmt: skip
                continue
            if tag == call:
                on_result(index, result)
                received += 1
        for future in futures:
            future.result()

    def _break(self) -> None:
        """Stop the workers at once and refuse further batches (after a stream that did not finish)."""
        self.broken = True
        self.close(at_once=True)

    def close(self, *, at_once: bool = False) -> None:
        """Stop the workers: after their current share, or `at_once` (an interrupt, an error); once."""
        if self.closed:  # e.g. by a stream that failed, then by the `with` block around it
            return
        self.closed = True
        if at_once:  # the executor only waits; its processes are stopped here
            _quiet_resource_sharer()
            for process in list(getattr(self.executor, "_processes", {}).values()):
                with contextlib.suppress(OSError):
                    process.terminate()
        self.executor.shutdown(wait=not at_once, cancel_futures=True)
        for channel in (self.tasks, self.results):  # unread items must not hold this process at its exit
            channel.cancel_join_thread()
            channel.close()

    def __enter__(self) -> SearchPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(at_once=exc_type is not None)


def _search_process(domain: Domain[Any], algorithm: Algorithm, connection: Connection, layout: ChannelLayout) -> None:
    """A `SharedEvaluatorPool` worker: map its channel (and remove its file: the training process
    mapped it before starting the worker), say so, then search each share or stream it is sent.

    The channel's file is removed before the parent watch starts, so that it is gone even when
    the training process was killed while this worker started. The pipe fails only when the
    training process is gone (killed outright: it closes the pipes itself only after stopping
    its workers); the worker then ends without a word, as its parent watch would."""
    evaluator = RemoteEvaluator(domain, connection, layout)
    Path(layout.path).unlink(missing_ok=True)
    guard_search_process()
    freeze_setup()
    try:
        connection.send((READY, None))
        while (task := connection.recv()) is not None:
            connection.send(_search_task(domain, algorithm, evaluator, task))
    except (ServerLostError, EOFError, OSError):
        leave_quietly()


def _search_task(domain: Domain[Any], algorithm: Algorithm, evaluator: RemoteEvaluator, task: Any) -> tuple[str, Any]:
    """The message that ends one task: a share's results (a stream's: how many it searched), or
    the traceback of the search that raised."""
    levels, options, drawer = task
    try:
        if isinstance(options, StreamOptions):
            return RESULTS, _stream_share(domain, algorithm, evaluator, levels, options)
        results = search_lockstep(domain, levels, algorithm, evaluator, **options)
        return RESULTS, results if drawer is None else drawer(results)
    except ServerLostError:
        raise
    except Exception:
        return FAILED, traceback.format_exc()


def _stream_share(
    domain: Domain[Any], algorithm: Algorithm, evaluator: RemoteEvaluator, levels: Sequence[Any], options: StreamOptions
) -> int:
    """A worker's part of `SharedEvaluatorPool.search_stream`: ask the server for a level whenever
    a search slot is free (`NEXT`), send each result as its search ends (`FOUND`)."""
    connection = evaluator.connection

    def exchange(message: tuple[str, Any], answered: bool) -> Any:
        try:
            connection.send(message)
            return connection.recv() if answered else None
        except (EOFError, OSError):  # the serving process closed its end: it is gone
            raise ServerLostError("the evaluation server is gone") from None

    def taken() -> Iterator[tuple[int, Any]]:
        while (index := exchange((NEXT, None), answered=True)) is not None:
            yield index, levels[index]

    return search_lockstep_stream(domain, taken(), algorithm, evaluator, concurrency=options.concurrency,
                                  on_result=lambda index, result: exchange((FOUND, (index, result)), answered=False),
                                  budget=options.budget, epsilon=options.epsilon, batch_size=options.batch_size,
                                  interim_budgets=options.interim_budgets)  # fmt: skip


class SharedEvaluatorPool:
    """`workers` search processes whose requests the method's own evaluator answers, in batches.

    The workers hold no model: they expand their searches (in lockstep over their share)
    and compute observations; the training process evaluates the requests of all
    workers together (`sgps.execution.shared.EvaluationServer`) with the method's current
    model, wherever it lives. `rows`: the largest request sent in one piece (`request_rows`).

    The channels' files are deleted as soon as both processes have mapped them (by each
    worker once it has mapped its own, and by the training process once every worker has
    started), so nothing is left on disk however the pool ends, the training process killed
    while its workers start included. A search that raises in a worker is
    reported once the others finish (their searches in a batch; in a stream, the ones they
    have, since no other level is handed out), and the pool stays usable; anything else that stops
    a batch (the evaluator raising, a worker dying, an interrupt) stops the workers at
    once, and the pool refuses further batches.
    """

    def __init__(self, workers: int, domain: Domain[Any], example: Any, algorithm: Algorithm, rows: int) -> None:
        if workers < 2:
            raise ValueError("a search pool needs at least 2 workers")
        start_resource_tracker()  # every spawned process is handed the tracker; start it as it should run
        context = multiprocessing.get_context("spawn")
        self.workers = workers
        self.broken = False
        self.layouts = create_layouts(workers, rows, domain.observation_shape(example), domain.num_actions)
        self.processes: list[Any] = []
        self.connections: list[Connection] = []
        try:
            self.server = EvaluationServer(self.layouts)
            for layout in self.layouts:
                parent, child = context.Pipe()
                process = context.Process(target=_search_process, args=(domain, algorithm, child, layout),
                                          daemon=True)  # fmt: skip
                process.start()
                child.close()
                self.processes.append(process)
                self.connections.append(parent)
            for index, connection in enumerate(self.connections):
                self._await_start(index, connection)
        except BaseException:
            self._stop()
            raise
        finally:
            remove_layouts(self.layouts)

    def _await_start(self, index: int, connection: Connection) -> None:
        failure = f"search process {index} did not start"
        if not connection.poll(STARTUP_SECONDS):
            raise RuntimeError(f"{failure} within {STARTUP_SECONDS} s")
        try:
            kind, _ = connection.recv()
        except (EOFError, OSError):
            self.processes[index].join(timeout=5)
            code = self.processes[index].exitcode
            raise RuntimeError(f"{failure} (exit code {code}); its error is printed above") from None
        if kind != READY:
            raise RuntimeError(f"{failure}: it sent {kind!r}")

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
        """Search `levels` (dealt round-robin to the workers) with `method`'s evaluator; results in input order."""
        if self.broken:
            raise RuntimeError("this search pool stopped after an earlier failure; start a new one")
        shares = deal(levels, self.workers)
        options = {"budget": budget, "epsilon": epsilon, "batch_size": batch_size, "record_graph": record_graph,
                   "interim_budgets": interim_budgets}  # fmt: skip
        evaluator = method.test_evaluator() if test else method.evaluator()
        parts = drawer_parts(drawer, len(shares), self.workers)
        try:
            for index, (share, part) in enumerate(zip(shares, parts, strict=False)):
                self._send_task(index, (share, options, part))
            answers = self.server.serve(evaluator.evaluate_observations, self.connections, range(len(shares)))
        except SearchProcessError:
            raise
        except BaseException:
            self.broken = True
            self._stop()
            raise
        return gather([answers[index] for index in range(len(shares))], len(levels))

    def search_stream(
        self,
        method: Method,
        levels: Sequence[Any],
        options: StreamOptions,
        on_result: Callable[[int, SearchResult], None],
    ) -> None:
        """Search `levels` with `method`'s evaluator (its test evaluator with `options.test`),
        `options.concurrency` searches at a time over the workers, each asking this process for
        the next level as soon as one of its searches ends; `on_result(index, result)` is told
        each result as it arrives (the order the searches finish). As `SearchPool.search_stream`,
        with the levels handed out here rather than from a queue."""
        if self.broken:
            raise RuntimeError("this search pool stopped after an earlier failure; start a new one")
        if options.concurrency < 1:
            raise ValueError(f"at least one search must run at a time, got {options.concurrency}")
        evaluator = method.test_evaluator() if options.test else method.evaluator()
        shares = stream_shares(self.workers, options.concurrency)
        order = iter(range(len(levels)))
        try:
            for index, share in enumerate(shares):
                self._send_task(index, (list(levels), dataclasses.replace(options, concurrency=share), None))
            self.server.serve(evaluator.evaluate_observations, self.connections, range(len(shares)),
                              next_level=lambda: next(order, None), on_found=on_result)  # fmt: skip
        except SearchProcessError:
            raise
        except BaseException:
            self.broken = True
            self._stop()
            raise

    def _send_task(self, index: int, task: tuple[Sequence[Any], Any, Any]) -> None:
        """Send worker `index` a task: (levels, search options or `StreamOptions`, drawer or None)."""
        try:
            self.connections[index].send(task)
        except OSError:  # a broken pipe: the process is gone
            raise SearchProcessLostError(index) from None

    def _stop(self) -> None:
        """Stop every worker now (they may be waiting for answers that will not come)."""
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join()

    def close(self) -> None:
        if not self.broken:
            for connection in self.connections:
                with contextlib.suppress(OSError):  # the worker is gone already
                    connection.send(None)
            deadline = time.monotonic() + CLOSE_SECONDS
            for process in self.processes:
                process.join(timeout=max(0.0, deadline - time.monotonic()))
        self._stop()
        for connection in self.connections:
            connection.close()

    def __enter__(self) -> SharedEvaluatorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
