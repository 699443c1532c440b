"""Adapting a network to the search engine's evaluation requests.

An evaluator answers a batch of states in two steps: the domain's observations of them
(`observe`, numpy), then the network's answers for those observations
(`evaluate_observations`). Calling it does both. The split lets search processes
compute observations themselves and send only arrays to one shared evaluator
(`sgps.search.shared`), which calls `evaluate_observations` on the batched requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sgps.domains.base import Domain
from sgps.models.checkpoint import device_of
from sgps.models.flat import FlatNetwork
from sgps.models.precision import evaluation_precision
from sgps.models.subgoal import SubgoalModel

Answers = tuple[np.ndarray | None, np.ndarray | None]


class NetworkEvaluator:
    """Observations -> tensors -> (log π [B, |A|], h [B]) as numpy, in inference mode.

    A missing head answers None (LevinTS needs no heuristic, WA* no policy). Evaluating
    puts the network in eval mode (batch norm uses its running statistics) and leaves it
    there; `FlatLearner.update` switches back to train mode for its own steps. Not
    toggling the mode on every call keeps per-batch overhead low. `precision`: the number
    format of the forward pass (`sgps.models.precision`).
    """

    def __init__(
        self,
        domain: Domain[Any],
        network: FlatNetwork,
        device: str | torch.device | None = None,
        precision: str = "float32",
    ) -> None:
        self.domain = domain
        self.network = network
        self.device = device_of(network) if device is None else torch.device(device)
        self.precision = precision

    def __call__(self, states: Sequence[Any]) -> Answers:
        return self.evaluate_observations(self.domain.observe(states))

    def evaluate_observations(self, observations: np.ndarray) -> Answers:
        """The answers for a batch of observations [B, C, H, W]."""
        tensor = torch.from_numpy(observations).to(self.device)
        if self.network.training:
            self.network.eval()
        with torch.inference_mode(), evaluation_precision(self.device, self.precision):
            logits, heuristic = self.network(tensor)
        log_policy = None if logits is None else torch.log_softmax(logits.float(), dim=1).double().cpu().numpy()
        values = None if heuristic is None else heuristic.double().cpu().numpy()
        return log_policy, values


class SubgoalEvaluator:
    """Observations -> (log π^SG [B, |A|], h [B]) as numpy, in inference mode.

    `alpha` (the unconditional weight) and `mixture` are attributes so a method can
    switch between the training value (0.25) and the test value (0.5) of α.
    `precision`: the number format of the forward pass (`sgps.models.precision`).
    """

    def __init__(
        self,
        domain: Domain[Any],
        model: SubgoalModel,
        alpha: float,
        mixture: str = "geometric",
        device: str | torch.device | None = None,
        precision: str = "float32",
    ) -> None:
        self.domain = domain
        self.model = model
        self.alpha = alpha
        self.mixture = mixture
        self.device = device_of(model) if device is None else torch.device(device)
        self.precision = precision

    def __call__(self, states: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        return self.evaluate_observations(self.domain.observe(states))

    def evaluate_observations(self, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The answers for a batch of observations [B, C, H, W]."""
        tensor = torch.from_numpy(observations).to(self.device)
        if self.model.training:
            self.model.eval()
        with torch.inference_mode(), evaluation_precision(self.device, self.precision):
            log_policy, heuristic = self.model(tensor, self.alpha, self.mixture)
        return log_policy.double().cpu().numpy(), heuristic.double().cpu().numpy()
