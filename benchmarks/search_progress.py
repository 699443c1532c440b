"""How far PHS*(π^SG)'s searches get on hard BoulderDash or hard CraftWorld before anything is solved.

Before its first solve, π^SG learns from failed trees only (docs/subgoals.md), and the
Bootstrap's curve stays flat at "all outstanding": it shows nothing of whether the
searches are getting closer. This script measures it. It searches the first `--count`
levels of `--problems` with each model given, at `--budget` expansions, in lockstep, with
the training searches' evaluator (or the test one, `--evaluator test`), records each
search graph, and prints per model

- ``solved``: searches that solved their level;
- ``reached``: how far toward its goal a search got, in the domain's own steps, the mean over
  levels and how many levels reached 0, 1, 2, ... (`furthest`): on BoulderDash the most
  diamonds any generated state holds (a hard level needs its `gems_required`, 4, before the
  exit opens); on CraftWorld the most of the level's Use actions done (collecting, crafting,
  mining: `CraftWorld.uses_needed` of the level less that of the state; an iron pick from
  nothing takes 10, the goal's own Use included);
- ``depth``: the mean over levels of the deepest generated node (the hard BoulderDash
  levels' optimal solutions are 65-67 moves long);
- ``exit``: BoulderDash levels where some generated state has the exit open.

The models are the networks of one run (its configuration and seed), with the weights of
``--weights``: ``latest`` or ``best`` (its checkpoints), ``untrained`` (as its seed
initialises them), or weights files saved from that run (e.g. copies of
latest.safetensors taken after N updates). The searches use the run's evaluation batch
and ε. The numbers depend only on the weights, the levels and the budget, so they are the
same on any machine. Usage::

    python benchmarks/search_progress.py RUN --problems hard.txt --count 16 --weights untrained latest

``--mixture arithmetic`` (or ``geometric``) searches with π^SG's codes mixed so instead of as
the run's configuration says (docs/subgoals.md, "Mixture"): the same weights, another policy.
``--alpha A`` gives π_unc the weight A in that mixture (both `alpha_train` and `alpha_test`):
1 searches with π_unc alone, 0 with the codes alone.
``--within 8000 16000 ...`` also counts the levels solved within each of those budgets, from
the same searches: a search at budget B pops the nodes a search at a smaller budget b would,
in the same order, and stops later (the budget only stops a search, spec/algorithms.md), and
each search records what the one at b returns at its b-th pop (`SearchResult.within`). That
pop ends the search at b before its children are generated, so a level solved by a child of
the b-th pop (goals tested at generation) counts at B but not at b. One search at the largest
budget thus gives the solves at every smaller one.

``--csv OUT.csv`` also writes the rows (``solved_levels``: the positions, from 0, of the levels
solved, to pair two settings level by level), with the learning updates each weights file had
seen where its name says so (``...-updates-N.safetensors``; ``untrained``: 0). ``--plot
OUT.png --from A.csv B.csv --runs a=RUN_A b=RUN_B`` draws the study's figure: the runs'
training problems solved against expansions and against updates, and the csv files'
furthest steps (diamonds, Use actions; the ``gems`` column of files written before CraftWorld
was measured) and depths against updates; ``--targets A.csv B.csv`` (rows of
benchmarks/subgoal_targets.py) adds how much the codes' subgoals and π_low differ, and
run folders whose learning.csv has π_low's probe add its share of pairs reached.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from sgps.domains import read_levels
from sgps.search.drivers import search_lockstep
from sgps.training.config import load_run_config
from sgps.training.setup import build_method

UNTRAINED = "untrained"
PROBE_WINDOW = 10  # updates per point of the probe panel
LINEAR_UP_TO = 100  # most problems solved that the solved panels still draw on a linear axis


def weights_file(run: Path, name: str) -> Path | None:
    """The weights `name` stands for (None: untrained)."""
    if name == UNTRAINED:
        return None
    if name in ("latest", "best"):
        return run / "checkpoints" / f"{name}.safetensors"
    return Path(name)


def method_with_weights(run: Path, label: str, domain: Any, level: Any, config: Any) -> Any:
    """The run's π^SG or flat method built from `config` for `domain` (shaped on `level`), with the
    weights `label` names (`weights_file`) loaded."""
    method = build_method(domain, level, config)
    weights = weights_file(run, label)
    if weights is not None:
        method.load_model(weights)
    return method


def policy_settings(config: Any, mixture: str | None, alpha: float | None) -> Any:
    """`config` with π^SG's codes mixed by `mixture` and π_unc weighted `alpha` in training and
    test searches alike (None: as the run says)."""
    changes: dict[str, Any] = {}
    if mixture is not None:
        changes["mixture"] = mixture
    if alpha is not None:
        changes.update(alpha_train=alpha, alpha_test=alpha)
    return dataclasses.replace(config, subgoal=dataclasses.replace(config.subgoal, **changes))


def updates_of(label: str) -> int | None:
    """The learning updates behind the weights `label` names: 0 untrained, N for ``...-updates-N...``."""
    if label == UNTRAINED:
        return 0
    found = re.search(r"updates-(\d+)", Path(label).name)
    return int(found.group(1)) if found else None


def plot(
    rows_by_file: dict[str, list[dict[str, str]]],
    runs: dict[str, Path],
    out: Path,
    targets: dict[str, list[dict[str, str]]] | None = None,
) -> Any:
    """Draw to `out` and return the matplotlib figure: training problems solved (the first
    outstanding count less each later one: a few of 10,000 stay visible; on a logarithmic axis
    above 1 once a run passes `LINEAR_UP_TO`) against expansions and against updates (one line
    per run folder),
    and the furthest step and the deepest node reached against updates (one line per csv); with
    `targets` (rows of benchmarks/subgoal_targets.py), how much the K codes' subgoals and π_low's
    actions differ against updates (one pair of lines per csv); for the runs that have it, π_low's
    probe against updates (`probe_curve`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    probes = {name: curve for name, run in runs.items() if (curve := probe_curve(run))[0]}
    searched = 2 if rows_by_file else 0  # the furthest-step and depth panels, drawn only with csv files to draw
    panels = 2 + searched + bool(targets) + bool(probes)
    figure, axes = plt.subplots(1, panels, figsize=(4.5 * panels, 3.8))
    by_expansions, by_updates = axes[:2]
    reached_axis, depth_axis = axes[2:4] if searched else (None, None)
    target_axis = axes[2 + searched] if targets else None
    if probes:
        for name, (updates, reached) in probes.items():
            axes[-1].plot(updates, reached, label=name)
        axes[-1].set(xlabel="learning updates", ylabel=f"π_low probe: pairs reached (mean of {PROBE_WINDOW})",
                     ylim=(0, 1))  # fmt: skip
    for name, rows in (targets or {}).items():
        points = sorted((int(row["updates"]), float(row["codes_differ"]), float(row["low_differ"]))
                        for row in rows if row["updates"])  # fmt: skip
        line = target_axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{name}: subgoals")
        target_axis.plot([p[0] for p in points], [p[2] for p in points], marker="x", linestyle="--",
                     color=line[0].get_color(), label=f"{name}: π_low")  # fmt: skip
    if target_axis is not None:
        target_axis.set(xlabel="learning updates", ylabel="how much the K codes differ (TV)", ylim=(0, 1))
    totals, most = set(), 0
    for name, run in runs.items():
        with (run / "metrics" / "outstanding.csv").open() as handle:
            rows = [row for row in csv.DictReader(handle) if row["outstanding"]]
        totals.add(int(rows[0]["outstanding"]))
        solved = [int(rows[0]["outstanding"]) - int(row["outstanding"]) for row in rows]
        most = max(most, *solved)
        by_expansions.step([int(row["cumulative_expansions"]) / 1e6 for row in rows], solved, where="post", label=name)
        by_updates.step(range(len(rows)), solved, where="post", label=name)
    for name, rows in rows_by_file.items():
        points = sorted((int(row["updates"]), float(row.get("reached") or row["gems"]), float(row["depth"]))
                        for row in rows if row["updates"])  # fmt: skip
        reached_axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        depth_axis.plot([p[0] for p in points], [p[2] for p in points], marker="o", label=name)
    of = f" of {totals.pop():,}" if len(totals) == 1 else ""
    # Once a run takes off (hundreds solved) a linear axis flattens the first solves of the others:
    # then the axis is linear up to 1 and logarithmic above. Either way the legend gets the room above
    # the curves: the upper half of a linear axis, about three and a half decades of a logarithmic one.
    take_off = most > LINEAR_UP_TO
    room = (0, 3000 * most) if take_off else (0, 2 * most + 1)
    if take_off:
        for axis in (by_expansions, by_updates):
            axis.set_yscale("symlog", linthresh=1)
    by_expansions.set(xlabel="training expansions (millions)", ylabel=f"training problems solved{of}", ylim=room)
    by_updates.set(xlabel="training batches (π^SG: a learning update each)", ylabel=f"training problems solved{of}",
                   ylim=room)  # fmt: skip
    if searched:
        reached_axis.set(xlabel="learning updates", ylabel="furthest step reached (mean over levels)")
        reached_axis.set_ylim(bottom=0)
        depth_axis.set(xlabel="learning updates", ylabel="deepest node reached (mean over levels)")
    for axis in axes:
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:  # a panel with nothing drawn has no legend
            axis.legend(fontsize=7, loc="upper left" if axis in (by_expansions, by_updates) else "best")
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    return figure


def probe_curve(run: Path) -> tuple[list[int], list[float]]:
    """The run's π_low probe (`probe_reached` of metrics/learning.csv: the share of a batch's
    failed-tree pairs greedy π_low reaches, docs/subgoals.md) in means over windows of
    `PROBE_WINDOW` updates, each at the window's last update; empty for runs without it."""
    path = run / "metrics" / "learning.csv"
    if not path.exists():
        return [], []
    with path.open() as handle:
        values = [float(row["probe_reached"]) if row.get("probe_reached") else None for row in csv.DictReader(handle)]
    updates, means = [], []
    for start in range(0, len(values) - PROBE_WINDOW + 1, PROBE_WINDOW):
        window = [value for value in values[start : start + PROBE_WINDOW] if value is not None]
        if window:
            updates.append(start + PROBE_WINDOW)
            means.append(sum(window) / len(window))
    return updates, means


def furthest(domain: Any, level: Any, states: Any) -> int:
    """How far toward its goal a search of `level` got over the `states` it generated, in the
    domain's own steps: BoulderDash, the most diamonds held; CraftWorld, the most Use actions of
    the level's recipe tree done (`CraftWorld.uses_needed`); another domain, 0."""
    if domain.name == "boulderdash":
        return max((state.gems for state in states), default=0)
    if domain.name == "craftworld":
        start = domain.uses_needed(level)
        return start - min((domain.uses_needed(state) for state in states), default=start)
    return 0


def progress(domain: Any, levels: list[Any], results: list[Any]) -> dict[str, Any]:
    """What the searches of `levels` reached: solved count, the `furthest` each got, depth, and
    BoulderDash's exits opened (on the other domains 0; the solved counts and depths hold)."""
    reached, depths, exits = [], [], 0
    for level, result in zip(levels, results, strict=True):
        states = result.graph.states if result.graph is not None else ()
        reached.append(furthest(domain, level, states))
        depths.append(int(result.graph.depths.max()) if result.graph is not None else 0)
        exits += domain.name == "boulderdash" and any(state.gems >= state.board.extra for state in states)
    return {
        "solved": sum(result.solved for result in results),
        "solved_levels": " ".join(str(index) for index, result in enumerate(results) if result.solved),
        "reached": sum(reached) / len(reached),
        "histogram": dict(sorted(Counter(reached).items())),
        "depth": sum(depths) / len(depths),
        "exit": exits,
        "expanded": sum(result.expanded for result in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, nargs="?", help="a run folder (its configuration builds the networks)")
    parser.add_argument("--weights", nargs="+", default=[UNTRAINED, "latest"], help="untrained, latest, best or files")
    parser.add_argument("--problems", type=Path)
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--within", nargs="+", type=int, default=[], metavar="B",
                        help="also count the levels solved within these budgets (each at most --budget)")  # fmt: skip
    parser.add_argument("--evaluator", choices=("train", "test"), default="train")
    parser.add_argument("--mixture", choices=("geometric", "arithmetic"), help="mix π^SG's codes so instead")
    parser.add_argument("--alpha", type=float, metavar="A",
                        help="π_unc's weight in π^SG's mixture, in [0, 1] (default: the run's alpha_train or "
                             "alpha_test)")  # fmt: skip
    parser.add_argument("--evaluation-batch", type=int, metavar="K",
                        help="children a search gathers per evaluation (default: the run's search.evaluation_batch)")
    parser.add_argument("--csv", type=Path, help="also write the rows here")
    parser.add_argument("--plot", type=Path, help="draw the --from csv files and --runs curves to this PNG, and stop")
    parser.add_argument("--from", dest="sources", nargs="+", type=Path, default=[], help="csv files to --plot")
    parser.add_argument("--runs", nargs="+", default=[], metavar="NAME=RUN", help="run folders to --plot")
    parser.add_argument("--targets", nargs="+", type=Path, default=[],
                        help="subgoal_targets.py csv files to --plot (a fifth panel)")  # fmt: skip
    args = parser.parse_args()
    if args.plot is not None:
        runs = {name: Path(path) for name, _, path in (spec.partition("=") for spec in args.runs)}
        targets = {source.stem: list(csv.DictReader(source.open())) for source in args.targets}
        plot({source.stem: list(csv.DictReader(source.open())) for source in args.sources}, runs, args.plot, targets)
        return
    if args.run is None or args.problems is None:
        parser.error("RUN and --problems are needed (unless --plot)")
    if args.evaluation_batch is not None and args.evaluation_batch < 1:
        parser.error("--evaluation-batch must be at least 1")
    if args.alpha is not None and not 0.0 <= args.alpha <= 1.0:
        parser.error(f"--alpha must be in [0, 1], not {args.alpha}")
    if any(not 1 <= bound <= args.budget for bound in args.within):
        parser.error(f"--within budgets must be between 1 and --budget ({args.budget})")
    torch.set_num_threads(1)
    levels = read_levels(args.problems).states()[: args.count]  # the run's domain is checked below
    print(f"{args.problems}: first {len(levels)} levels, budget {args.budget}, {args.evaluator} evaluator")
    print(f"{'model':60s} solved reached (levels per furthest step)    depth  exit   exp/s")
    config = policy_settings(load_run_config(args.run / "config.toml"), args.mixture, args.alpha)
    alpha = config.subgoal.alpha_train if args.evaluator == "train" else config.subgoal.alpha_test
    domain = read_levels(args.problems, config.run.domain).domain
    order = args.evaluation_batch or config.search.evaluation_batch or 1
    print(f"evaluation batch {order} ({'exact best-first order' if order == 1 else 'buffered order'})")
    interim = tuple(sorted({bound for bound in args.within if bound < args.budget}))
    rows = []
    for label in args.weights:
        method = method_with_weights(args.run, label, domain, levels[0], config)
        evaluator = method.evaluator() if args.evaluator == "train" else method.test_evaluator()
        start = time.perf_counter()
        results = search_lockstep(domain, levels, method.algorithm, evaluator, budget=args.budget,
                                  epsilon=config.bootstrap.epsilon, batch_size=order,
                                  record_graph=True, interim_budgets=interim)  # fmt: skip
        seconds = time.perf_counter() - start
        found = progress(domain, levels, results)
        histogram = " ".join(f"{steps}:{count}" for steps, count in found["histogram"].items())
        print(f"{label[-60:]:60s} {found['solved']:6d} {found['reached']:7.2f} ({histogram:32s}) "
              f"{found['depth']:6.1f} {found['exit']:5d} {found['expanded'] / seconds:7.0f}")  # fmt: skip
        within = {f"solved_within_{bound}": sum(result.within(bound).solved for result in results)
                  for bound in args.within}  # fmt: skip
        if within:
            print("    " + ", ".join(f"{key.removeprefix('solved_')}: {count}" for key, count in within.items()))
        updates = updates_of(label)
        rows.append({"weights": label, "updates": "" if updates is None else updates, "mixture": config.subgoal.mixture,
                     "alpha": alpha if config.run.algorithm.endswith("-sg") else "",
                     "evaluation_batch": order,
                     "levels": len(levels),
                     "budget": args.budget, "solved": found["solved"], "reached": f"{found['reached']:.3f}",
                     "histogram": histogram, "depth": f"{found['depth']:.1f}", "exit": found["exit"],
                     **within, "solved_levels": found["solved_levels"]})  # fmt: skip
    if args.csv is not None:
        write_rows(args.csv, rows)


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write `rows` (dictionaries with the same keys, in order) to the CSV file `path`, with a header."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
