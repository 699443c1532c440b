"""Exceptions that carry a message a user can act on.

Every error the command line reports without a traceback derives from `SgpsError`.
"""

from __future__ import annotations

from pathlib import Path


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
