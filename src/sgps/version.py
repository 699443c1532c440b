"""The installed sgps version, recorded in run directories and checkpoints."""

from __future__ import annotations

import importlib.metadata


def sgps_version() -> str:
    """The installed sgps version ("unknown" when run from a source tree that is not installed)."""
    try:
        return importlib.metadata.version("sgps")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
