"""Training samples extracted from solved searches (spec/algorithms.md 2.2).

Every state on a solution path is one sample: its observation, the action taken
there, the Levin weight n_j (expansions of the search that found the path) and the
cost-to-go y_t = T - t.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sgps.domains.base import Domain
from sgps.search.engine import SearchResult


@dataclass(frozen=True)
class PathSamples:
    """Aligned arrays over the states of one or more solution paths."""

    observations: np.ndarray  # float32 [N, C, H, W]
    actions: np.ndarray  # int64 [N]
    weights: np.ndarray  # float32 [N]: expansions of the solving search
    cost_to_go: np.ndarray  # float32 [N]: T - t

    def __len__(self) -> int:
        return len(self.actions)


def solution_samples(domain: Domain[Any], results: Sequence[SearchResult]) -> PathSamples | None:
    """The samples of every solved result with a non-empty path, or None if there are none."""
    states: list[Any] = []
    actions: list[int] = []
    weights: list[float] = []
    cost_to_go: list[float] = []
    for result in results:
        if not result.solved or not result.actions:
            continue
        length = len(result.actions)
        states.extend(result.states[:-1])
        actions.extend(result.actions)
        weights.extend([float(result.expanded)] * length)
        cost_to_go.extend(float(length - t) for t in range(length))
    if not states:
        return None
    return PathSamples(
        observations=domain.observe(states),
        actions=np.asarray(actions, dtype=np.int64),
        weights=np.asarray(weights, dtype=np.float32),
        cost_to_go=np.asarray(cost_to_go, dtype=np.float32),
    )
