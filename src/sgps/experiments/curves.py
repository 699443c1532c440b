"""Learning curves of a comparison: outstanding training problems against effort (paper, Figure 3).

Each seed's curve is a step function, "outstanding after x expansions": the value of
the last batch logged at or before x. Seeds log at different x, so every seed's curve
is read at the union of all their x (the common grid), and the mean, minimum and
maximum over seeds are taken there. A seed that stopped earlier (every problem solved,
or a limit reached) keeps its last value to the end of the grid. The same is done
against wall-clock hours. Runs still training get bands of their own, drawn dashed in
their algorithm's colour and named "ALGORITHM (in progress)" in curves.csv.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sgps.experiments.results import Curve, RunResult
from sgps.fileio import atomic_write_bytes, atomic_write_text

AXES = {"expansions": "cumulative training expansions", "hours": "wall-clock hours"}


@dataclass(frozen=True)
class Band:
    """The mean and min-max band over seeds of one algorithm's curves on one axis."""

    variant: str
    axis: str  # "expansions" or "hours"
    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    seeds: int
    in_progress: bool = False  # the curves so far of runs still training


#: How curves.csv names the band of runs still training.
IN_PROGRESS = " (in progress)"


def step_at(xs: np.ndarray, ys: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The step curve through (xs, ys), xs ascending from xs[0] <= grid[0], read at every grid point."""
    return ys[np.searchsorted(xs, grid, side="right") - 1]


def curve_bands(results: Sequence[RunResult], variants: Sequence[str], *, in_progress: bool = False) -> list[Band]:
    """One band per variant with curves, for each axis (`in_progress`: of runs still training)."""
    bands = []
    for variant in variants:
        curves = [r.curve for r in results if r.spec.variant == variant and r.curve is not None]
        if not curves:
            continue
        for axis in AXES:
            xs = [_x(curve, axis) for curve in curves]
            grid = np.unique(np.concatenate(xs))
            values = np.stack([step_at(x, curve.outstanding, grid) for x, curve in zip(xs, curves, strict=True)])
            bands.append(Band(variant, axis, grid, values.mean(axis=0), values.min(axis=0), values.max(axis=0),
                              len(curves), in_progress))  # fmt: skip
    return bands


def _x(curve: Curve, axis: str) -> np.ndarray:
    return curve.expansions if axis == "expansions" else curve.seconds / 3600.0


def write_curves_csv(path: Path, bands: Sequence[Band]) -> None:
    """The plotted numbers: axis, algorithm, x, mean, min, max, seeds."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["axis", "algorithm", "x", "mean", "min", "max", "seeds"])
    for band in bands:
        for x, mean, low, high in zip(band.x, band.mean, band.low, band.high, strict=True):
            x_text = str(int(x)) if band.axis == "expansions" else f"{x:.6f}"
            name = band.variant + (IN_PROGRESS if band.in_progress else "")
            writer.writerow([band.axis, name, x_text, f"{mean:.4f}", int(low), int(high), band.seeds])
    atomic_write_text(path, buffer.getvalue())


def write_curves_png(path: Path, bands: Sequence[Band], label: Callable[[str], str], *, search_time_only: bool) -> None:
    """Two panels, against expansions and against hours: a line per algorithm, its min-max band shaded."""
    import matplotlib as mpl  # here, not at the top: every `sgps` command would pay a third of a second for it
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 4.8), dpi=100)
    panels = dict(zip(AXES, figure.subplots(1, 2), strict=True))
    colours = mpl.colormaps["tab10"]
    variants = list(dict.fromkeys(band.variant for band in bands))
    for band in bands:
        axis = panels[band.axis]
        colour = colours(variants.index(band.variant) % 10)
        seeds = f"{band.seeds} seed{'s' if band.seeds > 1 else ''}"
        text = f"{label(band.variant)} ({seeds}{', in progress' if band.in_progress else ''})"
        style = "--" if band.in_progress else "-"
        axis.step(band.x, band.mean, where="post", color=colour, linestyle=style, label=text)
        axis.fill_between(band.x, band.low, band.high, step="post", color=colour, alpha=0.2, linewidth=0)
    # Headroom above the largest count: a curve that never leaves "all outstanding" must not
    # be drawn on the frame, where it cannot be seen.
    top = max((float(np.max(band.high)) for band in bands if len(band.high)), default=1.0)
    for name, axis in panels.items():
        suffix = " (search time only)" if name == "hours" and search_time_only else ""
        axis.set_xlabel(AXES[name] + suffix)
        axis.set_ylabel("outstanding training problems")
        axis.set_ylim(0, max(top, 1.0) * 1.08)
        axis.set_xlim(left=0)
        axis.grid(alpha=0.3)
    if bands:
        panels["expansions"].legend(loc="best", fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    atomic_write_bytes(path, buffer.getvalue())
