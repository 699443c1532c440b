"""What π_low learns from failed trees: the search policy's own first choices, or the way to its subgoal?

Before a first solve, PHS*(π^SG) learns π_low from pairs drawn from its failed trees
(spec/algorithms.md 4.3): a tree path from a state to a hindsight subgoal, whose actions
π_low learns conditioned on the VQ-VAE's code of (state, subgoal). Those trees were grown
by π^SG itself, and a best-first search reaches deep nodes mostly along its policy's own
first choices. If the paths' actions are the search policy's first choices, the pairs teach
π_low to copy that policy, and the code carries nothing π_low needs: it learns to ignore
it. This script measures it. For each weights file of a run (see
benchmarks/search_progress.py: ``untrained``, ``latest``, ``best`` or files) it searches
the first `--count` levels of `--problems` at `--budget` with the run's training evaluator
and evaluation batch (as a Bootstrap batch does), draws the failed-tree pairs as the
learner does (its sampling settings, a fixed seed), and scores their π_low rows, printing
per weights file:

- ``pairs`` / ``rows`` / ``length``: the pairs drawn, their π_low rows (one per path step)
  and their mean path length;
- ``search_first``: the share of rows whose action is the searching policy π^SG's most
  likely action at that state (with the weights that grew the tree; ε aside);
- ``own_code``: π_low's accuracy conditioned on the pair's own code (what the learner's
  probe reports as ``probe_low_accuracy``);
- ``other_code``: its accuracy conditioned on each of the other K - 1 codes (mean);
- ``code_changes``: the share of (row, other code) where π_low's first choice differs from
  its choice under the pair's own code.

``own_code`` well above ``other_code`` means π_low reads its code; ``search_first`` near 1
means the labels hold little beyond the policy that made them. Usage::

    python benchmarks/pair_labels.py RUN --problems hard.txt --count 16 --weights untrained a.safetensors
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from search_progress import method_with_weights, updates_of, write_rows
from sgps.domains import read_levels
from sgps.search.drivers import search_lockstep
from sgps.training.config import load_run_config
from sgps.training.methods.subgoal.samples import SubgoalSamples, collect_samples

#: The seed of the pair draws (the same pairs for every weights file searched alike).
DRAW_SEED = 0


def run_and_levels(args: argparse.Namespace) -> tuple[Any, Any, list[Any]]:
    """The configuration of run `args.run`, and the domain and first `args.count` levels of
    `args.problems`; one torch thread (the measurements share the machine with training runs)."""
    torch.set_num_threads(1)
    config = load_run_config(args.run / "config.toml")
    levels = read_levels(args.problems, config.run.domain)
    return config, levels.domain, levels.states()[: args.count]


def failed_tree_samples(
    run: Path, label: str, domain: Any, states: list[Any], config: Any, budget: int, pairs_per_tree: int | None = None
) -> tuple[Any, SubgoalSamples | None]:
    """The run's method with weights `label`, and the pairs its learner would draw from searching
    `states` at `budget` as a training batch does (its evaluator and evaluation batch, ε, a fixed seed;
    `pairs_per_tree` pairs from each failed tree if given, else the run's number)."""
    method = method_with_weights(run, label, domain, states[0], config)
    sampling = method.settings.sampling()
    if pairs_per_tree is not None:
        sampling = dataclasses.replace(sampling, pairs_per_tree=pairs_per_tree)
    results = search_lockstep(domain, states, method.algorithm, method.evaluator(), budget=budget,
                              epsilon=config.bootstrap.epsilon, batch_size=config.search.evaluation_batch or 1,
                              record_graph=True)  # fmt: skip
    samples = collect_samples(domain, results, sampling, method.lengths.statistics(),
                              np.random.default_rng(DRAW_SEED))  # fmt: skip
    return method, samples


@torch.no_grad()
def failed_tree_rows(method: Any, samples: SubgoalSamples) -> dict[str, torch.Tensor]:
    """π_low's failed-tree rows of `samples` as tensors: ``states``, ``targets`` (the pair's subgoal),
    ``actions`` (the path's), ``codes`` (the VQ-VAE's, of state and subgoal) and ``searched`` (the
    searching policy π^SG's most likely action, ε aside), with `method`'s networks."""
    model = method.learner.model
    model.eval()
    rows = samples.failed_low
    observations = torch.from_numpy(samples.observations)
    states = observations[torch.from_numpy(samples.low.states[rows])]
    targets = observations[torch.from_numpy(samples.low.targets[rows])]
    evaluator = method.evaluator()
    return {"states": states, "targets": targets, "actions": torch.from_numpy(samples.low.actions[rows]),
            "codes": model.vqvae.code(states, targets),
            "searched": model(states, evaluator.alpha, evaluator.mixture)[0].argmax(dim=1)}  # fmt: skip


@torch.no_grad()
def code_effect(
    choose: Callable[[torch.Tensor], torch.Tensor], actions: torch.Tensor, codes: torch.Tensor, size: int
) -> tuple[float, float, float]:
    """A π_low's accuracy on `actions` with each row's own code, its mean accuracy with each of the other
    `size` - 1 codes, and the share of (row, other code) whose choice the code changes; `choose(codes)`
    gives the π_low's first choice per row under `codes`."""
    choice = choose(codes)
    others = [choose((codes + shift) % size) for shift in range(1, size)]
    return (float((choice == actions).double().mean()),
            float(np.mean([(other == actions).double().mean().item() for other in others])),
            float(np.mean([(other != choice).double().mean().item() for other in others])))  # fmt: skip


def scores(method: Any, samples: SubgoalSamples) -> dict[str, float]:
    """The module docstring's figures for the failed-tree rows of `samples`, with `method`'s networks."""
    model = method.learner.model
    rows = failed_tree_rows(method, samples)
    own, other, changes = code_effect(
        lambda codes: model.conditioned_on_codes(model.low, rows["states"], codes).argmax(dim=1),
        rows["actions"], rows["codes"], model.config.codebook_size,
    )  # fmt: skip
    return {"search_first": float((rows["searched"] == rows["actions"]).double().mean()), "own_code": own,
            "other_code": other, "code_changes": changes}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a π^SG run folder (its configuration builds the networks)")
    parser.add_argument(
        "--weights", nargs="+", default=["untrained", "latest"], help="untrained, latest, best or files"
    )
    parser.add_argument("--problems", type=Path, required=True)
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--csv", type=Path, help="also write the rows here")
    args = parser.parse_args()
    config, domain, states = run_and_levels(args)
    print(f"{args.problems}: first {len(states)} levels, budget {args.budget}, training evaluator")
    print(f"{'weights':44s} {'pairs':>5s} {'rows':>5s} {'length':>6s} {'search_first':>12s} {'own_code':>8s} "
          f"{'other_code':>10s} {'code_changes':>12s}")  # fmt: skip
    rows = []
    for label in args.weights:
        method, samples = failed_tree_samples(args.run, label, domain, states, config, args.budget)
        if samples is None or not len(samples.failed_low):
            print(f"{Path(label).name[-44:]:44s} no failed-tree pairs")
            continue
        found = scores(method, samples)
        length = float(np.mean(samples.pair_lengths))
        print(f"{Path(label).name[-44:]:44s} {len(samples.pair_lengths):5d} {len(samples.failed_low):5d} "
              f"{length:6.1f} {found['search_first']:12.3f} {found['own_code']:8.3f} {found['other_code']:10.3f} "
              f"{found['code_changes']:12.3f}")  # fmt: skip
        updates = updates_of(label)
        rows.append({"weights": Path(label).name, "updates": "" if updates is None else updates,
                     "levels": len(states), "budget": args.budget, "pairs": len(samples.pair_lengths),
                     "rows": len(samples.failed_low), "length": f"{length:.2f}",
                     **{key: f"{value:.3f}" for key, value in found.items()}})  # fmt: skip
    if args.csv is not None and rows:
        write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
