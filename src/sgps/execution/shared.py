"""One evaluator for many search processes: requests and answers travel through shared memory.

Each search process runs its searches in lockstep (`search_lockstep`, or in a stream
`search_lockstep_stream`, asking the serving process for each next level) with a
`RemoteEvaluator`: it computes the observations of the states its searches ask about,
writes them into the request array of its channel (a block of shared memory laid out by
a `ChannelLayout`, so no observation is pickled), and tells the serving process how many rows it wrote. The
serving process (`EvaluationServer`) waits for any channel with a request, takes
every request waiting at that moment, evaluates them as one batch, writes each
channel's answers back into its answer array and wakes it. While the evaluator works
on one batch (on a GPU, say), the other processes expand their searches and queue the
next requests, so the evaluator sees batches from many processes at once.

A request never changes the answer of another: an evaluator answers each row from
that row's observation alone (networks in eval mode), so a search finds what it would
find in one in-process lockstep run (up to the evaluator's floating-point behaviour
across batch sizes).

This module does not import torch: the server evaluates with any callable that maps an
observation array [B, C, H, W] to ``(log_policy [B, |A|] or None, heuristic [B] or None)``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import numpy as np

from sgps.domains.base import Domain, channels_first
from sgps.errors import SearchProcessLostError
from sgps.search.evaluators import Evaluation

#: Evaluates a batch of observations [B, C, H, W] (`NetworkEvaluator.evaluate_observations`).
EvaluateObservations = Callable[[np.ndarray], Evaluation]

#: Message kinds on a channel's pipe (search process -> server). In a stream of searches a
#: process also asks for its next level (NEXT, answered with a level's index or None: no more)
#: and sends each search's (index, result) as it ends (FOUND), before RESULTS ends its task.
READY, EVALUATE, RESULTS, FAILED, NEXT, FOUND = "ready", "evaluate", "results", "failed", "next", "found"


class SearchProcessError(RuntimeError):
    """A search raised in a search process (its traceback is the message); the others finished."""


class ServerLostError(RuntimeError):
    """A search process's pipe to the serving process failed: that process is gone (killed outright),
    and nobody will answer the search's requests or read its results."""


@dataclass(frozen=True)
class ChannelLayout:
    """Where a channel's arrays lie: a file mapped by both processes, and its shapes.

    `rows`: observations one request can hold (larger requests are sent in parts).
    """

    path: str
    rows: int
    observation_shape: tuple[int, ...]
    num_actions: int

    @property
    def request_bytes(self) -> int:
        return self.rows * int(np.prod(self.observation_shape)) * 4

    @property
    def answer_bytes(self) -> int:
        return self.rows * (self.num_actions + 1) * 8

    @property
    def size(self) -> int:
        return self.request_bytes + self.answer_bytes

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The request array [rows, C, H, W] float32 and the answer array [rows, |A| + 1] float64
        (log π in the first |A| columns, h in the last), mapped from the file.

        The requests lie channels-last in the file, as the domains lay out observations
        (`sgps.domains.base.one_hot`): writing them is a plain copy, and a CPU evaluator
        takes them as they are (`sgps.models.resnet.network_input`)."""
        channels, height, width = self.observation_shape
        requests = channels_first(np.memmap(self.path, np.float32, "r+", 0, (self.rows, height, width, channels)))
        answers = np.memmap(self.path, np.float64, "r+", self.request_bytes, (self.rows, self.num_actions + 1))
        return requests, answers


def shared_folder(size: int) -> Path:
    """A folder for `size` bytes of shared arrays: /dev/shm when it has room twice over
    (it is memory; container defaults can be as small as 64 MiB), else the temp folder
    (a mapped file there stays in the page cache)."""
    shm = Path("/dev/shm")
    try:
        stats = os.statvfs(shm)
        if stats.f_bavail * stats.f_frsize >= 2 * size:
            return shm
    except OSError:
        pass
    return Path(tempfile.gettempdir())


def create_layouts(count: int, rows: int, observation_shape: Sequence[int], num_actions: int) -> list[ChannelLayout]:
    """`count` channel layouts, their files created (zero-filled) in one `shared_folder`."""
    shape = tuple(int(n) for n in observation_shape)
    size = ChannelLayout("", rows, shape, num_actions).size
    folder = shared_folder(count * size)
    layouts = []
    for _ in range(count):
        handle, path = tempfile.mkstemp(prefix="sgps-evaluation-", dir=folder)
        try:
            os.ftruncate(handle, size)
        finally:
            os.close(handle)
        layouts.append(ChannelLayout(path, rows, shape, num_actions))
    return layouts


def remove_layouts(layouts: Iterable[ChannelLayout]) -> None:
    """Delete the channels' files (the mappings of live processes stay valid until unmapped)."""
    for layout in layouts:
        Path(layout.path).unlink(missing_ok=True)


