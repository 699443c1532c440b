"""Convolutional trunks and heads on one-hot grid observations (spec/algorithms.md 2.1).

CPU trunks compute in the channels-last (NHWC) memory layout, which oneDNN's
convolutions run faster on. With the compute-matched `cpu` preset, PHS*(π^SG) searched
1.09-1.30x faster in lockstep-32 on every domain, flat PHS*(π) about as fast as with
PyTorch's NCHW (0.83-1.47x, within this VM's noise), in 2-4 runs per domain with the
order of the layouts swapped (`benchmarks/throughput.py --layouts nchw,channels-last`),
and π^SG's learning step ran faster too (docs/subgoals.md
"Memory layout"). Both layouts give the same outputs up to float rounding (about 1e-7),
so a run resumed across the change may differ from the earlier version in the last bits;
the weights keep PyTorch's layout either way, so checkpoints are unchanged.
`set_channels_last(False)` restores NCHW.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

_channels_last_on_cpu = True


def trunk_format(device: torch.device) -> torch.memory_format:
    """The memory layout the trunks compute in on `device`: channels-last on a CPU (unless
    `set_channels_last(False)`), NCHW elsewhere (what the GPU runs were measured in)."""
    return torch.channels_last if device.type == "cpu" and _channels_last_on_cpu else torch.contiguous_format


def network_input(observations: np.ndarray, device: torch.device) -> torch.Tensor:
    """A batch of observations [B, C, H, W] on `device`, laid out as the trunks compute.

    The domains lay observations out channels-last (`sgps.domains.base.one_hot`), so on a
    CPU no copy is made here nor in any trunk (π^SG's three trunks used to convert the same
    batch three times: its evaluations are now 1.10-1.24x faster, docs/training.md,
    "Observation layout"). On a GPU the batch is converted once, after the transfer. Only
    speed depends on this: every trunk puts its input in `trunk_format` itself.
    """
    return torch.from_numpy(observations).to(device).contiguous(memory_format=trunk_format(device))


def set_channels_last(enabled: bool) -> bool:
    """Compute CPU trunks in channels-last layout (the default) or in NCHW; returns the previous setting."""
    global _channels_last_on_cpu
    previous, _channels_last_on_cpu = _channels_last_on_cpu, enabled
    return previous


class ResidualBlock(nn.Module):
    """conv 3x3, ReLU, conv 3x3, add the input, ReLU (optional batch norm after each conv).

    The ReLUs and the sum work in place on the convolutions' fresh outputs (which their
    backward passes do not keep): the same values (a sum is exact in either order) with
    fewer new tensors, which made π^SG's CPU evaluations of small batches up to 1.3x
    faster (docs/training.md, "Observation layout").
    """

    def __init__(self, channels: int, batch_norm: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=not batch_norm)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=not batch_norm)
        self.norm1 = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()
        self.norm2 = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(self.conv1(x)).relu_()
        return self.norm2(self.conv2(y)).add_(x).relu_()


class ResNetTrunk(nn.Module):
    """Stem (conv 3x3 to `channels`, ReLU) then `blocks` residual blocks; keeps H x W."""

    def __init__(self, in_channels: int, channels: int, blocks: int, batch_norm: bool = False) -> None:
        super().__init__()
        self.stem = nn.Conv2d(in_channels, channels, 3, padding=1, bias=not batch_norm)
        self.stem_norm = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()
        self.blocks = nn.Sequential(*(ResidualBlock(channels, batch_norm) for _ in range(blocks)))
        self.out_channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=trunk_format(x.device))
        return self.blocks(self.stem_norm(self.stem(x)).relu_())


class ReducedHead(nn.Module):
    """1x1 conv to `reduce` channels, flatten, then an MLP (ReLU between layers, none at the end)."""

    def __init__(self, in_channels: int, height: int, width: int, hidden: Sequence[int], out: int, reduce: int = 2):
        super().__init__()
        self.reduce = nn.Conv2d(in_channels, reduce, 1)
        layers: list[nn.Module] = []
        size = reduce * height * width
        for units in hidden:
            layers += [nn.Linear(size, units), nn.ReLU(inplace=True)]
            size = units
        layers.append(nn.Linear(size, out))
        self.mlp = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.flatten(self.reduce(features), 1))
