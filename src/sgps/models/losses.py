"""Losses of the flat learners (spec/algorithms.md 2.2)."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812


def levin_loss(
    logits: torch.Tensor, actions: torch.Tensor, weights: torch.Tensor, *, normalise: bool = False
) -> torch.Tensor:
    """Mean over samples of n_j * CE(logits(s_t), a_t), n_j = expansions of the solving search.

    The weight follows the LevinTS / PHS* bound, in which expansions scale as d / π.
    With `normalise`, the weights are divided by their mean over the minibatch: the
    relative weighting stays, the loss scale no longer grows with the budget (the
    option `subgoal.normalise_low_weights`).
    """
    if normalise:
        weights = weights / weights.mean()
    return (weights * F.cross_entropy(logits, actions, reduction="none")).mean()


def heuristic_loss(predicted: torch.Tensor, cost_to_go: torch.Tensor) -> torch.Tensor:
    """Mean squared error to the cost-to-go targets y_t = T - t."""
    return F.mse_loss(predicted, cost_to_go)


def policy_heuristic_loss(
    logits: torch.Tensor,
    heuristic: torch.Tensor,
    actions: torch.Tensor,
    weights: torch.Tensor,
    cost_to_go: torch.Tensor,
) -> torch.Tensor:
    """The two-headed (PHS*) loss: mean of n_j * CE + (h - y)^2 over the minibatch."""
    return levin_loss(logits, actions, weights) + heuristic_loss(heuristic, cost_to_go)
