"""Training π^SG from solved and failed searches: PHS*(π^SG) and LevinTS(π^SG).

One update per Bootstrap batch (spec/algorithms.md 6.3), network by network, each
with its own Adam optimiser, over this batch's samples only:

| network            | samples                                | epochs | minibatch | per epoch |
|--------------------|----------------------------------------|--------|-----------|-----------|
| VQ-VAE             | all pairs (failed trees + segments)    | 10     | 64        | all       |
| high-level π_hi    | solved-segment states                  | 5      | 256       | ≤ 5       |
| conditional π_low  | failed-tree paths + solved segments    | 10     | 256       | ≤ 5       |
| π_unc + h          | solution paths                         | 10     | 256       | all       |

The VQ-VAE goes first, so the code labels of π_hi and the codes π_low is conditioned
on come from the updated generator (evaluation mode, no gradient). A network with
no samples is skipped. With ``subgoal.code_objective = "joint"`` (not the paper's), each
VQ-VAE step also takes π_low's loss on a draw of its rows through the straight-through
code, so the codes are trained to say which way π_low should go (`SubgoalLearner.action_loss`).
Losses are the Levin-weighted cross-entropies of the paper
(weight n = expansions of the search the sample came from). Every network computation
of the step but the probe (a measurement, kept in float32) runs in `learner.precision`.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sgps.domains.base import Domain
from sgps.models.checkpoint import SEARCH_KEY, load_checkpoint, save_checkpoint
from sgps.models.evaluator import SubgoalEvaluator
from sgps.models.losses import levin_loss
from sgps.models.precision import backpropagated, number_format
from sgps.models.resnet import network_input
from sgps.models.subgoal import SubgoalModel, SubgoalModelConfig
from sgps.search.costs import Algorithm
from sgps.search.engine import SearchResult
from sgps.training.methods.flat.learner import FlatLearner, LearnerConfig, mean_loss
from sgps.training.methods.flat.samples import solution_samples
from sgps.training.methods.subgoal.drawing import TreeDrawer, search_seeds
from sgps.training.methods.subgoal.probe import PROBE_COLUMNS, probe_low_policy
from sgps.training.methods.subgoal.samples import (
    HighRows,
    LengthBuffer,
    LowRows,
    PairRows,
    SamplingSettings,
    SubgoalSamples,
    collect_samples,
)
from sgps.training.randomness import numpy_state, restore_numpy_state

#: Columns of metrics/learning.csv for the subgoal methods.
REPORT_COLUMNS = (
    "loss_vqvae", "loss_high", "loss_low", "loss_unconditional", "failed_trees", "failed_pairs",
    "failed_mean_length", "failed_mean_level", "cluster_level", "cluster_count", "segments", "length_mean",
    "length_std", "codes_used", "code_perplexity", "code_counts", "high_entropy", *PROBE_COLUMNS,
)  # fmt: skip

#: What the VQ-VAE's codes are trained for: the paper's L_VQ (reconstruct the subgoal from
#: the state), or L_VQ plus π_low's loss through the straight-through code (docs/subgoals.md).
CODE_OBJECTIVES = ("reconstruction", "joint")

#: Old spellings of option values, accepted with a deprecation message.
RENAMED_VALUES = {
    "conditioning": {"code": "code-vector", "state": "decoded-state"},
    "hierarchy": {"code": "reference", "paper": "louvain"},
}


class SgpsDeprecationWarning(FutureWarning):
    """An option value that still works under an old name (shown to users by default)."""


def current_spelling(name: str, value: str) -> str:
    """`value` of option `subgoal.name` under its current name, warning when an old one was used."""
    renamed = RENAMED_VALUES.get(name, {}).get(value)
    if renamed is None:
        return value
    warnings.warn(
        f"subgoal.{name} = {value!r} is deprecated; write {renamed!r}", SgpsDeprecationWarning, stacklevel=2
    )
    return renamed


@dataclass(frozen=True)
class SubgoalSettings:
    """The ``[subgoal]`` section (defaults: the reference's, spec section 7; rules: `sgps.training.schema`)."""

    conditioning: str = "code-vector"
    mixture: str = "geometric"
    alpha_train: float = 0.25
    alpha_test: float = 0.5
    codebook_size: int = 4
    codebook: str = "standardised"  # reference: the EMA codebook alone, which collapses (docs/subgoals.md)
    code_dim: int = 128
    commitment: float = 0.25
    vq_channels: int = 128
    vq_blocks: int = 4
    channels: int = 128
    blocks: int = 4
    hidden: int = 512
    unconditional_channels: int = 64
    unconditional_blocks: int = 4
    #: After the 1x1 reduction of π_hi's and π_low's features (`REDUCE_ACTIVATIONS`): "relu" is the
    #: reference's, whose two channels died on hard CraftWorld (docs/subgoals.md, "Dead features").
    reduce_activation: str = "none"
    failed_trees: bool = True
    exhausted_trees: bool = False  # also cluster the graphs of searches that ran out of states
    normalise_low_weights: bool = False  # divide π_low's Levin weights by their minibatch mean
    code_objective: str = "reconstruction"  # CODE_OBJECTIVES; "joint" departs from the paper
    action_weight: float = 1.0  # λ of π_low's term in the "joint" objective
    hierarchy: str = "reference"
    #: The random stream of the failed trees' clustering and pair draws: "batch" (one for the
    #: whole batch, in the training process: the reference's) or "per-search" (one per search,
    #: drawn in the process that searched it: `sgps.training.methods.subgoal.drawing`).
    tree_rng: str = "batch"
    cluster_level: int = 0  # 0: the rule ⌊L/2⌋ - 1 over the L levels of each tree
    resolution: float = 1.0
    pairs_per_tree: int = 5
    max_draws: int = 1000
    length_buffer: int = 10_000
    segmentation: str = "fixed"
    subgoal_target: str = "state"
    vq_minibatch: int = 64
    high_epochs: int = 5
    max_minibatches: int = 5  # per epoch, for π_hi and π_low (the reference's cap)
    probe_pairs: int = 16  # failed-tree pairs π_low is probed on before each update (0: no probe)

    def __post_init__(self) -> None:
        """Old spellings of renamed values become the current ones (with a warning); the values
        themselves are checked where settings enter, against `sgps.training.schema`."""
        for name in RENAMED_VALUES:
            object.__setattr__(self, name, current_spelling(name, getattr(self, name)))

    def model_config(self, observation_shape: tuple[int, int, int], num_actions: int) -> SubgoalModelConfig:
        """The architecture these settings describe, for observations of `observation_shape`."""
        return SubgoalModelConfig(
            observation_shape,
            num_actions,
            conditioning=self.conditioning,
            codebook_size=self.codebook_size,
            codebook=self.codebook,
            code_dim=self.code_dim,
            vq_channels=self.vq_channels,
            vq_blocks=self.vq_blocks,
            channels=self.channels,
            blocks=self.blocks,
            hidden=self.hidden,
            unconditional_channels=self.unconditional_channels,
            unconditional_blocks=self.unconditional_blocks,
            reduce_activation=self.reduce_activation,
        )

    def sampling(self) -> SamplingSettings:
        """How to draw samples from failed trees and solutions."""
        return SamplingSettings(
            failed_trees=self.failed_trees,
            exhausted_trees=self.exhausted_trees,
            hierarchy=self.hierarchy,
            cluster_level=self.cluster_level,
            resolution=self.resolution,
            pairs_per_tree=self.pairs_per_tree,
            max_draws=self.max_draws,
            segmentation=self.segmentation,
            subgoal_target=self.subgoal_target,
        )


class SubgoalLearner:
    """The four optimisers of π^SG and the per-batch update of the table above."""

    def __init__(
        self, model: SubgoalModel, settings: SubgoalSettings, config: LearnerConfig, generator: torch.Generator
    ) -> None:
        self.model = model
        self.settings = settings
        self.config = config
        self.generator = generator
        self.model.vqvae.commitment = settings.commitment
        self.optimizers = {
            name: torch.optim.Adam(
                getattr(model, name).parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
            )
            for name in ("vqvae", "high", "low")
        }
        self.unconditional = FlatLearner(model.unconditional, config, generator)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def computing(self) -> contextlib.AbstractContextManager[None]:
        """`learner.precision` for a computation without gradient (float32 as PyTorch's defaults have it)."""
        return number_format(self.device, self.config.precision, exact=False)

    def update(self, samples: SubgoalSamples | None, results: Sequence[SearchResult], domain: Domain[Any]) -> dict:
        """One Bootstrap update: the mean minibatch loss of each network (None when skipped) and diagnostics.

        Diagnostics, after the update: how the batch's VQ pairs spread over the K codes
        (`code_counts`, `codes_used`, `code_perplexity` = exp of the entropy of that
        distribution: K when every code is used equally, 1 after a collapse) and the
        mean entropy of π_hi over the states of the high-level samples (`high_entropy`).
        Before the update, the probe measures π_low on the batch's failed-tree pairs
        (`sgps.training.methods.subgoal.probe`).
        """
        report: dict[str, Any] = {"loss_vqvae": None, "loss_high": None, "loss_low": None,
                                  "codes_used": None, "code_perplexity": None, "code_counts": None,
                                  "high_entropy": None, **dict.fromkeys(PROBE_COLUMNS)}  # fmt: skip
        if samples is not None:
            # The probe measures in float32 whatever `learner.precision` says: runs stay comparable.
            report.update(probe_low_policy(self.model, domain, samples, self.settings.probe_pairs, self.device))
            observations = network_input(samples.observations, self.device)
            action_loss = self.action_loss(observations, samples.low)
            report["loss_vqvae"] = self._train_vqvae(observations, samples.vq, action_loss)
            self.model.vqvae.eval()
            report["loss_high"] = self._train_high(observations, samples.high)
            report["loss_low"] = self._train_low(observations, samples.low)
            report.update(self._code_usage(observations, samples.vq))
            with self.computing():
                report["high_entropy"] = self._high_entropy(observations, samples.high)
        report["loss_unconditional"] = self.unconditional.update(solution_samples(domain, results, self.config.loss))
        self.model.eval()  # the state the evaluator expects
        return report

    def _code_usage(self, observations: torch.Tensor, pairs: PairRows) -> dict[str, Any]:
        states, targets = (torch.from_numpy(rows).to(self.device) for rows in (pairs.states, pairs.targets))
        counts = self.model.vqvae.codebook.usage(self.codes(observations, states, targets)).cpu()
        shares = counts.double() / max(int(counts.sum()), 1)
        entropy = -float((shares[shares > 0] * shares[shares > 0].log()).sum())
        return {
            "codes_used": int((counts > 0).sum()),
            "code_perplexity": math.exp(entropy),
            "code_counts": " ".join(str(int(c)) for c in counts),
        }

    @torch.no_grad()
    def _high_entropy(self, observations: torch.Tensor, high: HighRows) -> float | None:
        if len(high) == 0:
            return None
        rows = torch.from_numpy(np.unique(high.states)).to(self.device)
        entropies = []
        for start in range(0, len(rows), 1024):
            states = observations[rows[start : start + 1024]]
            log_high = torch.log_softmax(self.model.for_every_code(self.model.high, states).squeeze(2), dim=1)
            entropies.append(-(log_high.exp() * log_high).sum(dim=1))
        return float(torch.cat(entropies).mean())

    # -- the four networks --------------------------------------------------------------

    def _tensors(self, *arrays: np.ndarray) -> tuple[torch.Tensor, ...]:
        return tuple(torch.from_numpy(array).to(self.device) for array in arrays)

    def _train_vqvae(
        self, observations: torch.Tensor, pairs: PairRows, action_loss: Callable[[int], torch.Tensor] | None
    ) -> float | None:
        """L_VQ on minibatches of the pairs, plus `action_loss` on as many π_low rows when given."""
        vqvae = self.model.vqvae
        vqvae.train()
        states, targets = self._tensors(pairs.states, pairs.targets)

        def loss(rows: torch.Tensor) -> torch.Tensor:
            value = vqvae.loss(observations[states[rows]], observations[targets[rows]])
            return value if action_loss is None else value + action_loss(len(rows))

        low_parameters = list(self.model.low.parameters())
        for parameter in low_parameters:  # π_low's term moves the codes, not π_low (its own step follows)
            parameter.requires_grad_(False)
        try:
            return self._fit("vqvae", loss, len(pairs), self.config.epochs, self.settings.vq_minibatch, None)
        finally:
            for parameter in low_parameters:
                parameter.requires_grad_(True)

    def action_loss(self, observations: torch.Tensor, low: LowRows) -> Callable[[int], torch.Tensor] | None:
        """The "joint" objective's term, None under the paper's: λ · π_low's loss on `count` rows drawn
        at random from `low`, each conditioned on the straight-through vector of its (state, target) code.

        The forward value is π_low's loss on the codes it is trained on; the gradient reaches
        the encoder as if the code vector were z_e (the VQ-VAE's own straight-through
        estimator). The Levin weights are divided by their minibatch mean, so the term is a
        cross-entropy in scale, like L_VQ's, whatever the budget.
        """
        if self.settings.code_objective != "joint" or len(low) == 0:
            return None
        states, targets, actions, weights = self._tensors(low.states, low.targets, low.actions, low.weights)
        model, weight = self.model, self.settings.action_weight

        def loss(count: int) -> torch.Tensor:
            rows = torch.randint(len(low), (count,), generator=self.generator).to(self.device)
            at = observations[states[rows]]
            encodings = model.vqvae.encode(at, observations[targets[rows]])
            _, _, straight_through = model.vqvae.quantise(encodings)
            logits = model.conditioned_on_vectors(model.low, at, straight_through)
            return weight * levin_loss(logits, actions[rows], weights[rows], normalise=True)

        return loss

    def _train_high(self, observations: torch.Tensor, high: HighRows) -> float | None:
        states, targets, label_states, weights = self._tensors(high.states, high.targets, high.label_states,
                                                               high.weights)  # fmt: skip
        labels = self.codes(observations, label_states, targets)
        model = self.model

        def loss(rows: torch.Tensor) -> torch.Tensor:
            logits = model.for_every_code(model.high, observations[states[rows]]).squeeze(2)
            return levin_loss(logits, labels[rows], weights[rows])

        return self._fit("high", loss, len(high), self.settings.high_epochs, self.config.minibatch,
                         self.settings.max_minibatches)  # fmt: skip

    def _train_low(self, observations: torch.Tensor, low: LowRows) -> float | None:
        states, targets, actions, weights = self._tensors(low.states, low.targets, low.actions, low.weights)
        codes = self.codes(observations, states, targets)
        model, normalise = self.model, self.settings.normalise_low_weights

        def loss(rows: torch.Tensor) -> torch.Tensor:
            logits = model.conditioned_on_codes(model.low, observations[states[rows]], codes[rows])
            return levin_loss(logits, actions[rows], weights[rows], normalise=normalise)

        return self._fit("low", loss, len(low), self.config.epochs, self.config.minibatch,
                         self.settings.max_minibatches)  # fmt: skip

    @torch.no_grad()
    def codes(self, observations: torch.Tensor, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The VQ-VAE code of each (state, target) row pair, in chunks, evaluation mode."""
        self.model.vqvae.eval()
        with self.computing():
            chunks = [
                self.model.vqvae.code(observations[states[i : i + 1024]], observations[targets[i : i + 1024]])
                for i in range(0, len(states), 1024)
            ]
        return torch.cat(chunks) if chunks else torch.zeros(0, dtype=torch.long, device=self.device)

    def _fit(
        self,
        name: str,
        loss: Callable[[torch.Tensor], torch.Tensor],
        count: int,
        epochs: int,
        minibatch: int,
        cap: int | None,
    ) -> float | None:
        """Epochs of minibatch steps on `count` samples (reshuffled each epoch); the mean loss."""
        if count == 0:
            return None
        network, optimizer = getattr(self.model, name), self.optimizers[name]
        network.train()
        values = []
        for _ in range(epochs):
            for rows in self._minibatches(count, minibatch, cap):
                optimizer.zero_grad()
                value = backpropagated(self.device, self.config.precision, lambda rows=rows: loss(rows))
                optimizer.step()
                values.append(value.detach())
        network.eval()
        return mean_loss(values)

    def _minibatches(self, count: int, size: int, cap: int | None) -> Iterator[torch.Tensor]:
        order = torch.randperm(count, generator=self.generator).to(self.device)
        for number, start in enumerate(range(0, count, size)):
            if cap is not None and number >= cap:
                return
            yield order[start : start + size]


class SubgoalMethod:
    """PHS*(π^SG) or LevinTS(π^SG) as a Bootstrap method (`sgps.training.bootstrap.Method`)."""

    report_columns = REPORT_COLUMNS

    def __init__(
        self,
        domain: Domain[Any],
        algorithm: Algorithm,
        learner: SubgoalLearner,
        seed: int,
        device: torch.device,
        precision: str = "float32",
    ) -> None:
        self.domain = domain
        self.algorithm = algorithm
        self.learner = learner
        self.settings = learner.settings
        self.needs_graphs = self.settings.failed_trees
        self.lengths = LengthBuffer(self.settings.length_buffer)
        self.seed = seed
        self.rng = np.random.default_rng([seed, 0x5B])  # segment lengths; cluster seeds and pair draws in "batch"
        model, mixture = learner.model, self.settings.mixture
        self._train_evaluator = SubgoalEvaluator(domain, model, self.settings.alpha_train, mixture, device, precision)
        self._test_evaluator = SubgoalEvaluator(domain, model, self.settings.alpha_test, mixture, device, precision)

    @property
    def model(self) -> SubgoalModel:
        return self.learner.model

    def result_drawer(self, iteration: int, batch: int, count: int) -> TreeDrawer | None:
        """With per-search tree streams, the draws from this batch's failed trees, made where they are searched."""
        if not self.needs_graphs or self.settings.tree_rng != "per-search":
            return None
        return TreeDrawer(self.settings.sampling(), search_seeds(self.seed, iteration, batch, count))

    def evaluator(self) -> SubgoalEvaluator:
        """π^SG with the training weight α (training and validation searches)."""
        return self._train_evaluator

    def test_evaluator(self) -> SubgoalEvaluator:
        """π^SG with the test weight α."""
        return self._test_evaluator

    def learn(self, domain: Domain[Any], results: Sequence[SearchResult]) -> dict[str, Any]:
        mean, std = self.lengths.statistics()  # of the pairs of earlier batches (spec 4.4)
        samples = collect_samples(domain, results, self.settings.sampling(), (mean, std), self.rng)
        report = self.learner.update(samples, results, domain)
        lengths = samples.pair_lengths if samples is not None else []
        self.lengths.push(lengths)

        def mean_of(values: list[int]) -> float | None:
            return float(np.mean(values)) if values else None

        return {
            **report,
            "failed_trees": samples.failed_trees if samples is not None else 0,
            "failed_pairs": len(lengths),
            "failed_mean_length": mean_of(lengths),
            "failed_mean_level": mean_of(samples.levels_used if samples is not None else []),
            "cluster_level": mean_of(samples.chosen_levels if samples is not None else []),
            "cluster_count": mean_of(samples.cluster_counts if samples is not None else []),
            "segments": samples.segments if samples is not None else 0,
            "length_mean": mean,
            "length_std": std,
        }

    def state_dict(self) -> dict[str, Any]:
        learner = self.learner
        return {
            "model": self.model.state_dict(),
            "optimizers": {name: opt.state_dict() for name, opt in learner.optimizers.items()},
            "unconditional_optimizer": learner.unconditional.optimizer.state_dict(),
            "generator": learner.generator.get_state(),
            "lengths": self.lengths.state_dict(),
            "rng": numpy_state(self.rng),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        learner = self.learner
        self.model.load_state_dict(state["model"])
        for name, optimizer in learner.optimizers.items():
            optimizer.load_state_dict(state["optimizers"][name])
        learner.unconditional.optimizer.load_state_dict(state["unconditional_optimizer"])
        learner.generator.set_state(state["generator"])
        self.lengths.load_state_dict(state["lengths"])
        restore_numpy_state(self.rng, state["rng"])

    def save_model(self, path: Path) -> None:
        save_checkpoint(path, self.model, {SEARCH_KEY: self.algorithm.name})

    def load_model(self, path: Path) -> None:
        load_checkpoint(path, self.model, {SEARCH_KEY: self.algorithm.name})

    def model_weights(self) -> dict[str, torch.Tensor]:
        return {name: tensor.detach().cpu() for name, tensor in self.model.state_dict().items()}

    def load_model_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(weights)
