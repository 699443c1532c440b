"""Which of a hard CraftWorld run's training problems it solves, by goal item.

The hard generator draws each level's goal from a mix (bronze pick, iron pick), and the
paper's hard test levels all ask for an iron pick, which takes more Use actions. A run's
solved count can grow on one goal alone; this script splits `metrics/train.csv` by the goal
of each searched problem, per window of batches.

A row's `problem` is an index into the run's *training* problems, which are the level
file's levels in the order of the training/validation split (`split_problems`, from the
run's `run.validation_fraction` and `bootstrap.seed`), not the file's order; with a
separate validation file (`sgps train --validation`) the training problems are the file's
levels in order (`--validation-file`).

Usage::

    python benchmarks/solved_by_goal.py RUN --problems train.txt [--window 20] [--validation-file]
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

from sgps.domains.craftworld import ITEM_NAMES
from sgps.domains.levels import read_levels
from sgps.training.config import load_run_config
from sgps.training.setup import split_problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a CraftWorld run folder")
    parser.add_argument("--problems", type=Path, required=True, help="the level file the run trained on")
    parser.add_argument("--window", type=int, default=20, help="batches per row (default 20)")
    parser.add_argument("--validation-file", action="store_true",
                        help="the run was given its validation levels apart (no split of --problems)")  # fmt: skip
    args = parser.parse_args()
    if args.window < 1:
        parser.error("--window must be at least 1")
    config = load_run_config(args.run / "config.toml")
    if config.run.domain != "craftworld":
        parser.error(f"{args.run} trained on {config.run.domain}; goals are CraftWorld's")
    states = read_levels(args.problems, "craftworld").states()
    train = states if args.validation_file else split_problems(states, config.run.validation_fraction,
                                                               config.bootstrap.seed)[0]  # fmt: skip
    with (args.run / "metrics" / "train.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if rows and max(int(row["problem"]) for row in rows) >= len(train):
        parser.error(f"{args.run}'s rows name problems beyond the {len(train)} training problems of {args.problems}")
    goals = sorted({ITEM_NAMES[state.board.extra] for state in train})
    windows: dict[int, tuple[Counter, Counter]] = {}
    for row in rows:
        goal = ITEM_NAMES[train[int(row["problem"])].board.extra]
        window = int(row["batch"]) // args.window  # batches count on across passes in train.csv's iteration order
        tried, won = windows.setdefault((int(row["iteration"]), window), (Counter(), Counter()))
        tried[goal] += 1
        won[goal] += row["solved"] == "1"
    print(f"{args.run}: training problems by goal: "
          + ", ".join(f"{goal} {sum(ITEM_NAMES[s.board.extra] == goal for s in train):,}" for goal in goals))
    print(f"{'iteration':>9s} {'batches':>9s}  " + "  ".join(f"{goal + ': solved / searched':>28s}" for goal in goals))
    for (iteration, window), (tried, won) in sorted(windows.items()):
        first = window * args.window
        cells = "  ".join(f"{f'{won[goal]:,} / {tried[goal]:,}':>28s}" for goal in goals)
        print(f"{iteration:>9d} {f'{first}-{first + args.window - 1}':>9s}  {cells}")
    searched = sum((tried for tried, _ in windows.values()), Counter())
    solved = sum((won for _, won in windows.values()), Counter())
    print(f"{'all':>19s}  " + "  ".join(f"{f'{solved[goal]:,} / {searched[goal]:,}':>28s}" for goal in goals))


if __name__ == "__main__":
    main()