class RemoteEvaluator:
    """An `Evaluator` for a search process: observes the states here, evaluates them in the server."""

    def __init__(self, domain: Domain[Any], connection: Connection, layout: ChannelLayout) -> None:
        self.domain = domain
        self.connection = connection
        self.rows = layout.rows
        self.requests, self.answers = layout.arrays()

    def __call__(self, states: Sequence[Any]) -> Evaluation:
        log_policy: list[np.ndarray] = []
        heuristic: list[np.ndarray] = []
        for start in range(0, len(states), self.rows):
            part = states[start : start + self.rows]
            count = len(part)
            self.requests[:count] = self.domain.observe(part)
            try:
                self.connection.send((EVALUATE, count))
                has_policy, has_heuristic = self.connection.recv()
            except (EOFError, OSError):  # the serving process closed its end: it is gone
                raise ServerLostError("the evaluation server is gone") from None
            answers = np.array(self.answers[:count])
            if has_policy:
                log_policy.append(answers[:, :-1])
            if has_heuristic:
                heuristic.append(answers[:, -1])
        return (np.concatenate(log_policy) if log_policy else None,
                np.concatenate(heuristic) if heuristic else None)  # fmt: skip


@dataclass
class ServerStatistics:
    """What a server did: evaluator calls, observations evaluated, requests answered."""

    calls: int = 0
    observations: int = 0
    requests: int = 0

    @property
    def mean_batch(self) -> float:
        return self.observations / self.calls if self.calls else 0.0


class EvaluationServer:
    """Answers the requests of search processes, one evaluator call per gathering of requests."""

    def __init__(self, layouts: Sequence[ChannelLayout]) -> None:
        self.arrays = [layout.arrays() for layout in layouts]
        self.statistics = ServerStatistics()

    def serve(
        self,
        evaluate: EvaluateObservations,
        connections: Sequence[Connection],
        busy: Iterable[int],
        *,
        next_level: Callable[[], int | None] | None = None,
        on_found: Callable[[int, Any], None] | None = None,
    ) -> dict[int, Any]:
        """Evaluate with `evaluate` until every channel in `busy` has sent its results.

        `connections[i]` is the pipe of the process that uses channel i (layout i).
        Returns each channel's results (what it sent with `RESULTS`). A channel that
        reports `FAILED` raises `SearchProcessError` with its message, after the others finish; a
        channel whose process is gone raises `SearchProcessLostError` at once. In a stream of
        searches, `next_level()` answers a process's `NEXT` (the index of the level it is to
        search next, or None when none is left; None for all once a process has failed, so that
        the others end with the searches they have) and `on_found(index, result)` is told each
        `FOUND` result as it comes.
        """
        waiting = {connections[index]: index for index in busy}
        results: dict[int, Any] = {}
        failures: list[str] = []
        while waiting:
            requests: list[tuple[int, int]] = []
            for connection in wait(list(waiting)):
                index = waiting[connection]
                try:
                    kind, payload = connection.recv()
                except (EOFError, OSError):
                    raise SearchProcessLostError(index) from None
                if kind == EVALUATE:
                    requests.append((index, payload))
                elif kind == NEXT and next_level is not None:  # after a failure, no more levels:
                    _send(connections, index, None if failures else next_level())  # the others end soon
                elif kind == FOUND and on_found is not None:
                    on_found(*payload)
                else:
                    del waiting[connection]
                    if kind == RESULTS:
                        results[index] = payload
                    else:
                        failures.append(str(payload))
            if requests:
                self._answer(evaluate, connections, requests)
        if failures:
            raise SearchProcessError("a search process failed:\n" + "\n".join(failures))
        return results

    def _answer(
        self, evaluate: EvaluateObservations, connections: Sequence[Connection], requests: Sequence[tuple[int, int]]
    ) -> None:
        if len(requests) == 1:
            index, count = requests[0]
            observations = self.arrays[index][0][:count]
        else:
            observations = np.concatenate([self.arrays[index][0][:count] for index, count in requests])
        log_policy, heuristic = evaluate(np.asarray(observations))
        self.statistics.calls += 1
        self.statistics.observations += len(observations)
        self.statistics.requests += len(requests)
        start = 0
        for index, count in requests:
            answers = self.arrays[index][1]
            end = start + count
            if log_policy is not None:
                answers[:count, :-1] = log_policy[start:end]
            if heuristic is not None:
                answers[:count, -1] = heuristic[start:end]
            start = end
            _send(connections, index, (log_policy is not None, heuristic is not None))


def _send(connections: Sequence[Connection], index: int, message: Any) -> None:
    """Send `message` to the process of channel `index`; a broken pipe means that process is gone."""
    try:
        connections[index].send(message)
    except OSError:
        raise SearchProcessLostError(index) from None
