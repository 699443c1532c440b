"""A user's own domain: registered once, usable by files, solver and command line."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from sgps.cli import main
from sgps.domains import domain_names, get_domain, read_levels, solve, unregister_domain
from sgps.domains.registry import register_domain
from sgps.errors import UnknownDomainError

from conftest import REPO

EXAMPLES = REPO / "examples"


@pytest.fixture
def maze():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import maze_domain  # noqa: F401  (registers "maze")

        yield get_domain("maze")
    finally:
        sys.path.remove(str(EXAMPLES))
        unregister_domain("maze")
        sys.modules.pop("maze_domain", None)


def test_registered_domain_works_with_files_solver_and_observation(maze, tmp_path):
    assert "maze" in domain_names()
    assert main(["generate", "maze", "--count", "6", "--seed", "3", "--out", str(tmp_path / "m.txt")]) == 0
    levels = read_levels(tmp_path / "m.txt")
    assert levels.domain.name == "maze" and len(levels) == 6
    results = [solve(maze, state) for state in levels.states()]
    solved = [r for r in results if r.status == "solved"]
    assert solved and all(r.status in ("solved", "unsolvable") for r in results)
    obs = maze.observe(levels.states())
    assert obs.shape == (6, 4, 9, 9) and np.all(obs.sum(axis=1) == 1)


def test_plugin_option_loads_the_domain_in_a_fresh_process(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(EXAMPLES)}
    run = [sys.executable, "-m", "sgps", "--plugin", "maze_domain"]
    made = subprocess.run(
        [*run, "generate", "maze", "--count", "2", "--out", str(tmp_path / "m.txt")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    shown = subprocess.run(
        [*run, "show", str(tmp_path / "m.txt"), "--index", "1"], env=env, capture_output=True, text=True
    )
    assert shown.returncode == 0 and "maze 9x9" in shown.stdout


def test_registry_rejects_duplicates_and_unknown_names():
    with pytest.raises(ValueError, match="already registered"):
        register_domain("tsp", lambda: get_domain("tsp"))
    with pytest.raises(UnknownDomainError, match="unknown domain 'nope'; known domains: boulderdash, boxworld"):
        get_domain("nope")
