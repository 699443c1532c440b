"""When a training command leaves its run to resume because its time is up (`--session-minutes`).

A long run is carried over several sessions of limited length: a batch job's wall-time on a
cluster, a machine lent for some hours. Stopping it from outside (SIGTERM) loses the batches
since the last checkpoint and may cut a batch or a validation in the middle; a time limit
(`bootstrap.time_limit_minutes`) ends the run as a guard's cut instead of pausing it. A
`Session` lets the loop stop on its own at a step boundary, after a checkpoint, before the
session's end.

What a step will take is predicted from what the run's recent steps took (`StepTimes`, kept in
the run's checkpoint, so a resumed command knows them too): a batch from the slowest of the
last `RECENT_BATCHES` batches (a stall excepted, see `StepTimes.recent_batch`), a pass end
(validation and budget update) from the last one (before the first, from its validation's
batches taken as training batches), each per unit of the budget it searched with, so that a
budget doubled at a pass end doubles the prediction; and the checkpoint written after the step.
A new run's first batch, with nothing measured yet, starts if the deadline has not passed.

The pause changes nothing the run computes: it stops where `max_batches` would have, and
``sgps train --resume`` goes on as from any checkpoint (the same rows and weights as a run
never paused).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sgps.errors import ConfigError

#: How many of a run's latest batches the prediction of the next one looks at.
RECENT_BATCHES = 8

#: A recent batch slower than this many times the second slowest is taken for a stall (the
#: process stopped, the machine shared for a while) and counted as this many times the second
#: slowest, so that one stall does not shorten the run's next `RECENT_BATCHES` sessions.
STALL_FACTOR = 2.0


def check_session_minutes(minutes: float | None, flag: str = "--session-minutes") -> None:
    """Refuse a session length that is not a finite number of minutes above 0."""
    if minutes is None:
        return
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not math.isfinite(minutes) \
            or minutes <= 0:  # fmt: skip
        raise ConfigError(f"{flag} must be a number of minutes above 0, not {minutes!r}")


@dataclass
class StepTimes:
    """What a run's recent steps took: seconds per unit of budget of its latest batches and of its
    last pass end, and the seconds of its last checkpoint."""

    batches: list[float] = field(default_factory=list)  # the latest `RECENT_BATCHES`, oldest first
    pass_end: float = 0.0
    checkpoint: float = 0.0

    def batch_took(self, seconds: float, budget: int) -> None:
        self.batches = [*self.batches, seconds / max(budget, 1)][-RECENT_BATCHES:]

    def pass_end_took(self, seconds: float, budget: int) -> None:
        self.pass_end = seconds / max(budget, 1)

    def recent_batch(self) -> float:
        """Seconds per unit of budget a batch is expected to take: the slowest recent batch, or,
        where it took over `STALL_FACTOR` times the second slowest, that many times the second.

        The slowest is the safe guess while batches vary as searches succeed or fail; a single
        batch far slower than all others is not the run's pace but a pause from outside (a
        SIGSTOP, a suspended machine, another job), and would otherwise make the run stop early
        in each session until it is no longer recent.
        """
        if len(self.batches) < 3:  # too few to tell a stall from the run's pace
            return max(self.batches, default=0.0)
        second_slowest, slowest = sorted(self.batches)[-2:]
        return min(slowest, STALL_FACTOR * second_slowest)

    def batch_needs(self, budget: int) -> float:
        """Seconds the next batch, at `budget`, and its checkpoint are expected to take."""
        return self.recent_batch() * budget + self.checkpoint

    def pass_end_needs(self, budget: int, validation_batches: int) -> float:
        """Seconds the next pass end, validating at `budget`, and its checkpoint are expected to take.

        Before any pass end is measured, its validation is taken for `validation_batches` batches
        like a recent training batch (`recent_batch`; searches and an update: an overestimate), so
        that a run whose passes outlast a session does not start its first validation blind.
        """
        per_budget = self.pass_end or validation_batches * self.recent_batch()
        return per_budget * budget + self.checkpoint

    def as_dict(self) -> dict[str, Any]:
        return {"batches": list(self.batches), "pass_end": self.pass_end, "checkpoint": self.checkpoint}

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> StepTimes:
        """The times a checkpoint holds; a `ValueError` unless they are finite seconds of 0 or more."""
        batches = [float(value) for value in saved["batches"]]
        times = cls(batches[-RECENT_BATCHES:], float(saved["pass_end"]), float(saved["checkpoint"]))
        if not all(math.isfinite(value) and value >= 0 for value in (*times.batches, times.pass_end,
                                                                      times.checkpoint)):  # fmt: skip
            raise ValueError("step times that are not finite seconds of 0 or more")
        return times


@dataclass(frozen=True)
class Session:
    """The deadline of one training command, a `time.monotonic()` reading."""

    deadline: float

    @classmethod
    def lasting(cls, minutes: float) -> Session:
        """A session that ends `minutes` from now."""
        check_session_minutes(minutes)
        return cls(time.monotonic() + 60.0 * minutes)

    def minutes_left(self) -> float:
        return (self.deadline - time.monotonic()) / 60.0

    def allows(self, seconds: float) -> bool:
        """Whether a step of `seconds` started now ends by the deadline."""
        return time.monotonic() + seconds <= self.deadline
