"""Adapting a network to the search engine's evaluation requests.

An evaluator answers a batch of states in two steps: the domain's observations of them
(`observe`, numpy), then the network's answers for those observations
(`evaluate_observations`). Calling it does both. The split lets search processes
compute observations themselves and send only arrays to one shared evaluator
(`sgps.execution.shared`), which calls `evaluate_observations` on the batched requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sgps.domains.base import Domain
from sgps.models.checkpoint import device_of
from sgps.models.flat import FlatNetwork
from sgps.models.precision import number_format
from sgps.models.resnet import network_input
from sgps.models.subgoal import SubgoalModel

Answers = tuple[np.ndarray | None, np.ndarray | None]


class _ModelEvaluator:
    """What both evaluators share: a domain to observe states, a module on a device evaluated
    in inference mode and in `precision` (`sgps.models.precision`).

    Evaluating puts the module in eval mode (batch norm uses its running statistics) and
    leaves it there; the learners switch back to train mode for their own steps. Not
    toggling the mode on every call keeps per-batch overhead low.
    """

    def __init__(
        self, domain: Domain[Any], module: torch.nn.Module, device: str | torch.device | None, precision: str
    ) -> None:
        self.domain = domain
        self.module = module
        self.device = device_of(module) if device is None else torch.device(device)
        self.precision = precision

    def __call__(self, states: Sequence[Any]) -> Answers:
        return self.evaluate_observations(self.domain.observe(states))

    def evaluate_observations(self, observations: np.ndarray) -> Answers:
        """The answers for a batch of observations [B, C, H, W]."""
        tensor = network_input(observations, self.device)
        if self.module.training:
            self.module.eval()
        with torch.inference_mode(), number_format(self.device, self.precision):
            return self._answers(tensor)

    def _answers(self, observations: torch.Tensor) -> Answers:
        raise NotImplementedError


class NetworkEvaluator(_ModelEvaluator):
    """Observations -> tensors -> (log π [B, |A|], h [B]) of a flat network, as numpy.

    A missing head answers None (LevinTS needs no heuristic, WA* no policy).
    """

    def __init__(
        self,
        domain: Domain[Any],
        network: FlatNetwork,
        device: str | torch.device | None = None,
        precision: str = "float32",
    ) -> None:
        super().__init__(domain, network, device, precision)
        self.network = network

    def _answers(self, observations: torch.Tensor) -> Answers:
        logits, heuristic = self.network(observations)
        log_policy = None if logits is None else torch.log_softmax(logits.float(), dim=1).double().cpu().numpy()
        values = None if heuristic is None else heuristic.double().cpu().numpy()
        return log_policy, values


class SubgoalEvaluator(_ModelEvaluator):
    """Observations -> (log π^SG [B, |A|], h [B]) as numpy.

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
        precision: str = "float32",
    ) -> None:
        super().__init__(domain, model, device, precision)
        self.model = model
        self.alpha = alpha
        self.mixture = mixture

    def _answers(self, observations: torch.Tensor) -> Answers:
        log_policy, heuristic = self.model(observations, self.alpha, self.mixture)
        return log_policy.double().cpu().numpy(), heuristic.double().cpu().numpy()
