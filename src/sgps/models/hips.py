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

HIPS-ε's subgoals are concrete states, so the VQ-VAE reconstructs whole observations,
and a decoded subgoal must be able to equal a real observation cell for cell. Every
HIPS network therefore reads each cell as one of V *cell classes* (`CellClasses`): each
observation channel alone, "no channel set" (the floor of Sokoban, Box-World), and the
multi-channel patterns the domain's observations hold (compact Sokoban's box on a goal
sets the box and the goal channels). The decoder's per-cell softmax is over these
classes, and a decoded subgoal is the argmax class's channels in each cell. Without the
patterns (the first HIPS-ε runs), a box on a goal could never be proposed: an argmax
over single channels cannot set two.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
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
    #: The multi-channel cells of the domain's observations, each as its sorted channels
    #: (`cell_patterns`); recorded in the architecture only when there are some, so that
    #: checkpoints written before the patterns existed still load (and behave as they did).
    cell_patterns: tuple[tuple[int, ...], ...] = field(default=(), metadata={"omit_when_default": True})

    def __post_init__(self) -> None:
        if self.codebook_size < 1 or self.code_dim < 1 or self.horizon < 1:
            raise ValueError("codebook_size, code_dim and horizon must be at least 1")
        if self.channels < 1 or self.blocks < 0 or self.vq_channels < 1 or self.vq_blocks < 0:
            raise ValueError("channels must be positive and blocks non-negative")
        object.__setattr__(self, "cell_patterns", tuple(tuple(int(c) for c in p) for p in self.cell_patterns))
        for pattern in self.cell_patterns:
            in_range = pattern[0] >= 0 and pattern[-1] < self.observation_shape[0] if pattern else False
            if len(pattern) < 2 or list(pattern) != sorted(set(pattern)) or not in_range:
                raise ValueError(f"a cell pattern names two or more distinct observation channels in order, "
                                 f"not {pattern}")  # fmt: skip

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """Observation shape with one channel per cell class (`CellClasses`)."""
        c, h, w = self.observation_shape
        return (c + 1 + len(self.cell_patterns), h, w)


def cell_patterns(observations: Iterable[np.ndarray]) -> tuple[tuple[int, ...], ...]:
    """The distinct multi-channel cells of observations [B, C, H, W], each as its channels, in sorted order."""
    found: set[tuple[int, ...]] = set()
    for batch in observations:
        cells = batch.transpose(0, 2, 3, 1).reshape(-1, batch.shape[1]) != 0
        multi = np.unique(cells[cells.sum(axis=1) > 1], axis=0)
        found.update(tuple(int(c) for c in np.flatnonzero(row)) for row in multi)
    return tuple(sorted(found))


class CellClasses(nn.Module):
    """Observation cells as V = C + 1 + P classes: channel c alone (class c), none (class C), pattern p (C + 1 + p).

    `encode` turns observations [B, C, H, W] into the networks' one-hot input
    [B, V, H, W]; `decode` turns per-cell class logits back into the concrete observation
    of the argmax classes. A multi-channel cell that is none of the patterns encodes to
    no class at all (all zeros), so it can be read but never proposed.
    """

    def __init__(self, channels: int, patterns: tuple[tuple[int, ...], ...] = ()) -> None:
        super().__init__()
        self.patterns = patterns
        table = torch.zeros(channels + 1 + len(patterns), channels)
        table[:channels] = torch.eye(channels)
        for row, pattern in enumerate(patterns, start=channels + 1):
            table[row, list(pattern)] = 1.0
        self.register_buffer("table", table, persistent=False)  # the class -> channels of `decode`

    def encode(self, observations: torch.Tensor) -> torch.Tensor:
        """[B, C, H, W] one-hot-or-empty (or pattern) cells -> [B, V, H, W] one-hot classes."""
        set_channels = observations.sum(dim=1, keepdim=True)
        if not self.patterns:  # exactly the encoding of the first runs
            return torch.cat([observations, (1.0 - set_channels).clamp(min=0.0)], dim=1)
        single = observations * (set_channels == 1)
        classes = [single, (set_channels == 0).to(observations.dtype)]
        for pattern in self.patterns:
            matches = (observations[:, list(pattern)].sum(dim=1, keepdim=True) == len(pattern)) & (
                set_channels == len(pattern)
            )
            classes.append(matches.to(observations.dtype))
        return torch.cat(classes, dim=1)

    def decode(self, logits: torch.Tensor) -> torch.Tensor:
        """Per-cell class logits [..., V, H, W] -> the concrete observation [..., C, H, W] of the argmax classes."""
        return self.table.to(logits.dtype)[logits.argmax(dim=-3)].movedim(-1, -3)


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
        self.cells = CellClasses(config.observation_shape[0], config.cell_patterns)
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
