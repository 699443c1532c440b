"""Convolutional trunks and heads on one-hot grid observations (spec/algorithms.md 2.1).

`set_channels_last(True)` makes CPU trunks compute in the channels-last (NHWC) memory
layout, which oneDNN's convolutions run faster on in isolation (about 1.6x for a
32-channel trunk at batch 32 here). Inside search it gained 0.78-1.41x, inconsistently
across domains, with this VM's noise at about ±15% (`benchmarks/throughput.py --layouts
nchw,channels-last`, docs/subgoals.md "Cost per expansion"), so the default stays
PyTorch's NCHW. NCHW also keeps runs bit-identical to those of earlier versions. Both
layouts give the same outputs up to float rounding (about 1e-7); the weights keep
PyTorch's layout either way, so checkpoints are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

_channels_last_on_cpu = False


def set_channels_last(enabled: bool) -> bool:
    """Compute CPU trunks in channels-last layout or in NCHW (the default); returns the previous setting."""
    global _channels_last_on_cpu
    previous, _channels_last_on_cpu = _channels_last_on_cpu, enabled
    return previous


class ResidualBlock(nn.Module):
    """conv 3x3, ReLU, conv 3x3, add the input, ReLU (optional batch norm after each conv)."""

    def __init__(self, channels: int, batch_norm: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=not batch_norm)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=not batch_norm)
        self.norm1 = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()
        self.norm2 = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm1(self.conv1(x)))
        return torch.relu(x + self.norm2(self.conv2(y)))


class ResNetTrunk(nn.Module):
    """Stem (conv 3x3 to `channels`, ReLU) then `blocks` residual blocks; keeps H x W."""

    def __init__(self, in_channels: int, channels: int, blocks: int, batch_norm: bool = False) -> None:
        super().__init__()
        self.stem = nn.Conv2d(in_channels, channels, 3, padding=1, bias=not batch_norm)
        self.stem_norm = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()
        self.blocks = nn.Sequential(*(ResidualBlock(channels, batch_norm) for _ in range(blocks)))
        self.out_channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _channels_last_on_cpu and x.device.type == "cpu":
            x = x.contiguous(memory_format=torch.channels_last)
        return self.blocks(torch.relu(self.stem_norm(self.stem(x))))


class ReducedHead(nn.Module):
    """1x1 conv to `reduce` channels, flatten, then an MLP (ReLU between layers, none at the end)."""

    def __init__(self, in_channels: int, height: int, width: int, hidden: Sequence[int], out: int, reduce: int = 2):
        super().__init__()
        self.reduce = nn.Conv2d(in_channels, reduce, 1)
        layers: list[nn.Module] = []
        size = reduce * height * width
        for units in hidden:
            layers += [nn.Linear(size, units), nn.ReLU()]
            size = units
        layers.append(nn.Linear(size, out))
        self.mlp = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.flatten(self.reduce(features), 1))
