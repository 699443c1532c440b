"""Exceptions that carry a message a user can act on.

Every error the command line reports without a traceback derives from `SgpsError`.
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any


class SgpsError(Exception):
    """Base class of the errors reported to users as one line."""


class LevelFormatError(SgpsError):
    """A level file or level line is malformed.

    `path` and `line` locate the problem when known; `str(error)` reads
    ``FILE:LINE: problem``.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(self._render())

    def _render(self) -> str:
        if self.path is None:
            return self.message
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"

    def located(self, path: str | Path, line: int | None) -> LevelFormatError:
        """A copy of this error placed at `path`:`line` (keeps an existing location)."""
        if self.path is not None:
            return self
        return LevelFormatError(self.message, path, line)


class UnknownDomainError(SgpsError):
    """A domain name that is not in the registry."""


class ConfigError(SgpsError):
    """A bad option, parameter or configuration value; the message names the key."""


class CheckpointError(SgpsError):
    """A checkpoint is missing, corrupted, or was saved from another architecture."""


class RunLockedError(SgpsError):
    """A run directory is being trained by another process."""


class SearchProcessLostError(SgpsError):
    """A search process ended without answering (killed by a signal, or by the system for memory)."""

    def __init__(self, index: int | None = None, cause: str = "killed, or out of memory") -> None:
        who = "a search process" if index is None else f"search process {index}"
        super().__init__(f"{who} stopped unexpectedly ({cause}); a run goes on from its last checkpoint "
                         "with --resume")  # fmt: skip


class StopRequested(BaseException):
    """SIGTERM (or another stop signal) reached an sgps command: it stops as Ctrl-C would."""

    def __init__(self, signal_name: str, code: int) -> None:
        super().__init__(signal_name)
        self.signal_name, self.code = signal_name, code


def check_whole_number(name: str, value: Any, low: int, high: int | None = None, *, label: str = "",
                       note: str = "") -> None:  # fmt: skip
    """Check a public function's integer argument where it enters.

    `TypeError` naming `name` unless `value` is an integer (not a bool, a float or a
    string); `ConfigError` outside [low, high], worded "LABEL must be ..., got VALUE"
    (`label` defaults to `name`; `note` is added after the bound).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number, not {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ConfigError(f"{label or name} must be {bound}{note}, got {value}")
