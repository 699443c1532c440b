"""Offline training of HIPS-ε's networks from solution trajectories (spec/algorithms.md 8.2).

The components are trained in sequence, as HIPS does:

1. **Segmentation and π_low.** A warm start trains π_low by behaviour cloning on
   random segmentations (segment lengths uniform in 1..H). Then each round samples a
   segmentation of every trajectory from the detector, trains the detector by
   REINFORCE (reward of a segment: minus π_low's negative log-likelihood of its
   actions, minus α_seg; discount 0.99; a learned value baseline with the smooth-L1
   loss; gradient norm clipped at 0.5), and trains π_low by behaviour cloning on the
   sampled segments, each action conditioned on its segment's end state.
2. **The VQ-VAE** on (state, segment end) pairs of the detector's greedy segmentation:
   every state of a segment paired with the segment's end.
3. **The prior**: code logits with the VQ-VAE's code of each such pair as target, and
   primitive-action logits with the state's action as target (cross-entropy both).
4. **The distance heuristic**: the number of steps left to the goal (squared error).

Shuffles and samples use one generator seeded with the run seed, so the same dataset,
settings and seed give the same networks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from sgps.models.hips import CellClasses, HipsModel
from sgps.training.methods.hips.dataset import Dataset


@dataclass(frozen=True)
class HipsSettings:
    """HIPS-ε's network sizes and offline training (the `[hips]` section of a run's config)."""

    channels: int = 64
    blocks: int = 2
    codebook_size: int = 64  # K (spec 8.2)
    code_dim: int = 128
    vq_channels: int = 64
    vq_blocks: int = 2
    horizon: int = 10  # H
    segment_penalty: float = 0.1  # α_seg
    discount: float = 0.99
    learning_rate: float = 1e-3
    minibatch: int = 64
    warm_start_epochs: int = 4  # π_low on random segmentations
    segmentation_rounds: int = 8  # detector (REINFORCE) + π_low rounds
    epochs: int = 20  # VQ-VAE, prior and distance epochs each
    epsilon: float = 1e-3  # the primitive children's share of probability (spec 8.3)
    rollout_steps: int = 0  # π_low rollout cap; 0: 40, or 50 in TSP (spec 8.3)

    def rollout_cap(self, domain_name: str) -> int:
        if self.rollout_steps:
            return self.rollout_steps
        return 50 if domain_name == "tsp" else 40


#: Trajectories per REINFORCE update of the detector.
TRAJECTORIES_PER_UPDATE = 16
#: One log line per phase and epoch: (phase, epoch, mean loss, extra columns).
Report = Callable[[str, int, float, dict[str, float]], None]


@dataclass
class _Trajectories:
    """Observations (uint8, as the networks' cell classes) and actions of every trajectory."""

    observations: list[torch.Tensor]  # [T_i + 1, V, H, W]
    actions: list[torch.Tensor]  # [T_i] int64


def prepare(dataset: Dataset, cells: CellClasses) -> _Trajectories:
    """Encode every state of every trajectory once, as `cells`' classes."""
    observations, actions = [], []
    for trajectory in dataset.trajectories:
        observed = torch.from_numpy(dataset.domain.observe(list(trajectory.states)))
        observations.append(cells.encode(observed).to(torch.uint8))
        actions.append(torch.tensor(trajectory.actions, dtype=torch.int64))
    return _Trajectories(observations, actions)


class HipsLearner:
    """Trains a `HipsModel` from a dataset's trajectories, phase by phase."""

    def __init__(self, model: HipsModel, settings: HipsSettings, seed: int, device: torch.device) -> None:
        self.model = model
        self.settings = settings
        self.device = device
        self.generator = torch.Generator().manual_seed(seed)

    def train(self, dataset: Dataset, report: Report) -> None:
        data = prepare(dataset, self.model.cells)
        s = self.settings
        low = self._optimizer(self.model.low)
        for epoch in range(s.warm_start_epochs):
            segments = [self._random_segments(len(a)) for a in data.actions]
            report("warm start", epoch, self._clone_low(data, segments, low), {})
        detector = self._optimizer(self.model.detector)
        for round_number in range(s.segmentation_rounds):
            segments: list[list[tuple[int, int]]] = [[] for _ in data.actions]
            detector_losses = []
            for which in self._minibatches(len(data.actions), TRAJECTORIES_PER_UPDATE):
                sampled, loss = self._reinforce(data, which, detector)
                detector_losses.append(loss)
                for k, spans in zip(which, sampled, strict=True):
                    segments[k] = spans
            low_loss = self._clone_low(data, segments, low)
            mean_length = sum(len(a) for a in data.actions) / max(sum(len(spans) for spans in segments), 1)
            report("segmentation", round_number, low_loss,
                   {"detector_loss": float(np.mean(detector_losses)), "segment": mean_length})  # fmt: skip
        segments = self._segment_greedily(data)
        pairs = _pairs(data, segments)
        vq = self._optimizer(self.model.generator)
        for epoch in range(s.epochs):
            report("vq-vae", epoch, self._train_generator(data, pairs, vq), {})
        codes = self._codes(data, pairs)
        prior = self._optimizer(self.model.prior)
        for epoch in range(s.epochs):
            report("prior", epoch, self._train_prior(data, pairs, codes, prior), {})
        distance = self._optimizer(self.model.distance)
        for epoch in range(s.epochs):
            report("distance", epoch, self._train_distance(data, distance), {})
        self.model.eval()

    # -- segmentation -------------------------------------------------------------------

    def _random_segments(self, length: int) -> list[tuple[int, int]]:
        segments, t = [], 0
        while t < length:
            span = int(torch.randint(1, min(self.settings.horizon, length - t) + 1, (1,), generator=self.generator))
            segments.append((t, t + span))
            t += span
        return segments

    def _detector_step(self, data: _Trajectories, which: list[int], starts: list[int]) -> tuple[torch.Tensor, ...]:
        """Detector logits (masked past each trajectory's end) and values at the given starts."""
        horizon = self.settings.horizon
        states, ahead, masks = [], [], []
        for k, t in zip(which, starts, strict=True):
            observations = data.observations[k]
            last = len(observations) - 1
            index = [min(t + i, last) for i in range(1, horizon + 1)]
            states.append(observations[t])
            ahead.append(observations[index])
            masks.append(torch.tensor([t + i <= last for i in range(1, horizon + 1)]))
        logits, values = self.model.detector(self._float(torch.stack(states)), self._float(torch.stack(ahead)))
        mask = torch.stack(masks).to(self.device)
        return logits.masked_fill(~mask, float("-inf")), values

    def _reinforce(
        self, data: _Trajectories, which: list[int], optimizer: torch.optim.Optimizer
    ) -> tuple[list[list[tuple[int, int]]], float]:
        """Sample segmentations of trajectories `which`, one REINFORCE step of the detector; (segments, loss)."""
        s = self.settings
        self.model.train()
        count = len(which)
        segments: list[list[tuple[int, int]]] = [[] for _ in range(count)]
        log_probs: list[list[torch.Tensor]] = [[] for _ in range(count)]
        values: list[list[torch.Tensor]] = [[] for _ in range(count)]
        starts = [0] * count
        active = [k for k in range(count) if len(data.actions[which[k]]) > 0]
        while active:
            logits, value = self._detector_step(data, [which[k] for k in active], [starts[k] for k in active])
            distribution = torch.distributions.Categorical(logits=logits)
            spans = (torch.multinomial(distribution.probs.detach().cpu(), 1, generator=self.generator)
                     .squeeze(1).to(self.device))  # fmt: skip
            chosen = distribution.log_prob(spans)
            for row, k in enumerate(active):
                end = starts[k] + int(spans[row]) + 1
                segments[k].append((starts[k], end))
                log_probs[k].append(chosen[row])
                values[k].append(value[row])
                starts[k] = end
            active = [k for k in active if starts[k] < len(data.actions[which[k]])]
        rewards = self._segment_rewards(data, which, segments)
        policy_terms, value_terms = [], []
        for k in range(count):
            running, returns = 0.0, []
            for reward in reversed(rewards[k]):
                running = reward + s.discount * running
                returns.append(running)
            target = torch.tensor(returns[::-1], device=self.device)
            if len(target):
                value = torch.stack(values[k])
                policy_terms.append(-(torch.stack(log_probs[k]) * (target - value.detach())).sum())
                value_terms.append(F.smooth_l1_loss(value, target, reduction="sum"))
        total = sum(len(r) for r in rewards)
        loss = (torch.stack(policy_terms).sum() + torch.stack(value_terms).sum()) / max(total, 1)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.detector.parameters(), 0.5)
        optimizer.step()
        return segments, loss.item()

    @torch.no_grad()
    def _segment_rewards(
        self, data: _Trajectories, which: list[int], segments: list[list[tuple[int, int]]]
    ) -> list[list[float]]:
        """−(π_low's NLL of each segment's actions given its end state) − α_seg, per segment."""
        self.model.eval()
        rewards: list[list[float]] = []
        for k, spans in zip(which, segments, strict=True):
            if not spans:
                rewards.append([])
                continue
            states, goals, actions, owners = self._segment_rows(data, k, spans)
            nll = F.cross_entropy(self.model.low_logits(states, goals), actions, reduction="none").cpu()
            per_segment = torch.zeros(len(spans)).index_add_(0, owners, nll)
            rewards.append((-per_segment - self.settings.segment_penalty).tolist())
        self.model.train()
        return rewards

    def _segment_rows(
        self, data: _Trajectories, k: int, spans: Sequence[tuple[int, int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(states, segment-end goals, actions, segment index) of every step of trajectory k's segments."""
        steps = [(t, end, j) for j, (start, end) in enumerate(spans) for t in range(start, end)]
        observations = data.observations[k]
        index = torch.tensor([t for t, _, _ in steps], dtype=torch.int64)
        goals = torch.tensor([end for _, end, _ in steps], dtype=torch.int64)
        owners = torch.tensor([j for _, _, j in steps], dtype=torch.int64)
        return (self._float(observations[index]), self._float(observations[goals]),
                data.actions[k][index].to(self.device), owners)  # fmt: skip

    @torch.no_grad()
    def _segment_greedily(self, data: _Trajectories) -> list[list[tuple[int, int]]]:
        """Each trajectory cut at the detector's most likely segment ends."""
        self.model.eval()
        segments: list[list[tuple[int, int]]] = [[] for _ in data.actions]
        starts = [0] * len(data.actions)
        active = [k for k in range(len(data.actions)) if len(data.actions[k]) > 0]
        while active:
            logits, _ = self._detector_step(data, active, [starts[k] for k in active])
            for row, k in enumerate(active):
                end = starts[k] + int(logits[row].argmax()) + 1
                segments[k].append((starts[k], end))
                starts[k] = end
            active = [k for k in active if starts[k] < len(data.actions[k])]
        return segments

    def _clone_low(self, data: _Trajectories, segments: list[list[tuple[int, int]]], optimizer) -> float:
        """One epoch of behaviour cloning of π_low on every step of `segments`; the mean loss."""
        self.model.train()
        pairs = _pairs(data, segments)
        losses = []
        for rows in self._minibatches(len(pairs.trajectory)):
            states, goals = self._pair_tensors(data, pairs, rows)
            actions = self._pair_actions(data, pairs, rows)
            loss = F.cross_entropy(self.model.low_logits(states, goals), actions)
            losses.append(self._step(optimizer, loss))
        return float(np.mean(losses))

    # -- generator, prior, distance ------------------------------------------------------------

    def _train_generator(self, data: _Trajectories, pairs: _Pairs, optimizer) -> float:
        self.model.train()
        losses = []
        for rows in self._minibatches(len(pairs.trajectory)):
            states, goals = self._pair_tensors(data, pairs, rows)
            losses.append(self._step(optimizer, self.model.generator.loss(states, goals)))
        return float(np.mean(losses))

    @torch.no_grad()
    def _codes(self, data: _Trajectories, pairs: _Pairs) -> torch.Tensor:
        """The VQ-VAE's code of every pair (the prior's code targets)."""
        self.model.eval()
        codes = []
        for start in range(0, len(pairs.trajectory), 256):
            rows = list(range(start, min(start + 256, len(pairs.trajectory))))
            codes.append(self.model.generator.code(*self._pair_tensors(data, pairs, rows)))
        return torch.cat(codes)

    def _train_prior(self, data: _Trajectories, pairs: _Pairs, codes: torch.Tensor, optimizer) -> float:
        self.model.train()
        losses = []
        for rows in self._minibatches(len(pairs.trajectory)):
            states, _ = self._pair_tensors(data, pairs, rows)
            actions = self._pair_actions(data, pairs, rows)
            code_logits, action_logits = self.model.prior(states)
            loss = F.cross_entropy(code_logits, codes[rows]) + F.cross_entropy(action_logits, actions)
            losses.append(self._step(optimizer, loss))
        return float(np.mean(losses))

    def _train_distance(self, data: _Trajectories, optimizer) -> float:
        self.model.train()
        index = [(k, t) for k, observations in enumerate(data.observations) for t in range(len(observations))]
        losses = []
        for rows in self._minibatches(len(index)):
            states = self._float(torch.stack([data.observations[index[r][0]][index[r][1]] for r in rows]))
            remaining = torch.tensor([len(data.actions[index[r][0]]) - index[r][1] for r in rows],
                                     dtype=torch.float32, device=self.device)  # fmt: skip
            losses.append(self._step(optimizer, F.mse_loss(self.model.remaining(states), remaining)))
        return float(np.mean(losses))

    # -- helpers -------------------------------------------------------------------------------

    def _optimizer(self, module: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(module.parameters(), lr=self.settings.learning_rate)

    def _step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> float:
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    def _minibatches(self, count: int, size: int | None = None) -> Iterator[list[int]]:
        order = torch.randperm(count, generator=self.generator).tolist()
        size = size or self.settings.minibatch
        for start in range(0, count, size):
            yield order[start : start + size]

    def _float(self, observations: torch.Tensor) -> torch.Tensor:
        return observations.to(self.device, torch.float32)

    def _pair_actions(self, data: _Trajectories, pairs: _Pairs, rows: Sequence[int]) -> torch.Tensor:
        return torch.stack([data.actions[pairs.trajectory[r]][pairs.step[r]] for r in rows]).to(self.device)

    def _pair_tensors(self, data: _Trajectories, pairs: _Pairs, rows: Sequence[int]) -> tuple[torch.Tensor, ...]:
        states = torch.stack([data.observations[pairs.trajectory[r]][pairs.step[r]] for r in rows])
        goals = torch.stack([data.observations[pairs.trajectory[r]][pairs.goal[r]] for r in rows])
        return self._float(states), self._float(goals)


@dataclass(frozen=True)
class _Pairs:
    """(trajectory, step, segment end) of every step of a segmentation, as parallel lists."""

    trajectory: list[int]
    step: list[int]
    goal: list[int]


def _pairs(data: _Trajectories, segments: list[list[tuple[int, int]]]) -> _Pairs:
    trajectory, step, goal = [], [], []
    for k, spans in enumerate(segments):
        for start, end in spans:
            for t in range(start, end):
                trajectory.append(k)
                step.append(t)
                goal.append(end)
    return _Pairs(trajectory, step, goal)
