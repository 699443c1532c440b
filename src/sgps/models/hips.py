"""HIPS-ε's networks (Kujanpää et al. 2023; spec/algorithms.md 8.2), built from the project's blocks.

- `SegmentDetector`: reads the current state beside each of the next H states and
  scores each as the end of the current segment (categorical over the H), with a
  value head, the baseline of its REINFORCE training.
- the low-level policy π_low(a | s, s_g): a `FlatNetwork` (policy head only) on the
  state and the subgoal stacked on the channels.
- the subgoal generator: the project's `VQVAE` (conditioned on the current state),
  with K = 64 codes by default.
- `HipsPrior`: code logits (which subgoal to propose) and primitive-action logits
  (behaviour cloning) on the state.
- the distance heuristic: a `FlatNetwork` with a heuristic head only, regressing the
  number of low-level steps left.

HIPS-ε's subgoals are concrete states, so the VQ-VAE reconstructs whole observations.
Some domains leave cells with no channel set (the floor of Sokoban, Box-World), which a
per-cell softmax cannot produce; every HIPS network therefore reads observations with
one channel added, "no channel set" (`with_empty_channel`), which makes every cell
categorical: a decoded subgoal is the argmax channel of each cell (`discretise`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from sgps.models.flat import FlatNetwork, FlatNetworkConfig
from sgps.models.resnet import ReducedHead, ResNetTrunk
from sgps.models.vqvae import VQVAE


@dataclass(frozen=True)
class HipsConfig:
    """Architecture of HIPS-ε's five networks (spec 8.2 defaults: K = 64 codes of dimension 128, H = 10)."""

    observation_shape: tuple[int, int, int]  # (C, H, W) of the domain's observations
    num_actions: int
    channels: int = 64
    blocks: int = 2
    codebook_size: int = 64
    code_dim: int = 128
    vq_channels: int = 64
    vq_blocks: int = 2
    horizon: int = 10  # H: how far ahead the detector may end a segment

    def __post_init__(self) -> None:
        if self.codebook_size < 1 or self.code_dim < 1 or self.horizon < 1:
            raise ValueError("codebook_size, code_dim and horizon must be at least 1")
        if self.channels < 1 or self.blocks < 0 or self.vq_channels < 1 or self.vq_blocks < 0:
            raise ValueError("channels must be positive and blocks non-negative")

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """Observation shape with the "no channel set" channel added."""
        c, h, w = self.observation_shape
        return (c + 1, h, w)


def with_empty_channel(observations: torch.Tensor) -> torch.Tensor:
    """[B, C, H, W] one-hot-or-empty cells -> [B, C + 1, H, W] with channel C set where no other is."""
    empty = (1.0 - observations.sum(dim=1, keepdim=True)).clamp(min=0.0)
    return torch.cat([observations, empty], dim=1)


def discretise(logits: torch.Tensor) -> torch.Tensor:
    """Decoder logits [..., C + 1, H, W] -> the concrete observation [..., C, H, W] (argmax per cell)."""
    channels = logits.shape[-3]
    one_hot = torch.nn.functional.one_hot(logits.argmax(dim=-3), channels).movedim(-1, -3)
    return one_hot[..., :-1, :, :].to(logits.dtype)


class SegmentDetector(nn.Module):
    """Scores each of the next H states as the end of the segment starting at the current state."""

    def __init__(self, input_shape: tuple[int, int, int], channels: int, blocks: int) -> None:
        super().__init__()
        c, h, w = input_shape
        self.trunk = ResNetTrunk(2 * c, channels, blocks)
        self.score = ReducedHead(channels, h, w, [], 1)
        self.value = nn.Linear(channels, 1)

    def forward(self, states: torch.Tensor, ahead: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits [B, H], value [B]) for states [B, C, h, w] and the next H states ahead [B, H, C, h, w]."""
        batch, horizon = ahead.shape[:2]
        pairs = torch.cat([states.unsqueeze(1).expand_as(ahead), ahead], dim=2).flatten(0, 1)
        features = self.trunk(pairs)
        logits = self.score(features).view(batch, horizon)
        pooled = features.mean(dim=(2, 3)).view(batch, horizon, -1).mean(dim=1)
        return logits, self.value(pooled).squeeze(1)


class HipsPrior(nn.Module):
    """p(code | s) over the K codes and p(a | s) over the primitive actions, from one trunk."""

    def __init__(self, input_shape: tuple[int, int, int], channels: int, blocks: int, codes: int, actions: int):
        super().__init__()
        c, h, w = input_shape
        self.trunk = ResNetTrunk(c, channels, blocks)
        self.codes = ReducedHead(channels, h, w, [], codes)
        self.actions = ReducedHead(channels, h, w, [], actions)

    def forward(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(code logits [B, K], action logits [B, |A|])."""
        features = self.trunk(states)
        return self.codes(features), self.actions(features)


class HipsModel(nn.Module):
    """The five HIPS-ε networks, saved and loaded together as one checkpoint."""

    def __init__(self, config: HipsConfig) -> None:
        super().__init__()
        self.config = config
        c, h, w = config.input_shape
        self.detector = SegmentDetector(config.input_shape, config.channels, config.blocks)
        self.low = FlatNetwork(
            FlatNetworkConfig((2 * c, h, w), config.num_actions, config.channels, config.blocks, heuristic=False)
        )
        self.generator = VQVAE(config.input_shape, config.codebook_size, config.code_dim, config.vq_channels,
                               config.vq_blocks)  # fmt: skip
        self.prior = HipsPrior(config.input_shape, config.channels, config.blocks, config.codebook_size,
                               config.num_actions)  # fmt: skip
        self.distance = FlatNetwork(
            FlatNetworkConfig(config.input_shape, config.num_actions, config.channels, config.blocks, policy=False)
        )

    def low_logits(self, states: torch.Tensor, subgoals: torch.Tensor) -> torch.Tensor:
        """π_low's action logits [B, |A|] for states and subgoals [B, C + 1, H, W]."""
        logits, _ = self.low(torch.cat([states, subgoals], dim=1))
        assert logits is not None
        return logits

    def remaining(self, states: torch.Tensor) -> torch.Tensor:
        """The predicted number of low-level steps to the goal [B]."""
        _, distance = self.distance(states)
        assert distance is not None
        return distance
