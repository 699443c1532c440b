"""The flat learner: one network, one Adam optimiser, one update per Bootstrap batch.

An update is `epochs` passes over this batch's samples only, reshuffled every epoch,
in minibatches of `minibatch` (the last may be partial), as the reference does
(spec/algorithms.md 6.3). The loss depends on the heads: Levin loss for a policy,
MSE to the cost-to-go for a heuristic, their sum for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from sgps.domains.base import Domain
from sgps.models.checkpoint import SEARCH_KEY, load_checkpoint, save_checkpoint
from sgps.models.evaluator import NetworkEvaluator
from sgps.models.flat import FlatNetwork
from sgps.models.losses import heuristic_loss, levin_loss
from sgps.models.precision import backpropagated
from sgps.models.resnet import network_input
from sgps.search.costs import Algorithm
from sgps.search.engine import SearchResult
from sgps.training.methods.flat.samples import PathSamples, solution_samples


@dataclass(frozen=True)
class LearnerConfig:
    """Optimiser and update-schedule settings (defaults: the paper's; rules: `sgps.training.schema`)."""

    learning_rate: float = 3e-4
    weight_decay: float = 1e-4
    epochs: int = 10
    minibatch: int = 256
    loss: str = "levin"  # the policy's weighting: levin or improved-levin (spec 2.2)
    #: Number format of the learning step's arithmetic (`sgps.models.precision`); the weights
    #: and the optimiser stay float32 (docs/training.md, "Learning precision").
    precision: str = "float32"


def mean_loss(losses: Sequence[torch.Tensor]) -> float:
    """The mean of an update's minibatch losses, read from the device once at the end: reading
    each as it comes would make the CPU wait for the GPU after every minibatch."""
    return sum(torch.stack(losses).tolist()) / len(losses)


class FlatLearner:
    """Trains a `FlatNetwork` on solution-path samples."""

    def __init__(self, network: FlatNetwork, config: LearnerConfig, generator: torch.Generator) -> None:
        self.network = network
        self.config = config
        self.generator = generator
        self.optimizer = torch.optim.Adam(
            network.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
        )

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The loss of one minibatch (tensors keyed as `PathSamples` fields, on the network's device)."""
        logits, heuristic = self.network(batch["observations"])
        total = torch.zeros((), device=batch["observations"].device)
        if logits is not None:
            total = total + levin_loss(logits, batch["actions"], batch["weights"])
        if heuristic is not None:
            total = total + heuristic_loss(heuristic, batch["cost_to_go"])
        return total

    def update(self, samples: PathSamples | None) -> float | None:
        """One Bootstrap update; the mean minibatch loss, or None when there is nothing to learn."""
        if samples is None or len(samples) == 0:
            return None
        device = next(self.network.parameters()).device
        tensors = {"observations": network_input(samples.observations, device)} | {
            name: torch.from_numpy(getattr(samples, name)).to(device) for name in ("actions", "weights", "cost_to_go")
        }
        self.network.train()
        losses = []
        for _ in range(self.config.epochs):
            order = torch.randperm(len(samples), generator=self.generator).to(device)
            for start in range(0, len(samples), self.config.minibatch):
                index = order[start : start + self.config.minibatch]
                self.optimizer.zero_grad()
                batch = {name: tensor[index] for name, tensor in tensors.items()}
                loss = backpropagated(device, self.config.precision, lambda batch=batch: self.loss(batch))
                self.optimizer.step()
                losses.append(loss.detach())
        return mean_loss(losses)


class FlatMethod:
    """The flat baselines as a Bootstrap method: PHS*(π), LevinTS(π) or WA* with one network.

    Learns from solved searches only (solution paths); failed searches teach nothing.
    """

    needs_graphs = False
    report_columns = ("loss",)

    def __init__(
        self, domain: Domain[Any], algorithm: Algorithm, learner: FlatLearner, precision: str = "float32"
    ) -> None:
        self.domain = domain
        self.algorithm = algorithm
        self.learner = learner
        self._evaluator = NetworkEvaluator(domain, learner.network, precision=precision)

    def result_drawer(self, iteration: int, batch: int, count: int) -> None:
        """Nothing to draw from the searches where they run: the flat methods learn from solutions only."""
        return None

    def evaluator(self) -> NetworkEvaluator:
        return self._evaluator

    def test_evaluator(self) -> NetworkEvaluator:
        return self._evaluator

    def learn(self, domain: Domain[Any], results: Sequence[SearchResult]) -> dict[str, float | None]:
        return {"loss": self.learner.update(solution_samples(domain, results, self.learner.config.loss))}

    def state_dict(self) -> dict[str, Any]:
        return {
            "network": self.learner.network.state_dict(),
            "optimizer": self.learner.optimizer.state_dict(),
            "generator": self.learner.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.network.load_state_dict(state["network"])
        self.learner.optimizer.load_state_dict(state["optimizer"])
        self.learner.generator.set_state(state["generator"])

    def save_model(self, path: Path) -> None:
        save_checkpoint(path, self.learner.network, {SEARCH_KEY: self.algorithm.name})

    def load_model(self, path: Path) -> None:
        load_checkpoint(path, self.learner.network, {SEARCH_KEY: self.algorithm.name})

    def model_weights(self) -> dict[str, torch.Tensor]:
        return {name: tensor.detach().cpu() for name, tensor in self.learner.network.state_dict().items()}

    def load_model_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.learner.network.load_state_dict(weights)
