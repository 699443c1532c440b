"""Evaluators without a model: they answer a search's requests from the domain alone.

An evaluator maps a batch of states to ``(log_policy [B, |A|] or None, heuristic [B]
or None)``. Learned evaluators (sgps.models) follow the same protocol.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from sgps.domains.base import Domain

Evaluation = tuple[np.ndarray | None, np.ndarray | None]


class Evaluator(Protocol):
    """Anything that evaluates a batch of states for a search."""

    def __call__(self, states: Sequence[Any]) -> Evaluation: ...


class ObservationEvaluator(Evaluator, Protocol):
    """An evaluator that answers from observations alone, so it can also be handed the
    observations of states observed elsewhere (`sgps.execution.shared`)."""

    def evaluate_observations(self, observations: np.ndarray) -> Evaluation: ...


class UniformPolicy:
    """π(a|s) = 1/|A| for every action, and h = 0 (LevinTS with it is breadth-first-like)."""

    def __init__(self, domain: Domain[Any]) -> None:
        self.num_actions = domain.num_actions

    def __call__(self, states: Sequence[Any]) -> Evaluation:
        count = len(states)
        return np.full((count, self.num_actions), -math.log(self.num_actions)), np.zeros(count)


class DomainHeuristic:
    """The domain's own cheap heuristic (`Domain.heuristic`), with a uniform policy.

    States the domain proves dead (h = inf) keep h = inf, so heuristic searches put
    them last.
    """

    def __init__(self, domain: Domain[Any]) -> None:
        self.domain = domain
        self.num_actions = domain.num_actions

    def __call__(self, states: Sequence[Any]) -> Evaluation:
        heuristic = np.fromiter((self.domain.heuristic(s) for s in states), dtype=np.float64, count=len(states))
        return np.full((len(states), self.num_actions), -math.log(self.num_actions)), heuristic
