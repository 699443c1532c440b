"""When a training command leaves its run to resume because its time is up (`--session-minutes`).

A long run is carried over several sessions of limited length: a batch job's wall-time on a
cluster, a machine lent for some hours. Stopping it from outside (SIGTERM) loses the batches
since the last checkpoint and may cut a batch or a validation in the middle; a time limit
(`bootstrap.time_limit_minutes`) ends the run instead of pausing it. A `Session` lets the loop
stop on its own at a batch boundary, after a checkpoint, before the session's end: a batch
starts only if the slowest batch this command has trained (its search, update, validation and
checkpoint), and, when it is the last batch of its pass, also the slowest pass end (validation
and budget update), would still be over by the deadline. Before its first batch a command has
no measure, so that batch starts if the deadline has not passed.

The pause changes nothing the run computes: it stops where `max_batches` would have, and
``sgps train --resume`` goes on as from any checkpoint (the same rows and weights as a run
never paused).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from sgps.errors import ConfigError


def check_session_minutes(minutes: float | None, flag: str = "--session-minutes") -> None:
    """Refuse a session length that is not a finite number of minutes above 0."""
    if minutes is None:
        return
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not math.isfinite(minutes) \
            or minutes <= 0:  # fmt: skip
        raise ConfigError(f"{flag} must be a number of minutes above 0, not {minutes!r}")


@dataclass
class Session:
    """The deadline of one training command and the slowest steps it has measured so far.

    `deadline` is a `time.monotonic()` reading; the durations are seconds.
    """

    deadline: float
    slowest_batch: float = 0.0
    slowest_pass_end: float = 0.0

    @classmethod
    def lasting(cls, minutes: float) -> Session:
        """A session that ends `minutes` from now."""
        check_session_minutes(minutes)
        return cls(time.monotonic() + 60.0 * minutes)

    def minutes_left(self) -> float:
        return (self.deadline - time.monotonic()) / 60.0

    def allows_batch(self, last_of_pass: bool) -> bool:
        """Whether the next batch (and its pass end, if it is the last of its pass) fits before the deadline."""
        needed = self.slowest_batch + (self.slowest_pass_end if last_of_pass else 0.0)
        return time.monotonic() + needed <= self.deadline

    def batch_took(self, seconds: float) -> None:
        self.slowest_batch = max(self.slowest_batch, seconds)

    def pass_end_took(self, seconds: float) -> None:
        self.slowest_pass_end = max(self.slowest_pass_end, seconds)
