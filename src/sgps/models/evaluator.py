"""Adapting a network to the search engine's evaluation requests.

An evaluator answers a batch of states in two steps: the domain's observations of them
(`observe`, numpy), then the network's answers for those observations
(`evaluate_observations`). Calling it does both. The split lets search processes
compute observations themselves and send only arrays to one shared evaluator
(`sgps.execution.shared`), which calls `evaluate_observations` on the batched requests.

On a CPU a large call goes through the networks in chunks of `CPU_CHUNK_BYTES` of
observations: a lockstep call of 32 searches gathering 32 children each holds about 1,000
states, whose activations (tens of MB) spill out of the core's caches: CraftWorld and BoxWorld
networks then run up to 1.4x slower per state than on chunks of about a hundred states
(docs/search.md, "Evaluation chunks"; `benchmarks/evaluation_chunks.py`).
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

#: The observations (in bytes) of one chunk of a CPU evaluation: 80 CraftWorld or 157 BoulderDash
#: states, within a few percent of the fastest chunk of the `cpu` preset's networks on every domain.
CPU_CHUNK_BYTES = 4 * 2**20


def chunk_states(observations: torch.Tensor, chunk_bytes: int | None = None) -> int:
    """How many states of `observations` [B, C, H, W] one chunk of `chunk_bytes` (`CPU_CHUNK_BYTES`) holds,
    at least one."""
    per_state = observations[0].numel() * observations.element_size() if len(observations) else 1
    return max(1, (CPU_CHUNK_BYTES if chunk_bytes is None else chunk_bytes) // per_state)


def _joined(parts: Sequence[Answers]) -> Answers:
    """The answers of consecutive chunks as one batch's (a head that answers None does so in every chunk)."""
    policies = [policy for policy, _ in parts]
    values = [value for _, value in parts]
    return (None if policies[0] is None else np.concatenate(policies),
            None if values[0] is None else np.concatenate(values))  # fmt: skip


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
        """The answers for a batch of observations [B, C, H, W] (on a CPU, chunk by chunk)."""
        tensor = network_input(observations, self.device)
        if self.module.training:
            self.module.eval()
        size = chunk_states(tensor) if self.device.type == "cpu" else len(tensor)
        with torch.inference_mode(), number_format(self.device, self.precision):
            if size >= len(tensor):
                return self._answers(tensor)
            return _joined([self._answers(tensor[start : start + size]) for start in range(0, len(tensor), size)])

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
