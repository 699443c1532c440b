"""Are π^SG's rectified features alive? The share of π_hi's and π_low's reduced features above zero.

Variant F (`subgoal.conditioning = "code-vector"`) reduces each trunk's output to 2 channels
with a 1x1 convolution, and the reference follows it with a ReLU (`subgoal.reduce_activation
= "relu"`, which runs started before the option keep). Once both channels are negative at
every cell of every state, the network's output no longer depends on the state and no
gradient reaches its trunk or its reduction again: it is dead for the rest of the run
(docs/subgoals.md, "Dead features"). For each weights file of a run (``untrained``,
``latest``, ``best`` or files; see benchmarks/search_progress.py) this prints, per network,
over the states of `--walk`-step random walks from the first `--count` levels of
`--problems` (the start states included):

- ``alive``: the share of (state, channel, cell) whose reduced feature is above zero;
- ``dead_states``: the share of states whose features are all zero (π_hi or π_low reads
  its code alone there);
- ``largest``: each channel's largest pre-activation over those states (both below zero:
  dead on every state measured).

With ``reduce_activation = "none"`` nothing is rectified; the figures are then those the ReLU
would see. Usage::

    python benchmarks/dead_features.py RUN --problems train.txt --count 64 --weights untrained latest
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch

from search_progress import method_with_weights, updates_of, write_rows
from sgps.domains import read_levels
from sgps.training.config import load_run_config

#: The seed of the random walks (the same states for every weights file).
WALK_SEED = 0

#: The π^SG networks that reduce their features to 2 channels in variant F.
NETWORKS = ("high", "low")


def walk_states(domain: Any, starts: list[Any], steps: int, rng: np.random.Generator) -> list[Any]:
    """The states of a uniform random walk of `steps` actions from each of `starts`, the start included;
    a walk stops early at a goal or a dead end (no state differs from the current one)."""
    states = []
    for state in starts:
        states.append(state)
        for _ in range(steps):
            if domain.is_goal(state):
                break
            moves = [child for child in domain.successors(state) if domain.key(child) != domain.key(state)]
            if not moves:
                break
            state = moves[int(rng.integers(len(moves)))]
            states.append(state)
    return states


@torch.no_grad()
def feature_figures(network: torch.nn.Module, observations: torch.Tensor) -> dict[str, Any]:
    """`alive`, `dead_states` and the per-channel `largest` pre-activation of `network`'s reduction."""
    reduced = network.reduce(network.trunk(observations))
    above = reduced > 0
    return {"alive": float(above.double().mean()),
            "dead_states": float((~above.flatten(1).any(dim=1)).double().mean()),
            "largest": [float(value) for value in reduced.amax(dim=(0, 2, 3))]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a π^SG run folder with code-vector conditioning")
    parser.add_argument(
        "--weights", nargs="+", default=["untrained", "latest"], help="untrained, latest, best or files"
    )
    parser.add_argument("--problems", type=Path, required=True)
    parser.add_argument("--count", type=int, default=64)
    parser.add_argument("--walk", type=int, default=20, help="random-walk steps from each level's start")
    parser.add_argument("--csv", type=Path, help="also write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = load_run_config(args.run / "config.toml")
    if config.subgoal.conditioning != "code-vector":
        parser.error(f"{args.run}: conditioning is {config.subgoal.conditioning!r}; "
                     "only code-vector reduces to 2 channels")  # fmt: skip
    levels = read_levels(args.problems, config.run.domain)
    starts = levels.states()[: args.count]
    states = walk_states(levels.domain, starts, args.walk, np.random.default_rng(WALK_SEED))
    observations = torch.as_tensor(levels.domain.observe(states)).float()
    print(f"{args.problems}: {len(states)} states ({len(starts)} levels, walks of {args.walk}); "
          f"reduce_activation = {config.subgoal.reduce_activation!r}")  # fmt: skip
    print(f"{'weights':40s} {'network':7s} {'alive':>6s} {'dead_states':>11s}  largest pre-activation per channel")
    rows = []
    for label in args.weights:
        model = method_with_weights(args.run, label, levels.domain, starts[0], config).learner.model.eval()
        for name in NETWORKS:
            found = feature_figures(getattr(model, name), observations)
            largest = " ".join(f"{value:+.3f}" for value in found["largest"])
            print(f"{Path(label).name[-40:]:40s} {name:7s} {found['alive']:6.3f} "
                  f"{found['dead_states']:11.3f}  {largest}")  # fmt: skip
            updates = updates_of(label)
            rows.append({"weights": Path(label).name, "updates": "" if updates is None else updates,
                         "network": name, "states": len(states), "alive": f"{found['alive']:.4f}",
                         "dead_states": f"{found['dead_states']:.4f}", "largest": largest})  # fmt: skip
    if args.csv is not None and rows:
        write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
