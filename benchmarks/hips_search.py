"""HIPS-ε's search cost: seconds and low-level steps per expansion of a trained run.

Loads a `hips-eps` run directory and searches the first `--count` levels of a level
file, one at a time in exact order with budget `--budget`, and prints, per level and in
total: expansions, seconds per expansion, low-level steps per expansion (the π_low
rollouts and the primitive children), and the share of the time spent validating
subgoals by rollouts. One thread.

`--prune both` searches every level twice, without and with the rollouts that the
domain's invariants rule out (`Domain.may_reach`), and checks that both searches expand
the same number of nodes and return the same plan, as they must. Usage::

    python benchmarks/hips_search.py RUN --problems FILE [--count 5] [--budget 200] [--prune both]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from sgps.domains.levels import read_levels
from sgps.search import make_algorithm, search_lockstep
from sgps.training.methods.hips.run import load_run
from sgps.training.methods.hips.search import HipsHeuristic, HybridChildren


class TimedChildren(HybridChildren):
    """`HybridChildren` that adds up the time its rollouts take, and the candidates and valid subgoals it finds."""

    rollout_seconds = 0.0
    candidates_found = 0
    subgoals_valid = 0

    def candidates(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        found = super().candidates(*args, **kwargs)
        self.candidates_found += len(found)
        return found

    def expand(self, state):  # type: ignore[no-untyped-def]
        edges, steps = super().expand(state)
        self.subgoals_valid += len(edges) - self.domain.num_actions
        return edges, steps

    def validate(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return super().validate(*args, **kwargs)
        finally:
            self.rollout_seconds += time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a hips-eps run directory")
    parser.add_argument("--problems", type=Path, required=True, help="level file")
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--prune", choices=("on", "off", "both"), default="on",
                        help="skip rollouts the domain's invariants rule out (both: compare)")  # fmt: skip
    args = parser.parse_args()
    torch.set_num_threads(1)
    levels = read_levels(args.problems).levels[: args.count]
    checkpoint = args.run / "checkpoints" / "latest.safetensors"
    domain, model, settings, device = load_run(args.run, checkpoint, levels[0].state)
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.prune]
    cap = settings.rollout_cap(domain.name)
    searchers = {
        prune: TimedChildren(domain, model, epsilon=settings.epsilon, rollout_steps=cap, device=device, prune=prune)
        for prune in modes
    }
    heuristic = HipsHeuristic(domain, model, device)
    totals = {prune: [0, 0, 0.0] for prune in modes}  # expansions, steps, seconds
    print("level | pruned | status | expansions | s/expansion | steps/expansion")
    for level in levels:
        outcomes = []
        for prune, children in searchers.items():
            started = time.perf_counter()
            [result] = search_lockstep(domain, [level.state], make_algorithm("hips"), heuristic, budget=args.budget,
                                       children=children)  # fmt: skip
            seconds = time.perf_counter() - started
            totals[prune][0] += result.expanded
            totals[prune][1] += result.domain_steps
            totals[prune][2] += seconds
            outcomes.append((result.status, result.expanded, tuple(result.actions or ())))
            print(f"{level.name} | {'yes' if prune else 'no'} | {result.status} | {result.expanded} | "
                  f"{seconds / result.expanded:.4f} | {result.domain_steps / result.expanded:.1f}")  # fmt: skip
        if len(set(outcomes)) > 1:
            raise SystemExit(f"{level.name}: the pruned search differs from the unpruned one: {outcomes}")
    for prune, (expanded, steps, seconds) in totals.items():
        children = searchers[prune]
        share = children.rollout_seconds / seconds
        print(f"total ({'pruned' if prune else 'not pruned'}): {expanded} expansions, {seconds / expanded:.4f} "
              f"s/expansion, {steps / expanded:.1f} steps/expansion, rollouts {share:.0%} of the time; per "
              f"expansion {children.candidates_found / expanded:.1f} distinct candidates, "
              f"{children.subgoals_valid / expanded:.2f} valid subgoals")  # fmt: skip
    if len(modes) == 2:
        print("the searches with and without pruning expanded the same nodes and returned the same plans")


if __name__ == "__main__":
    main()
