"""The flat baselines' networks: policy + heuristic (PHS*), policy only (LevinTS), heuristic only (WA*)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from sgps.models.resnet import ReducedHead, ResNetTrunk


@dataclass(frozen=True)
class FlatNetworkConfig:
    """Architecture of a flat network; `policy` / `heuristic` choose the heads."""

    observation_shape: tuple[int, int, int]  # (C, H, W)
    num_actions: int
    channels: int = 128
    blocks: int = 8
    batch_norm: bool = False
    policy: bool = True
    heuristic: bool = True
    heuristic_hidden: int = 128

    def __post_init__(self) -> None:
        if not (self.policy or self.heuristic):
            raise ValueError("a flat network needs a policy head, a heuristic head, or both")
        if self.channels < 1 or self.blocks < 0:
            raise ValueError("channels must be positive and blocks non-negative")


class FlatNetwork(nn.Module):
    """ResNet trunk with a policy head (|A| logits) and/or a heuristic head (one value)."""

    def __init__(self, config: FlatNetworkConfig) -> None:
        super().__init__()
        self.config = config
        channels, height, width = config.observation_shape
        self.trunk = ResNetTrunk(channels, config.channels, config.blocks, config.batch_norm)
        self.policy_head = (
            ReducedHead(config.channels, height, width, [], config.num_actions) if config.policy else None
        )
        self.heuristic_head = (
            ReducedHead(config.channels, height, width, [config.heuristic_hidden], 1) if config.heuristic else None
        )

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(policy logits [B, |A|] or None, heuristic [B] or None)."""
        features = self.trunk(observations)
        logits = self.policy_head(features) if self.policy_head is not None else None
        heuristic = self.heuristic_head(features).squeeze(1) if self.heuristic_head is not None else None
        return logits, heuristic
