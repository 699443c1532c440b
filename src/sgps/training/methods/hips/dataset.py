"""HIPS-ε's offline data (spec/algorithms.md 8.1): solution trajectories from the exact solver.

HIPS-ε cannot learn from its own searches; it learns from solved training problems.
`build_dataset` solves each level with the exact solver (BFS or A*, `sgps.domains.solver`)
and keeps its initial state and optimal action sequence; levels the solver cannot
finish within its state cap are reported and skipped.

A dataset file is one `.npz` archive (no pickled objects) holding the domain's name, each
trajectory's initial state in the domain's integer level encoding and its actions, the
integers of all trajectories concatenated with offsets. States along a trajectory are
not stored: `read_dataset` replays the actions in the domain, and refuses a file whose
trajectory does not end at a goal, so every trajectory it returns is a true solution.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sgps.domains.animation import trajectory
from sgps.domains.base import Domain
from sgps.domains.levels import Level
from sgps.domains.registry import get_domain
from sgps.domains.solver import default_state_cap, solve
from sgps.errors import ConfigError, SgpsError
from sgps.fileio import atomic_write_bytes

FORMAT = "sgps-hips-dataset-1"
_KEYS = ("format", "domain", "names", "levels", "level_offsets", "actions", "action_offsets")


@dataclass(frozen=True)
class Trajectory:
    """One solved problem: its name, states s_0 .. s_T and actions a_0 .. a_{T-1}."""

    name: str
    states: tuple[Any, ...]
    actions: tuple[int, ...]


@dataclass(frozen=True)
class Dataset:
    """The trajectories of one domain."""

    domain: Domain[Any]
    trajectories: tuple[Trajectory, ...]

    @property
    def transitions(self) -> int:
        return sum(len(t.actions) for t in self.trajectories)


@dataclass(frozen=True)
class BuildReport:
    """What `build_dataset` did: the trajectories kept and the levels skipped, with why."""

    dataset: Dataset
    skipped: tuple[tuple[str, str], ...]  # (level name, reason)


def build_dataset(
    domain: Domain[Any],
    levels: Sequence[Level],
    *,
    max_states: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BuildReport:
    """Solve every level exactly; keep the solved ones as trajectories (`max_states`: the solver's cap)."""
    trajectories: list[Trajectory] = []
    skipped: list[tuple[str, str]] = []
    for index, level in enumerate(levels):
        cap = default_state_cap(domain, level.state) if max_states is None else max_states
        result = solve(domain, level.state, max_states=cap)
        if result.actions is None:
            reason = f"state cap of {cap:,} reached" if result.status == "cap" else "no solution exists"
            skipped.append((level.name, reason))
        else:
            states = tuple(trajectory(domain, level.state, result.actions))
            trajectories.append(Trajectory(level.name, states, result.actions))
        if progress is not None:
            progress(index + 1, len(levels))
    return BuildReport(Dataset(domain, tuple(trajectories)), tuple(skipped))


def write_dataset(path: str | Path, dataset: Dataset) -> None:
    """Write `dataset` to `path` (`.npz`; a temporary file, then rename)."""
    if not dataset.trajectories:
        raise ConfigError(f"{path}: no solved trajectory to write")
    encodings = [np.asarray(dataset.domain.encode(t.states[0]), dtype=np.int64) for t in dataset.trajectories]
    actions = [np.asarray(t.actions, dtype=np.int16) for t in dataset.trajectories]
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        format=np.array(FORMAT),
        domain=np.array(dataset.domain.name),
        names=np.array([t.name for t in dataset.trajectories]),
        levels=np.concatenate(encodings),
        level_offsets=np.cumsum([0] + [len(e) for e in encodings]),
        actions=np.concatenate(actions),
        action_offsets=np.cumsum([0] + [len(a) for a in actions]),
    )
    atomic_write_bytes(path, buffer.getvalue())


def read_dataset(path: str | Path, domain_name: str | None = None) -> Dataset:
    """Read and check a dataset file: every trajectory must replay in its domain to a goal.

    `domain_name`: refuse a dataset of another domain. Errors name the file and the trajectory.
    """
    file = Path(path)
    arrays = _load_arrays(file)
    if str(arrays["format"]) != FORMAT:
        raise ConfigError(f"{file}: not an sgps HIPS-ε dataset (format {str(arrays['format'])!r}, expected {FORMAT})")
    name = str(arrays["domain"])
    if domain_name and name != domain_name:
        raise ConfigError(f"{file}: a {name} dataset, but this run is on {domain_name}")
    try:
        domain = get_domain(name)
    except SgpsError as error:
        raise ConfigError(f"{file}: {error}") from None
    names, level_offsets, action_offsets = arrays["names"], arrays["level_offsets"], arrays["action_offsets"]
    count = len(names)
    if len(level_offsets) != count + 1 or len(action_offsets) != count + 1 or count == 0:
        raise ConfigError(f"{file}: damaged: {count} trajectory names but offsets for a different number")
    trajectories = []
    for k in range(count):
        fields = arrays["levels"][level_offsets[k] : level_offsets[k + 1]].tolist()
        actions = tuple(int(a) for a in arrays["actions"][action_offsets[k] : action_offsets[k + 1]])
        where = f"{file}: trajectory {k} ({names[k]})"
        try:
            start = domain.parse(fields)
        except SgpsError as error:
            raise ConfigError(f"{where}: its level does not parse ({error})") from None
        if any(not 0 <= a < domain.num_actions for a in actions):
            raise ConfigError(f"{where}: an action outside 0..{domain.num_actions - 1}")
        states = tuple(trajectory(domain, start, actions))
        if not domain.is_goal(states[-1]):
            raise ConfigError(f"{where}: its actions do not reach a goal in {name}")
        trajectories.append(Trajectory(str(names[k]), states, actions))
    return Dataset(domain, tuple(trajectories))


def _load_arrays(file: Path) -> dict[str, np.ndarray]:
    """The archive's arrays (no pickles), or a `ConfigError` naming what is wrong."""
    if not file.is_file():
        raise ConfigError(f"{file}: no such dataset file (write one with `sgps dataset`)")
    try:
        with np.load(file, allow_pickle=False) as archive:
            missing = [key for key in _KEYS if key not in archive.files]
            if missing:
                raise ConfigError(f"{file}: not an sgps HIPS-ε dataset (missing {', '.join(missing)})")
            return {key: archive[key] for key in _KEYS}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise ConfigError(f"{file}: not a readable dataset ({error})") from None
