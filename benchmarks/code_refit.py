"""Do π_low's failed-tree labels hold anything its code explains? π_low refitted on them, several ways.

benchmarks/pair_labels.py shows that most of π_low's failed-tree labels are the searching
policy's own first choices, and that π_low, trained on them, reads its code little. That
leaves three explanations: the labels say nothing about where the pair ends beyond what
the policy already does; or they do, in the rows where the path departs from the policy's
first choice, and the copying majority drowns it; or the destination decides those rows
but the VQ-VAE's K codes keep too little of it. This script tells them apart on one
weights file of a π^SG run. It draws the failed-tree pairs of `--count` levels as the
learner does (`pair_labels.failed_tree_samples`, optionally more pairs per tree), splits
them by level (one failed tree each) into a fitting and a held-out half, and fits π_low with Adam and
cross-entropy for `--epochs` epochs:

- ``as-is``: the weights' π_low, not refitted;
- ``refit-all`` / ``refit-departing``: the weights' π_low refitted on every fitting row
  (what the learner does, the control) / on the fitting rows whose action is not the
  searching policy's first choice, the codes from the weights' VQ-VAE;
- ``fresh-none`` / ``fresh-code`` / ``fresh-decoded`` / ``fresh-target``: a new π_low (the
  run's sizes, initialised from `SPLIT_SEED`) fitted on every fitting row, given no
  destination (a zero code vector), the pair's code vector (spec 3.3), the subgoal the
  weights' VQ-VAE decodes from that code (spec 3.4, ``--conditioning decoded-state``), or
  the pair's subgoal state itself (the network of spec 3.4 with the exact subgoal as its
  input: what any conditioning can at best convey);
- ``vq-K`` / ``joint-K`` (one pair per size in ``--codebooks``): a new VQ-VAE of K codes (the
  run's sizes otherwise) and a new π_low on its code vectors. ``vq-K`` trains the VQ-VAE on
  the fitting rows' (state, subgoal) pairs with L_VQ alone, as the learner does, then fits
  π_low on its codes: whether more codes keep the direction. ``joint-K`` trains both at
  once on L_VQ plus π_low's cross-entropy, which reaches the encoder through the
  straight-through code vector: whether codes *trained* to say which way to go can say it.
  Unlike the learner, whose VQ-VAE sees only each pair's first state, both see every row's
  state, the pairs π_low reads codes of.

On the held-out rows (all of them, and the departing ones) it prints each variant's
accuracy (``own``) and, where the variant reads a code, its mean accuracy with each other
code (``other``) and the share of (row, other code) whose first choice the code changes
(``changes``). On the departing rows, ``fresh-target`` far above ``fresh-none`` means the
destination decides them; ``fresh-code`` and ``fresh-decoded`` near ``fresh-none`` then
mean the codes lose it, however π_low is conditioned on them.
Usage::

    python benchmarks/code_refit.py RUN --weights latest --problems train.txt --count 96
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from pair_labels import code_effect, failed_tree_rows, failed_tree_samples, run_and_levels
from search_progress import updates_of, write_rows
from sgps.models.subgoal import CodeConditioned, StateConditioned
from sgps.models.vqvae import VQVAE

#: The seed of the level split, the fresh networks and the refits' minibatch order.
SPLIT_SEED = 0

#: A π_low under test: its logits [R, |A|] for rows, each row given the code `codes` names.
Policy = Callable[["FailedRows", torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class FailedRows:
    """π_low's failed-tree rows as tensors: states, subgoals and codes in, actions out, and what splits them."""

    states: torch.Tensor  # float [R, C, H, W]
    targets: torch.Tensor  # float [R, C, H, W]: the pair's subgoal state
    codes: torch.Tensor  # long [R]: the VQ-VAE code of the row's (state, subgoal)
    actions: torch.Tensor  # long [R]: the path's action
    departing: torch.Tensor  # bool [R]: the action is not the searching policy's first choice
    held_out: torch.Tensor  # bool [R]: the row's level is in the held-out half

    def select(self, mask: torch.Tensor) -> FailedRows:
        return FailedRows(*(getattr(self, name)[mask] for name in self.__dataclass_fields__))


@dataclass(frozen=True)
class Variant:
    """One π_low under test: how it acts, how many rows fitted it, and the codes it reads (if any)."""

    policy: Policy
    fitted_rows: int
    codebook_size: int = 0  # 0: the variant reads no code
    vqvae: VQVAE | None = None  # the VQ-VAE that codes its rows; None: the weights' own


def recoded(rows: FailedRows, vqvae: VQVAE) -> FailedRows:
    """`rows` with each row's code taken from `vqvae` instead of the weights' VQ-VAE."""
    return dataclasses.replace(rows, codes=vqvae.code(rows.states, rows.targets))


