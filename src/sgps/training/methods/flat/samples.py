"""Training samples extracted from solved searches (spec/algorithms.md 2.2).

Every state on a solution path is one sample: its observation, the action taken
there, the Levin weight of the path and the cost-to-go y_t = T - t. The weight is
n_j, the expansions of the search that found the path (the ``levin`` loss), or the
improved Levin loss's n'·a of the PHS* reference code (``improved-levin``).
"""

from __future__ import annotations

import math
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


#: Weightings of the policy's cross-entropy (spec/algorithms.md 2.2).
LOSSES = ("levin", "improved-levin")


def levin_weight(expanded: int, length: int, log_prob: float | None, loss: str = "levin") -> float:
    """The weight of every sample of one solution path.

    - ``levin``: n, the expansions of the search that found the path;
    - ``improved-levin``: n'·a with n' = n + 1, d = T + 1 and
      a = max(0, ln((d + 1)/n') / ln π_sol) when π_sol < 1 (else 0), π_sol being the
      probability of the path. Without a path probability (a heuristic-only search)
      the plain weight n is used.
    """
    if loss == "levin" or log_prob is None:
        return float(expanded)
    if loss != "improved-levin":
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}, not {loss!r}")
    if log_prob >= 0.0:
        return 0.0
    n_prime, depth = expanded + 1, length + 1
    return n_prime * max(0.0, math.log((depth + 1) / n_prime) / log_prob)


def solution_samples(
    domain: Domain[Any], results: Sequence[SearchResult], loss: str = "levin"
) -> PathSamples | None:
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
        weights.extend([levin_weight(result.expanded, length, result.solution_log_prob, loss)] * length)
        cost_to_go.extend(float(length - t) for t in range(length))
    if not states:
        return None
    return PathSamples(
        observations=domain.observe(states),
        actions=np.asarray(actions, dtype=np.int64),
        weights=np.asarray(weights, dtype=np.float32),
        cost_to_go=np.asarray(cost_to_go, dtype=np.float32),
    )
