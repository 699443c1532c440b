"""What the evaluation precision changes in the searches of a trained model.

Loads a trained run (its best checkpoint), searches the given problems in lockstep with
the run's test evaluator once per precision (`search.precision`), and prints for each:
problems solved, total and mean expansions, and how many problems had exactly the
float32 search (same status, expansions and solution) or a different one. Counts, not
timings: the output is the same on any machine with the same kernels. Usage::

    python benchmarks/precision.py RUN --problems TEST.txt [--budget 2000] [--precisions float32,bfloat16]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from sgps.domains.levels import read_levels
from sgps.runs.run import checkpoint_path
from sgps.search import search_lockstep
from sgps.training.config import load_run_config
from sgps.training.setup import build_method


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("--problems", type=Path, required=True)
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--precisions", default="float32,bfloat16")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    config = load_run_config(args.run / "config.toml")
    levels = read_levels(args.problems, config.run.domain)
    states = levels.states()
    reference = None
    print(f"{args.run} ({config.run.algorithm}), {len(states)} problems of {args.problems}, budget {args.budget}")
    print(f"{'precision':<10} {'solved':>7} {'expansions':>11} {'mean (solved)':>14} {'same as float32':>16}")
    for precision in args.precisions.split(","):
        run_settings = dataclasses.replace(config.run, device=args.device)
        search_settings = dataclasses.replace(config.search, precision=precision)
        method = build_method(levels.domain, states[0],
                              dataclasses.replace(config, run=run_settings, search=search_settings))  # fmt: skip
        method.load_model(checkpoint_path(args.run, "best"))
        results = search_lockstep(levels.domain, states, method.algorithm, method.test_evaluator(),
                                  budget=args.budget, epsilon=config.bootstrap.epsilon,
                                  batch_size=config.search.evaluation_batch)  # fmt: skip
        outcome = [(r.status, r.expanded, r.actions) for r in results]
        reference = reference or outcome
        solved = [r.expanded for r in results if r.solved]
        same = sum(a == b for a, b in zip(outcome, reference, strict=True))
        mean = sum(solved) / len(solved) if solved else float("nan")
        print(f"{precision:<10} {len(solved):>7} {sum(r.expanded for r in results):>11,} {mean:>14.1f} "
              f"{same:>10} of {len(results)}")  # fmt: skip


if __name__ == "__main__":
    main()
