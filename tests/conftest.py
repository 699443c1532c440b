"""Shared test fixtures: where the shared reference data lives, and small helpers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

# Tests run in parallel workers (pytest -n 2): one math thread each avoids oversubscribing the cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")

#: Test files whose tests pytest-xdist runs on one worker, as one piece: they share one costly set-up (a Ray
#: instance). Each also carries @pytest.mark.xdist_group with this name, which `--dist loadgroup` (pyproject.toml)
#: reads; but with pytest >= 9.2 and pytest-xdist 3.8 that mark no longer groups anything (pytest-dev/pytest-xdist
#: issue 1386: the group rides on the test ids, which pytest no longer lets a plugin change), so the scheduler below
#: groups these files by name.
XDIST_GROUPS = {"tests/test_ray.py": "ray"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `--dist loadgroup`, xdist's own scheduler that also keeps the tests of `XDIST_GROUPS` together."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Grouping(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)  # the group of a test id ending in @NAME, else the id
            return XDIST_GROUPS.get(nodeid.split("::", 1)[0], scope) if scope == nodeid else scope

    return Grouping(config, log)


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
