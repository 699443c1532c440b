"""The smoke comparison (configs/smoke.toml), run once per test session and shared by the test files.

`sgps compare` is resumable, so the first test file to ask runs it and the others find
every run finished (a lock keeps parallel test workers from running it twice at once).
"""

from __future__ import annotations

import fcntl
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from sgps.cli import main
from sgps.experiments.tomlfile import dumps

from conftest import REPO

SMOKE_CONFIG = REPO / "configs" / "smoke.toml"
#: One thread per run: runs compared row for row must use the same thread count.
SMOKE_OPTIONS = ["--threads", "1", "--jobs", "2"]


def smoke_comparison(factory: pytest.TempPathFactory) -> Path:
    """The folder of the smoke comparison, run if this session has not run it yet."""
    out = _smoke_folder(factory)
    assert compare_smoke(factory) == 0
    return out


def compare_smoke(factory: pytest.TempPathFactory, *options: str) -> int:
    """`sgps compare configs/smoke.toml` on the session's smoke folder; its exit status."""
    out = _smoke_folder(factory)
    with open(out.parent / "smoke-comparison.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return main(["compare", str(SMOKE_CONFIG), "--out", str(out), *SMOKE_OPTIONS, *options])


def _smoke_folder(factory: pytest.TempPathFactory) -> Path:
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by the session's workers
    return base / "smoke-comparison"


def smoke_document() -> dict[str, Any]:
    """The smoke config as a dictionary, to derive other configs from."""
    return tomllib.loads(SMOKE_CONFIG.read_text())


def write_config(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(dumps(document))
    return path
