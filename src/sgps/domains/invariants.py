"""What no sequence of actions can change in an observation: the checks behind `Domain.may_reach`.

A domain's rules leave some things in its observations invariant (a wall never moves,
Sokoban keeps its boxes) or monotone (a dug cell never fills with dirt again, a
visited city stays visited). An observed pair (start, goal) that breaks one of them
can never be joined by a path, whatever the actions. HIPS-ε (spec/algorithms.md 8.3)
uses this to skip π_low rollouts towards decoded subgoals that no rollout could reach,
and to stop a rollout as soon as it has made its subgoal unreachable, which saves
low-level steps without changing which subgoals are valid.

Every helper takes observations [B, C, H, W] (any numeric dtype; cells are one-hot or
empty) and returns a boolean [B]: True where the pair keeps the property. `channels`
names the channels whose planes are added up before comparing (a group such as "box"
and "box on goal"); `region` restricts the comparison to a window of the grid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: A window of the grid: (row slice, column slice); None is the whole grid.
Region = tuple[slice, slice] | None


def _plane(observations: np.ndarray, channels: Sequence[int], region: Region) -> np.ndarray:
    """The sum of `channels`' planes [B, H, W] (restricted to `region`), as integers.

    A single channel is read through a view (no gathered copy): the common case.
    """
    window = observations if region is None else observations[:, :, region[0], region[1]]
    if len(channels) == 1:
        return window[:, channels[0]].astype(np.int32)
    return window[:, list(channels)].sum(axis=1, dtype=np.int32)


def unchanged(starts: np.ndarray, goals: np.ndarray, channels: Sequence[int], region: Region = None) -> np.ndarray:
    """True where the summed plane of `channels` is the same in both (e.g. walls)."""
    return (_plane(starts, channels, region) == _plane(goals, channels, region)).all(axis=(1, 2))


def only_cleared(starts: np.ndarray, goals: np.ndarray, channels: Sequence[int], region: Region = None) -> np.ndarray:
    """True where no cell of the summed plane is set in the goal but not in the start (items only vanish)."""
    return (_plane(goals, channels, region) <= _plane(starts, channels, region)).all(axis=(1, 2))


def only_set(starts: np.ndarray, goals: np.ndarray, channels: Sequence[int], region: Region = None) -> np.ndarray:
    """True where no cell of the summed plane is set in the start but not in the goal (marks only appear)."""
    return (_plane(goals, channels, region) >= _plane(starts, channels, region)).all(axis=(1, 2))


def count(observations: np.ndarray, channels: Sequence[int], region: Region = None) -> np.ndarray:
    """How many cells set `channels` in each observation [B]."""
    return _plane(observations, channels, region).sum(axis=(1, 2))
