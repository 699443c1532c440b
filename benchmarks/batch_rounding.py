"""Does a trained model answer a state the same whatever batch it is evaluated in?

CPU convolution kernels are chosen by the batch's shape, and round differently: the same
state's log π and h differ in their last digits between an evaluation alone and one beside
other states. A search's expansion order follows those numbers, so where two nodes' costs
nearly tie, a search in another lockstep group (other searches, another evaluation batch,
another number of processes) can expand other nodes from there on. Prints, for the first
state of `--problems`, the largest difference of its answers in batches of each `--sizes`
against its answers alone, for the run's training and test evaluators.

Usage::

    python benchmarks/batch_rounding.py RUN --problems levels.txt [--weights latest] [--sizes 1 2 5 16 64]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from search_progress import method_with_weights
from sgps.domains.levels import read_levels
from sgps.training.config import load_run_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder (its configuration builds the networks)")
    parser.add_argument("--problems", type=Path, required=True, help="levels whose observations fill the batches")
    parser.add_argument("--weights", default="latest", help="untrained, latest, best or a file")
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 2, 5, 16, 31, 64])
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = load_run_config(args.run / "config.toml")
    levels = read_levels(args.problems, config.run.domain)
    states = levels.states()
    if any(size < 1 for size in args.sizes) or max(args.sizes) > len(states):
        parser.error(f"--sizes must be from 1 to the {len(states)} levels of {args.problems}")
    method = method_with_weights(args.run, args.weights, levels.domain, states[0], config)
    observations = levels.domain.observe(states[: max(args.sizes)])
    print(f"{args.run} ({args.weights} weights), the first state of {args.problems}, alone against in a batch")
    print(f"{'evaluator':9s} {'batch':>5s} {'max |Δ log π|':>14s} {'|Δ h|':>10s}")
    evaluators = {"train": method.evaluator()}
    if method.test_evaluator() is not method.evaluator():
        evaluators["test"] = method.test_evaluator()
    for name, evaluator in evaluators.items():
        alone_policy, alone_value = evaluator.evaluate_observations(observations[:1])
        for size in args.sizes:
            policy, value = evaluator.evaluate_observations(observations[:size])
            log_pi = "-" if policy is None else f"{float(np.abs(policy[0] - alone_policy[0]).max()):.3g}"
            h = "-" if value is None else f"{float(abs(value[0] - alone_value[0])):.3g}"
            print(f"{name:9s} {size:5d} {log_pi:>14s} {h:>10s}")


if __name__ == "__main__":
    main()
