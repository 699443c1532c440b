"""HIPS-ε's search cost: seconds and low-level steps per expansion of a trained run.

Loads a `hips-eps` run directory and searches the first `--count` levels of a level
file, one at a time in exact order with budget `--budget`, and prints, per level and in
total: expansions, seconds per expansion, low-level steps per expansion (the π_low
rollouts and the primitive children), and the share of the time spent validating
subgoals by rollouts. One thread. Usage::

    python benchmarks/hips_search.py RUN --problems FILE [--count 5] [--budget 200]
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
    """`HybridChildren` that adds up the time its rollouts take."""

    rollout_seconds = 0.0

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
    args = parser.parse_args()
    torch.set_num_threads(1)
    levels = read_levels(args.problems).levels[: args.count]
    checkpoint = args.run / "checkpoints" / "latest.safetensors"
    domain, model, settings, device = load_run(args.run, checkpoint, levels[0].state)
    children = TimedChildren(domain, model, epsilon=settings.epsilon, rollout_steps=settings.rollout_cap(domain.name),
                             device=device)  # fmt: skip
    heuristic = HipsHeuristic(domain, model, device)
    total_expanded = total_steps = 0
    total_seconds = 0.0
    print("level | status | expansions | s/expansion | steps/expansion")
    for level in levels:
        started = time.perf_counter()
        [result] = search_lockstep(domain, [level.state], make_algorithm("hips"), heuristic, budget=args.budget,
                                   children=children)  # fmt: skip
        seconds = time.perf_counter() - started
        total_expanded += result.expanded
        total_steps += result.domain_steps
        total_seconds += seconds
        print(f"{level.name} | {result.status} | {result.expanded} | {seconds / result.expanded:.4f} | "
              f"{result.domain_steps / result.expanded:.1f}")  # fmt: skip
    share = children.rollout_seconds / total_seconds
    print(f"total: {total_expanded} expansions, {total_seconds / total_expanded:.4f} s/expansion, "
          f"{total_steps / total_expanded:.1f} steps/expansion, rollouts {share:.0%} of the time")  # fmt: skip


if __name__ == "__main__":
    main()