def failed_rows(method: Any, samples: Any, rng: np.random.Generator) -> FailedRows:
    """The failed-tree rows of `samples`, each tagged with its level's half (levels drawn by `rng`):
    every level searched gives one failed tree, so the rows of a tree, which share states, all
    fall on one side."""
    lengths = [length for _, _, length in samples.failed_paths]
    if sum(lengths) != len(samples.failed_low):
        raise RuntimeError(f"{len(samples.failed_low)} failed-tree rows but paths of {sum(lengths)} steps")
    tree_of_row = np.repeat(np.asarray(samples.pair_trees), lengths)
    trees = np.unique(tree_of_row)
    held_trees = rng.choice(trees, size=len(trees) // 2, replace=False)
    rows = failed_tree_rows(method, samples)
    return FailedRows(states=rows["states"], targets=rows["targets"], codes=rows["codes"], actions=rows["actions"],
                      departing=rows["searched"] != rows["actions"],
                      held_out=torch.from_numpy(np.isin(tree_of_row, held_trees)))  # fmt: skip


def scores(variant: Variant, rows: FailedRows) -> dict[str, float]:
    """The variant's accuracy with each row's own code and the others, and how often the code changes its choice."""
    nan = float("nan")
    if not len(rows.actions):
        return {"own": nan, "other": nan, "changes": nan}
    with torch.no_grad():
        if variant.vqvae is not None:
            rows = recoded(rows, variant.vqvae)
        if not variant.codebook_size:
            return {"own": float((variant.policy(rows, rows.codes).argmax(dim=1) == rows.actions).double().mean()),
                    "other": nan, "changes": nan}  # fmt: skip
        own, other, changes = code_effect(lambda codes: variant.policy(rows, codes).argmax(dim=1), rows.actions,
                                          rows.codes, variant.codebook_size)  # fmt: skip
    return {"own": own, "other": other, "changes": changes}


def trained(network: nn.Module, loss: Callable[[FailedRows], torch.Tensor], rows: FailedRows,
            args: argparse.Namespace) -> None:  # fmt: skip
    """Minimise `loss` over minibatches of `rows` for `--epochs` epochs with Adam, `network` in place."""
    optimizer = torch.optim.Adam(network.parameters(), lr=args.learning_rate)
    generator = torch.Generator().manual_seed(SPLIT_SEED)
    network.train()
    for _ in range(args.epochs):
        order = torch.randperm(len(rows.actions), generator=generator)
        for start in range(0, len(order), args.minibatch):
            optimizer.zero_grad()
            loss(rows.select(order[start : start + args.minibatch])).backward()
            optimizer.step()
    network.eval()


def fitted(policy: Policy, network: nn.Module, rows: FailedRows, args: argparse.Namespace) -> None:
    """Train `network` (the part of `policy` that learns) on `rows` with cross-entropy and Adam, in place."""
    trained(network, lambda batch: functional.cross_entropy(policy(batch, batch.codes), batch.actions), rows, args)


def fresh_codebook_variants(model: Any, fitting: FailedRows, size: int, args: argparse.Namespace) -> dict[str, Variant]:
    """``vq-K`` and ``joint-K`` of the module docstring for K = `size`."""
    config = model.config

    def new_vqvae() -> VQVAE:
        return VQVAE(config.observation_shape, size, config.code_dim, config.vq_channels, config.vq_blocks,
                     commitment=model.vqvae.commitment, codebook=config.codebook)  # fmt: skip

    def on_codes(vqvae: VQVAE, low: nn.Module) -> Policy:
        return lambda rows, codes: low(rows.states, vqvae.codebook.vectors[codes])

    torch.manual_seed(SPLIT_SEED)
    vqvae, low = new_vqvae(), CodeConditioned(config, config.num_actions)
    trained(vqvae, lambda batch: vqvae.loss(batch.states, batch.targets), fitting, args)
    fitted(on_codes(vqvae, low), low, recoded(fitting, vqvae), args)
    found = {f"vq-{size}": Variant(on_codes(vqvae, low), len(fitting.actions), size, vqvae)}

    torch.manual_seed(SPLIT_SEED)
    joint_vqvae, joint_low = new_vqvae(), CodeConditioned(config, config.num_actions)
    both = nn.ModuleList([joint_vqvae, joint_low])

    def joint_loss(batch: FailedRows) -> torch.Tensor:
        encodings = joint_vqvae.encode(batch.states, batch.targets)
        _, _, straight_through = joint_vqvae.quantise(encodings)
        actions = functional.cross_entropy(joint_low(batch.states, straight_through), batch.actions)
        return joint_vqvae.loss(batch.states, batch.targets) + actions

    trained(both, joint_loss, fitting, args)
    found[f"joint-{size}"] = Variant(on_codes(joint_vqvae, joint_low), len(fitting.actions), size, joint_vqvae)
    return found


def variants(model: Any, fitting: FailedRows, args: argparse.Namespace) -> dict[str, Variant]:
    """Each variant of the module docstring, fitted on `fitting`."""
    vectors = model.vqvae.codebook.vectors.detach()
    size = model.config.codebook_size

    def snapshot_low(low: nn.Module) -> Policy:
        return lambda rows, codes: model.conditioned_on_codes(low, rows.states, codes)

    found = {"as-is": Variant(snapshot_low(model.low), 0, size)}
    for name, rows in (("refit-all", fitting), ("refit-departing", fitting.select(fitting.departing))):
        low = copy.deepcopy(model.low)
        fitted(snapshot_low(low), low, rows, args)
        found[name] = Variant(snapshot_low(low), len(rows.actions), size)
    fresh: dict[str, tuple[nn.Module, Policy, int]] = {}
    torch.manual_seed(SPLIT_SEED)
    none = CodeConditioned(model.config, model.config.num_actions)
    fresh["fresh-none"] = (none, lambda rows, codes: none(rows.states, torch.zeros_like(vectors[codes])), 0)
    code = CodeConditioned(model.config, model.config.num_actions)
    fresh["fresh-code"] = (code, lambda rows, codes: code(rows.states, vectors[codes]), size)
    decoded = StateConditioned(model.config, model.config.num_actions)

    def decoded_policy(rows: FailedRows, codes: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            subgoals = model.soft_subgoals(rows.states, vectors[codes])
        return decoded(rows.states, subgoals)

    fresh["fresh-decoded"] = (decoded, decoded_policy, size)
    target = StateConditioned(model.config, model.config.num_actions)
    fresh["fresh-target"] = (target, lambda rows, codes: target(rows.states, rows.targets), 0)
    for name, (network, policy, reads) in fresh.items():
        fitted(policy, network, fitting, args)
        found[name] = Variant(policy, len(fitting.actions), reads)
    for codebook in args.codebooks:
        found.update(fresh_codebook_variants(model, fitting, codebook, args))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a π^SG run folder (its configuration builds the networks)")
    parser.add_argument("--weights", nargs="+", default=["latest"], help="untrained, latest, best or files")
    parser.add_argument("--problems", type=Path, required=True)
    parser.add_argument("--count", type=int, default=96)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--pairs-per-tree", type=int, help="pairs drawn from each failed tree (default: the run's)")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--minibatch", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--codebooks", type=int, nargs="*", default=[],
                        help="also fit the vq-K and joint-K variants for each of these codebook sizes K")  # fmt: skip
    parser.add_argument("--csv", type=Path, help="also write the rows here")
    args = parser.parse_args()
    config, domain, states = run_and_levels(args)
    print(f"{args.problems}: first {len(states)} levels, budget {args.budget}, half held out; fits: "
          f"{args.epochs} epochs, minibatch {args.minibatch}, learning rate {args.learning_rate}")  # fmt: skip
    columns = f"{'own':>5s} {'other':>5s} {'changes':>7s}"
    print(f"{'weights':36s} {'pi_low':15s} {'fit':>5s} {'held':>5s} {'departing':>9s} | held-out rows: {columns} "
          f"| departing: {columns}")  # fmt: skip
    table = []
    for label in args.weights:
        method, samples = failed_tree_samples(args.run, label, domain, states, config, args.budget,
                                              args.pairs_per_tree)  # fmt: skip
        if samples is None or not len(samples.failed_low):
            print(f"{Path(label).name[-36:]:36s} no failed-tree pairs")
            continue
        rows = failed_rows(method, samples, np.random.default_rng(SPLIT_SEED))
        fitting, held = rows.select(~rows.held_out), rows.select(rows.held_out)
        held_departing = held.select(held.departing)
        model = method.learner.model
        for name, variant in variants(model, fitting, args).items():
            whole, departing = scores(variant, held), scores(variant, held_departing)
            print(f"{Path(label).name[-36:]:36s} {name:15s} {variant.fitted_rows:5d} {len(held.actions):5d} "
                  f"{len(held_departing.actions):9d} | {'':15s}{whole['own']:5.3f} {whole['other']:5.3f} "
                  f"{whole['changes']:7.3f} | {'':11s}{departing['own']:5.3f} {departing['other']:5.3f} "
                  f"{departing['changes']:7.3f}")  # fmt: skip
            updates = updates_of(label)
            table.append({"weights": Path(label).name, "updates": "" if updates is None else updates,
                          "levels": len(states), "budget": args.budget, "pi_low": name, "fit_rows": variant.fitted_rows,
                          "held_rows": len(held.actions), "held_departing": len(held_departing.actions),
                          **{f"held_{key}": f"{value:.3f}" for key, value in whole.items()},
                          **{f"departing_{key}": f"{value:.3f}" for key, value in departing.items()}})  # fmt: skip
    if args.csv is not None and table:
        write_rows(args.csv, table)


if __name__ == "__main__":
    main()
