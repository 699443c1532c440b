"""What a trained subgoal generator proposes for a state: the K decoded subgoals and π_hi.

The decoder returns, for each code k, a distribution over the observation channels
in every cell. `SubgoalView.figure` draws the state as the domain renders it, the
state's channel map (the most likely channel per cell, the same view the subgoals
get, so the two compare cell by cell), then each subgoal's channel map titled with
its high-level probability π_hi(k | s) and, when known, the share of the last
training batch's pairs that chose code k, with the cells that differ from the state
outlined. A code no pair chose is "dead": the generator proposes it, but nothing
taught π_low what it means.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from sgps.domains.base import Domain
from sgps.models.subgoal import SubgoalModel

EMPTY = -1  # channel map value of a cell with no channel set


def _pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend, imported at the first picture: it would add about a second to the
    start of every `sgps` process (and every search process) that never draws one."""
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@dataclass(frozen=True)
class SubgoalView:
    """A state, its K decoded subgoals and the high-level policy's probability of each."""

    domain: Domain[Any]
    state: Any
    observation: np.ndarray  # [C, H, W]
    subgoals: np.ndarray  # [K, C, H, W]: per-cell channel probabilities
    probabilities: np.ndarray  # [K]: π_hi(k | s)
    code_counts: tuple[int, ...] | None = None  # pairs per code in the last training batch, when logged

    def usage_line(self) -> str:
        """The last training batch's code use, for the terminal ('' when not logged)."""
        if self.code_counts is None:
            return ""
        total = max(sum(self.code_counts), 1)
        dead = [k for k, count in enumerate(self.code_counts) if count == 0]
        shares = "  ".join(f"code {k}: {100 * count / total:.0f}%" for k, count in enumerate(self.code_counts))
        return f"pairs per code in the last training batch: {shares}" + (f" (dead: {dead})" if dead else "")

    def state_channels(self) -> np.ndarray:
        """[H, W] most likely channel of each cell of the state (EMPTY where no channel is set)."""
        channels = self.observation.argmax(axis=0)
        channels[self.observation.max(axis=0) <= 0] = EMPTY
        return channels

    def subgoal_channels(self) -> np.ndarray:
        """[K, H, W] most likely channel of each cell of each subgoal."""
        return self.subgoals.argmax(axis=1)

    def figure(self, cell: int = 24) -> np.ndarray:
        """An RGB uint8 picture: rendered state, its channel map, and the K subgoals."""
        state_map, goal_maps = self.state_channels(), self.subgoal_channels()
        count = 2 + len(goal_maps)
        height, width = state_map.shape
        size = max(2.0, width * cell / 100.0)
        plt = _pyplot()
        fig, axes = plt.subplots(1, count, figsize=(size * count, size * height / width + 0.8), dpi=100)
        axes[0].imshow(self.domain.render_image(self.state, cell=cell))
        axes[0].set_title("state")
        axes[1].imshow(_colour(state_map))
        axes[1].set_title("state channels")
        for k, (goal_map, axis) in enumerate(zip(goal_maps, axes[2:], strict=True)):
            axis.imshow(_colour(goal_map))
            for row, column in zip(*np.nonzero(goal_map != state_map), strict=True):
                axis.add_patch(plt.Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="red", lw=1.5))
            used = "" if self.code_counts is None else f", {self.code_counts[k]} pairs"
            axis.set_title(f"code {k}: π_hi = {self.probabilities[k]:.3f}{used}")
        for axis in axes:
            axis.set_xticks([])
            axis.set_yticks([])
        used = sorted(set(np.unique(state_map)) | set(np.unique(goal_maps)) - {EMPTY})
        handles = [plt.Rectangle((0, 0), 1, 1, color=_palette(c)) for c in used]
        fig.legend(handles, [f"channel {c}" for c in used], loc="lower center", ncol=min(len(used), 10), fontsize=8)
        fig.tight_layout(rect=(0, 0.08, 1, 1))
        fig.canvas.draw()
        image = np.asarray(fig.canvas.buffer_rgba())[:, :, :3].copy()
        plt.close(fig)
        return image


def decode_subgoals(
    domain: Domain[Any], model: SubgoalModel, state: Any, code_counts: tuple[int, ...] | None = None
) -> SubgoalView:
    """Run the generator and the high-level policy of `model` on one state."""
    device = next(model.parameters()).device
    observation = torch.from_numpy(domain.observe([state])).to(device)
    model.eval()
    with torch.inference_mode():
        subgoals = torch.softmax(model.vqvae.subgoal_logits(observation), dim=2)[0]
        log_high = model.components(observation)[0][0]
    return SubgoalView(
        domain, state, observation[0].cpu().numpy(), subgoals.cpu().numpy(), log_high.exp().cpu().numpy(),
        code_counts,
    )  # fmt: skip


def _palette(channel: int) -> tuple[float, float, float]:
    plt = _pyplot()
    colours = plt.get_cmap("tab20").colors + plt.get_cmap("tab20b").colors
    return colours[channel % len(colours)]


def _colour(channels: np.ndarray) -> np.ndarray:
    image = np.ones((*channels.shape, 3))
    for channel in np.unique(channels):
        if channel != EMPTY:
            image[channels == channel] = _palette(int(channel))
    return image
