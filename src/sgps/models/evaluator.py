"""Adapting a network to the search engine's evaluation requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sgps.domains.base import Domain
from sgps.models.checkpoint import device_of
from sgps.models.flat import FlatNetwork
from sgps.models.subgoal import SubgoalModel


class NetworkEvaluator:
    """Observations -> tensors -> (log π [B, |A|], h [B]) as numpy, in inference mode.

    A missing head answers None (LevinTS needs no heuristic, WA* no policy). Evaluating
    puts the network in eval mode (batch norm uses its running statistics) and leaves it
    there; `FlatLearner.update` switches back to train mode for its own steps. Not
    toggling the mode on every call keeps per-batch overhead low.
    """

    def __init__(self, domain: Domain[Any], network: FlatNetwork, device: str | torch.device | None = None) -> None:
        self.domain = domain
        self.network = network
        self.device = device_of(network) if device is None else torch.device(device)

    def __call__(self, states: Sequence[Any]) -> tuple[np.ndarray | None, np.ndarray | None]:
        observations = torch.from_numpy(self.domain.observe(states)).to(self.device)
        if self.network.training:
            self.network.eval()
        with torch.inference_mode():
            logits, heuristic = self.network(observations)
        log_policy = None if logits is None else torch.log_softmax(logits, dim=1).double().cpu().numpy()
        values = None if heuristic is None else heuristic.double().cpu().numpy()
        return log_policy, values


class SubgoalEvaluator:
    """Observations -> (log π^SG [B, |A|], h [B]) as numpy, in inference mode.

    `alpha` (the unconditional weight) and `mixture` are attributes so a method can
    switch between the training value (0.25) and the test value (0.5) of α.
    """

    def __init__(
        self,
        domain: Domain[Any],
        model: SubgoalModel,
        alpha: float,
        mixture: str = "geometric",
        device: str | torch.device | None = None,
    ) -> None:
        self.domain = domain
        self.model = model
        self.alpha = alpha
        self.mixture = mixture
        self.device = device_of(model) if device is None else torch.device(device)

    def __call__(self, states: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        observations = torch.from_numpy(self.domain.observe(states)).to(self.device)
        if self.model.training:
            self.model.eval()
        with torch.inference_mode():
            log_policy, heuristic = self.model(observations, self.alpha, self.mixture)
        return log_policy.double().cpu().numpy(), heuristic.double().cpu().numpy()
