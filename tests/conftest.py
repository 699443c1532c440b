"""Shared test fixtures: where the shared reference data lives, and small helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Tests run in parallel workers (pytest -n 2): one math thread each avoids oversubscribing the cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def shared_dir() -> Path | None:
    """The project's read-only shared folder (paper, specs, reference traces, Boxoban): `$SGPS_SHARED`,
    else ``shared/`` beside the repository; nothing that depends on the machine."""
    candidates = [os.environ.get("SGPS_SHARED"), REPO.parent / "shared"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "reference").is_dir():
            return Path(candidate)
    return None


SHARED = shared_dir()


@pytest.fixture
def shared() -> Path:
    if SHARED is None:
        pytest.skip("the shared folder (../shared with reference/ and data/) is absent; set SGPS_SHARED")
    return SHARED
