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

With ``--inits N`` it also builds N fresh networks of the run's architecture (torch seeds 0 to
N - 1) and prints, per network, the median ``alive`` over them and how many start with a channel
that is below zero on every state (``dead_channel``), under 10% alive (``under_10pc``), or with
no live feature at all (``all_dead``). With ``reduce_activation = "none"`` nothing is rectified;
the figures are then those the ReLU would see. Usage::

    python benchmarks/dead_features.py RUN --problems train.txt --count 64 --weights untrained latest --inits 20
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pair_labels import run_and_levels
from search_progress import method_with_weights, updates_of, write_rows
from sgps.models.subgoal import SubgoalModel, SubgoalModelConfig

#: The seed of the random walks (the same states for every weights file).
WALK_SEED = 0

#: The π^SG networks that reduce their features to 2 channels in variant F.
NETWORKS = ("high", "low")

#: The counts `start_counts` gives.
COUNTS = ("dead_channel", "under_10pc", "all_dead")


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


def initialisations(model_config: SubgoalModelConfig, observations: torch.Tensor, count: int) -> list[dict[str, Any]]:
    """Per network, how the features of `count` fresh initialisations (torch seeds 0 to count - 1) start."""
    figures: dict[str, list[dict[str, Any]]] = {name: [] for name in NETWORKS}
    for seed in range(count):
        torch.manual_seed(seed)
        model = SubgoalModel(model_config).eval()
        for name in NETWORKS:
            figures[name].append(feature_figures(getattr(model, name), observations))
    return [{"network": name, "alive": float(np.median([found["alive"] for found in found_all])),
             **start_counts(found_all)} for name, found_all in figures.items()]  # fmt: skip


def start_counts(figures: list[dict[str, Any]]) -> dict[str, int]:
    """Of the networks whose `feature_figures` are `figures`: how many have a channel below zero on
    every state, how many are under 10% alive, and how many have no live feature."""
    return {"dead_channel": sum(min(found["largest"]) <= 0 for found in figures),
            "under_10pc": sum(found["alive"] < 0.1 for found in figures),
            "all_dead": sum(found["alive"] == 0 for found in figures)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a π^SG run folder with code-vector conditioning")
    parser.add_argument(
        "--weights", nargs="+", default=["untrained", "latest"], help="untrained, latest, best or files"
    )
    parser.add_argument("--problems", type=Path, required=True)
    parser.add_argument("--count", type=int, default=64)
    parser.add_argument("--walk", type=int, default=20, help="random-walk steps from each level's start")
    parser.add_argument("--inits", type=int, default=0, help="also measure this many fresh initialisations")
    parser.add_argument("--csv", type=Path, help="also write the rows here")
    args = parser.parse_args()
    config, domain, starts = run_and_levels(args)
    if config.subgoal.conditioning != "code-vector":
        parser.error(f"{args.run}: conditioning is {config.subgoal.conditioning!r}; "
                     "only code-vector reduces to 2 channels")  # fmt: skip
    states = walk_states(domain, starts, args.walk, np.random.default_rng(WALK_SEED))
    observations = torch.as_tensor(domain.observe(states)).float()
    print(f"{args.problems}: {len(states)} states ({len(starts)} levels, walks of {args.walk}); "
          f"reduce_activation = {config.subgoal.reduce_activation!r}")  # fmt: skip
    print(f"{'weights':40s} {'network':7s} {'alive':>6s} {'dead_states':>11s}  largest pre-activation per channel")
    rows = []
    for label in args.weights:
        model = method_with_weights(args.run, label, domain, starts[0], config).learner.model.eval()
        for name in NETWORKS:
            found = feature_figures(getattr(model, name), observations)
            largest = " ".join(f"{value:+.3f}" for value in found["largest"])
            print(f"{Path(label).name[-40:]:40s} {name:7s} {found['alive']:6.3f} "
                  f"{found['dead_states']:11.3f}  {largest}")  # fmt: skip
            updates = updates_of(label)
            rows.append({"weights": Path(label).name, "updates": "" if updates is None else updates,
                         "network": name, "states": len(states), "networks": 1, "alive": f"{found['alive']:.4f}",
                         "dead_states": f"{found['dead_states']:.4f}", "largest": largest,
                         **start_counts([found])})  # fmt: skip
    if args.inits:
        model_config = config.subgoal.model_config(tuple(observations.shape[1:]), domain.num_actions)
        print(f"{args.inits} fresh initialisations: {'network':7s} {'alive':>6s} (median) {'dead_channel':>12s} "
              f"{'under_10pc':>10s} {'all_dead':>8s}")  # fmt: skip
        for found in initialisations(model_config, observations, args.inits):
            print(f"{'':26s}{found['network']:7s} {found['alive']:6.3f}          {found['dead_channel']:12d} "
                  f"{found['under_10pc']:10d} {found['all_dead']:8d}")  # fmt: skip
            rows.append({"weights": "fresh", "updates": 0, "network": found["network"], "states": len(states),
                         "networks": args.inits, "alive": f"{found['alive']:.4f}", "dead_states": "", "largest": "",
                         **{key: found[key] for key in COUNTS}})  # fmt: skip
    if args.csv is not None and rows:
        write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
