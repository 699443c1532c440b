"""Where π^SG's decoded subgoals put the agent, before anything is solved.

Until its first solve π^SG learns from failed trees only: the VQ-VAE learns to reconstruct
a state some moves ahead of another (pairs drawn from the trees' clusters, docs/subgoals.md),
and π_low learns to walk there. The search mixes the K codes' π_low (π_hi is still
untrained, so each code weighs 1/K). That mixture can guide the search only if the K
decoded subgoals differ, each naming somewhere definite to go. This script measures it on
the first `--count` levels of `--problems`, for each weights file given (saved from one run,
as `benchmarks/search_progress.py` takes them), from the agent channel of each decoded
subgoal (`sgps subgoals` draws the same decoding):

- ``peak``: the largest probability the subgoal gives the agent in any one cell (1: a
  sharp target; 1/cells: none);
- ``distance``: how many moves (Manhattan distance) that most likely cell lies from the agent;
- ``spread``: over how many cells the agent's probability is spread (the exponential of the
  entropy of the agent channel, normalised over the cells);
- ``codes_differ``: the mean total-variation distance between the K codes' normalised agent
  distributions (0: every code proposes the same place; 1: disjoint places);
- ``mass``: the agent channel's total probability (1: one agent);
- ``low_differ``: the mean total-variation distance between the K codes' π_low action
  distributions in the level's start state (0: every code walks the same way);
- ``low_peak`` / ``mixed_peak``: the most likely action's probability under each code's
  π_low (mean over codes) and under the policy the search follows, π^SG mixed as the run's
  training searches mix it (α_train, its mixture); ``unconditional_peak``: under π_unc.
  A sharp π_low whose codes disagree, mixed geometrically under a uniform π_hi, gives a
  flat π^SG: the codes' preferences cancel.

Usage::

    python benchmarks/subgoal_targets.py RUN --problems hard.txt --count 16 --weights W1.safetensors W2.safetensors

The numbers depend only on the weights and the levels, so they are the same on any machine.
``--csv OUT.csv`` also writes the rows, with the learning updates each weights file had seen
where its name says so (``...-updates-N.safetensors``).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import re
from pathlib import Path

import numpy as np
import torch

from sgps.domains import read_levels
from sgps.models.subgoal import mix
from sgps.runs.run import Run
from sgps.runs.runner import trained_subgoal_model
from sgps.training.methods.subgoal.view import decode_subgoals

#: The agent's channel in the observations of the domains this measures (BoulderDash: code 0).
AGENT_CHANNEL = 0
COLUMNS = ("weights", "updates", "levels", "peak", "distance", "spread", "codes_differ", "mass", "low_differ",
           "low_peak", "mixed_peak", "unconditional_peak")  # fmt: skip


def measure(run: Path, problems: Path, count: int, weights: str) -> dict[str, float]:
    """The means over `count` levels (and their K codes) of what the module docstring lists."""
    opened = Run.open(run)
    levels = read_levels(problems, opened.domain).levels[:count]
    model, settings = trained_subgoal_model(opened, levels[0].state, weights), opened.config.subgoal
    peak, distance, spread, differ, mass = [], [], [], [], []
    low_differ, low_peak, mixed_peak, unconditional_peak = [], [], [], []
    for level in levels:
        view = decode_subgoals(opened.domain, model, level.state)
        with torch.inference_mode():
            log_high, log_low, log_unconditional, _ = model.components(torch.from_numpy(view.observation[None]))
            mixed = mix(log_high, log_low, log_unconditional, settings.alpha_train, settings.mixture)[0].exp()
        low = log_low[0].exp().numpy()
        low_differ += [0.5 * float(np.abs(a - b).sum()) for a, b in itertools.combinations(low, 2)]
        low_peak.append(float(low.max(axis=1).mean()))
        mixed_peak.append(float(mixed.max()))
        unconditional_peak.append(float(log_unconditional[0].exp().max()))
        agent_row, agent_col = np.argwhere(view.observation[AGENT_CHANNEL] > 0.5)[0]
        normalised = []
        for subgoal in view.subgoals:
            agent = subgoal[AGENT_CHANNEL]
            row, col = np.unravel_index(agent.argmax(), agent.shape)
            peak.append(float(agent.max()))
            distance.append(abs(int(row) - int(agent_row)) + abs(int(col) - int(agent_col)))
            mass.append(float(agent.sum()))
            share = agent / agent.sum()
            kept = share[share > 0]
            spread.append(float(np.exp(-(kept * np.log(kept)).sum())))
            normalised.append(share)
        differ += [0.5 * float(np.abs(a - b).sum()) for a, b in itertools.combinations(normalised, 2)]
    return {"peak": float(np.mean(peak)), "distance": float(np.mean(distance)), "spread": float(np.mean(spread)),
            "codes_differ": float(np.mean(differ)), "mass": float(np.mean(mass)),
            "low_differ": float(np.mean(low_differ)), "low_peak": float(np.mean(low_peak)),
            "mixed_peak": float(np.mean(mixed_peak)),
            "unconditional_peak": float(np.mean(unconditional_peak))}  # fmt: skip


def updates_of(weights: str) -> str:
    """The learning updates a snapshot's name says it had seen ('' when it does not say)."""
    found = re.search(r"updates-(\d+)", Path(weights).name)
    return found.group(1) if found else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a phs-sg or levin-sg run folder (its configuration builds them)")
    parser.add_argument("--problems", type=Path, required=True)
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--weights", nargs="+", required=True, help="latest, best or weights files of the run")
    parser.add_argument("--csv", type=Path, help="also write the rows here")
    args = parser.parse_args()
    rows = []
    print(f"{'weights':44s} {'updates':>7s} {'peak':>6s} {'distance':>8s} {'spread':>7s} {'differ':>6s} {'mass':>5s} "
          f"{'low_differ':>10s} {'low_peak':>8s} {'mixed_peak':>10s} {'unc_peak':>8s}")  # fmt: skip
    for weights in args.weights:
        found = measure(args.run, args.problems, args.count, weights)
        row = {"weights": weights, "updates": updates_of(weights), "levels": args.count, **found}
        rows.append(row)
        print(f"{Path(weights).name:44s} {row['updates']:>7s} {found['peak']:6.3f} {found['distance']:8.1f} "
              f"{found['spread']:7.1f} {found['codes_differ']:6.2f} {found['mass']:5.2f} {found['low_differ']:10.2f} "
              f"{found['low_peak']:8.3f} {found['mixed_peak']:10.3f} {found['unconditional_peak']:8.3f}",
              flush=True)  # fmt: skip
    if args.csv is not None:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            for row in rows:
                writer.writerow({key: f"{value:.3f}" if isinstance(value, float) else value
                                 for key, value in row.items()})  # fmt: skip


if __name__ == "__main__":
    main()
