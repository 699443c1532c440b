"""`sgps report DIR`: the tables and learning curves of a comparison.

Writes, from the run directories alone:

- ``DIR/report.md``:
  - per test set, each algorithm's solved count, mean expansions and mean length as
    the mean over seeds with (min-max), and the row of the seed the paper's
    model-selection rule picks (spec/algorithms.md 6.8: most test problems solved, ties
    to the smallest total solution length, then the lowest seed);
  - the training totals: expansions, hours and training problems solved;
  - the paper's numbers beside ours, where the config gives them (``[paper.NAME]``;
    ``test`` is for the first test set);
  - for ablations (an algorithm under several variant names), the variants' settings,
    test results and mean subgoal distance, and that distance per cluster level;
- ``DIR/curves.png`` and ``DIR/curves.csv``: the learning curves (curves.py).

Only runs whose training finished are counted in the tables; runs still training (a
comparison in progress: the report reads complete rows only) are listed with where they
stand, and their curves so far are drawn dashed. A run whose training
a guard ended (the wall-clock or iteration limit, not its expansion budget or a stopping
rule) is no result of a comparison at equal expansions: its algorithm is marked ‡ in the
tables and the curve legend, and the report opens by saying that the comparison is not
decided.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sgps.errors import ConfigError
from sgps.experiments.curves import curve_bands, step_at, write_curves_csv, write_curves_png
from sgps.experiments.plan import ComparePlan, PaperNumbers, TestSet, read_plan
from sgps.experiments.problems import changed_problem_files, count_levels, problem_files
from sgps.experiments.results import (
    RunResult,
    TestResult,
    buffered_warning,
    damaged_records,
    damaged_warning,
    guard_cut_runs,
    guard_warning,
    load_results,
    record_notes,
    stale_warning,
    unnamed_warning,
)
from sgps.fileio import atomic_write_text
from sgps.outputs import COMPARISON, Output, check_outputs
from sgps.training.plugins import PLUGINS

LABELS = {"phs": "PHS*(π)", "levin": "LevinTS(π)", "wastar": "WA*", "phs-sg": "PHS*(π^SG)", "levin-sg": "LevinTS(π^SG)",
          "hips-eps": "HIPS-ε"}  # fmt: skip
#: Marks an algorithm some of whose runs a guard cut.
GUARD_MARK = "‡"
#: Trained offline, from the exact solver's trajectories: no training searches, no learning curve.
OFFLINE_ALGORITHMS = tuple(name for plugin in PLUGINS if not plugin.bootstrap for name in plugin.algorithms)
SUBGOAL_ALGORITHMS = ("phs-sg", "levin-sg")


#: What `write_report` writes into the comparison folder.
REPORT_FILES = ("report.md", "curves.png", "curves.csv")


@dataclass(frozen=True)
class WrittenReport:
    """Where `write_report` wrote report.md, and what the user must be told about the records it read."""

    path: Path
    warnings: tuple[str, ...]  # test records not counted; problem files edited since they were written


def write_report(out: Path) -> WrittenReport:
    """Write report.md, curves.png and curves.csv for the comparison in `out`."""
    check_outputs([Output("report", out / name, owner=COMPARISON) for name in REPORT_FILES])
    stored = out / "compare.toml"
    if not stored.exists():
        raise ConfigError(f"{out}: no compare.toml here; run `sgps compare CONFIG --out {out}` first")
    plan = read_plan(stored, check_files=False, recorded=True)
    files = problem_files(plan, out)
    results = load_results(plan, out, count_levels(files.train))
    changed = changed_problem_files(files)
    finished = [result for result in results if result.finished]

    cut = {result.spec.variant for result in guard_cut_runs(results)}

    def label(variant: str) -> str:
        return marked_label(plan, variant, cut)

    def markdown_label(variant: str) -> str:
        return label(variant).replace("*", "\\*")

    def legend_label(variant: str) -> str:
        return label(variant) + (" cut by a guard" if variant in cut else "")

    running = [result for result in results if not result.finished]
    bands = curve_bands(finished, plan.variants) + curve_bands(running, plan.variants, in_progress=True)
    write_curves_csv(out / "curves.csv", bands)
    search_time_only = any(r.curve is not None and not r.curve.measured_seconds for r in results)
    write_curves_png(out / "curves.png", bands, legend_label, search_time_only=search_time_only)
    path = out / "report.md"
    atomic_write_text(path, render_report(plan, results, markdown_label, search_time_only=search_time_only,
                                          changed_files=[path.relative_to(out) for path in changed]))  # fmt: skip
    notes = [line for line in (damaged_warning(results), stale_warning(results), unnamed_warning(results),
                               buffered_warning(results)) if line]  # fmt: skip
    if changed:
        notes.append(f"{', '.join(map(str, changed))}: the levels differ from those the runs searched "
                     f"(digests in {files.digests}); {path} says so")  # fmt: skip
    return WrittenReport(path, tuple(notes))


def variant_label(plan: ComparePlan, variant: str) -> str:
    """How the tables name a variant: the paper's name of its algorithm, or 'VARIANT (algorithm)'."""
    algorithm = plan.algorithm_of(variant)
    return LABELS[algorithm] if variant == algorithm else f"{variant} ({LABELS[algorithm]})"


def marked_label(plan: ComparePlan, variant: str, cut: Collection[str]) -> str:
    """`variant_label`, marked ‡ when the variant is in `cut` (some of its runs a guard ended)."""
    return variant_label(plan, variant) + (f" {GUARD_MARK}" if variant in cut else "")


def render_report(
    plan: ComparePlan,
    results: Sequence[RunResult],
    label: Callable[[str], str],
    *,
    search_time_only: bool,
    changed_files: Sequence[Path] = (),
) -> str:
    """The Markdown report; `changed_files`: problem files (relative to the folder) edited since they were written."""
    finished = [r for r in results if r.finished]
    lines = [f"# Comparison on {plan.domain}", ""]
    if changed_files:
        named = ", ".join(f"`{path}`" for path in changed_files)
        lines += [f"**Problem files changed** since the runs searched them: {named}. The results below are for "
                  "the levels as first written.", ""]  # fmt: skip
    lines.append(f"{len(finished)} of {len(plan.runs)} runs finished training; only those are counted in the test "
                 "and training tables.")  # fmt: skip
    started = {r.spec.name for r in results}
    waiting = [f"{r.spec.name} (in progress)" for r in results if not r.finished]
    waiting += [f"{spec.name} (not started)" for spec in plan.runs if spec.name not in started]
    if waiting:
        lines.append("Not counted: " + ", ".join(waiting) + ".")
    running = [r for r in results if not r.finished]
    if running:
        lines += _progress_table(plan, running, label)
    warning = guard_warning(guard_cut_runs(results))
    if warning is not None:
        lines += ["", f"**Not decided.** {GUARD_MARK}: {warning[0].upper()}{warning[1:]}."]
    damaged = damaged_records(results)
    if damaged:
        lines += ["", "**Test records not counted** (delete one and run `sgps compare` again to test anew):", ""]
        lines += [f"- {entry}" for entry in damaged]
    stale = record_notes(results, lambda result: result.stale)
    if stale:
        lines += ["", "**Test records made with other weights** than their run has now (it was trained further since): "
                  "not counted; `sgps compare` again tests those runs anew:", ""]  # fmt: skip
        lines += [f"- {entry}" for entry in stale]
    unnamed = record_notes(results, lambda result: result.unnamed)
    if unnamed:
        lines += ["", "**Test records made before records named their weights**: counted, but not checked against "
                  "their run's checkpoint (delete one and run `sgps compare` again to test anew):", ""]  # fmt: skip
        lines += [f"- {entry}" for entry in unnamed]
    buffered = record_notes(results, lambda result: result.buffered)
    if buffered:
        lines += ["", "**Test records not searched in exact order**: counted, but their searches gathered several "
                  "children before each evaluation (the reference trainer's order) where the test procedure "
                  "evaluates each node's children at once (spec 6.7), which changes their expansions (delete "
                  "one and run `sgps compare` again to test in exact order):", ""]  # fmt: skip
        lines += [f"- {entry}" for entry in buffered]
    untested = [f"{r.spec.name} on `{test.name}`" for r in finished for test in plan.tests
                if test.name not in r.tests and test.name not in r.damaged and test.name not in r.stale]  # fmt: skip
    if untested:
        lines += ["", f"Not tested yet (`sgps compare` again tests them): {', '.join(untested)}."]
    lines += ["", "Cells: mean over seeds, with (min-max) when there are several. The *best* columns are the seed",
              "the paper's model-selection rule picks: most test problems solved, then the smallest total",
              "solution length."]  # fmt: skip
    for index, test in enumerate(plan.tests):
        lines += _test_table(plan, test, finished, label, with_paper=index == 0)
    lines += _training_table(plan, finished, label)
    lines += _equal_expansions_table(plan, results, label)
    if len({plan.algorithm_of(v) for v in plan.variants}) < len(plan.variants):
        lines += _ablation_tables(plan, finished, label)
    axis = " The hours axis counts search time only: some runs logged no wall clock." if search_time_only else ""
    lines += ["", f"Learning curves: `curves.png` (numbers in `curves.csv`).{axis}"]
    return "\n".join(lines) + "\n"


def _progress_table(plan: ComparePlan, running: Sequence[RunResult], label: Callable[[str], str]) -> list[str]:
    """Where each run still training stands, from the rows it has written so far (dashed in the curves)."""
    lines = ["", "## In progress", "",
             "Runs still training (or interrupted), as far as their metrics go; their curves are dashed.", ""]
    lines += _table_head(["run", "algorithm", "seed", "pass", "budget", "expansions", "solved", "of", "hours"])
    for result in running:
        progress = result.progress
        lines.append(_table_row([
            result.spec.name, label(result.spec.variant), str(result.spec.seed),
            str(progress.iteration + 1) if progress else "-",
            _count(progress.budget) if progress and progress.budget is not None else "-",
            _count(result.total_expansions), _count(result.solved), _count(result.train_count),
            _hours(result.hours),
        ]))  # fmt: skip
    return lines


def _test_table(
    plan: ComparePlan, test: TestSet, finished: Sequence[RunResult], label: Callable[[str], str], *, with_paper: bool
) -> list[str]:
    cap = test.budget * 2 ** (test.rounds - 1)
    budgets = (f"Budget {test.budget:,}, doubled over {test.rounds} rounds (up to {cap:,})" if test.rounds > 1
               else f"Budget {test.budget:,}, one round")  # fmt: skip
    lines = ["", f"## Test set `{test.name}`", "",
             f"{budgets}; expansions and length are means over the solved problems.", ""]  # fmt: skip
    header = ["algorithm", "seeds", "solved", "expansions", "length", "best seed", "best: solved",
              "best: expansions", "best: length"]  # fmt: skip
    steps_column = any(plan.algorithm_of(v) in OFFLINE_ALGORITHMS for v in plan.variants)
    if steps_column:  # HIPS-ε's budget does not count its rollouts: compare the simulator's work too
        lines[-2] += (" Low-level steps: primitive transitions computed per solved problem (HIPS-ε's"
                      " rollouts included), which HIPS-ε's expansions do not count.")  # fmt: skip
        header.insert(4, "low-level steps")
    paper_column = with_paper and any(plan.paper.get(v, PaperNumbers()).test for v in plan.variants)
    if paper_column:
        header.append("paper: solved / expansions / length")
    lines += _table_head(header)
    for variant in plan.variants:
        runs = [(r.spec.seed, r.tests[test.name]) for r in finished
                if r.spec.variant == variant and test.name in r.tests]  # fmt: skip
        if not runs:
            continue
        scores = [score for _, score in runs]
        seed, best = select_best(runs)
        row = [label(variant), str(len(runs)), _spread([s.solved for s in scores], solved_count),
               _spread([s.mean_expansions for s in scores], _decimal),
               _spread([s.mean_length for s in scores], _decimal), str(seed), str(best.solved),
               _decimal(best.mean_expansions), _decimal(best.mean_length)]  # fmt: skip
        if steps_column:
            row.insert(4, _spread([s.mean_steps for s in scores], _count))
        if paper_column:
            row.append(_paper_test(plan.paper.get(variant, PaperNumbers()).test))
        lines.append(_table_row(row))
    return lines


def select_best(runs: Sequence[tuple[int, TestResult]]) -> tuple[int, TestResult]:
    """The (seed, result) the paper reports (spec 6.8): most solved, then the smallest total length, then seed."""
    return min(runs, key=lambda run: (-run[1].solved, run[1].total_length, run[0]))


def _training_table(plan: ComparePlan, finished: Sequence[RunResult], label: Callable[[str], str]) -> list[str]:
    lines = ["", "## Training", "",
             "Totals over each run: training expansions (failed searches included), wall-clock hours (validation",
             "and learning included) and training problems solved at least once.", ""]  # fmt: skip
    header = ["algorithm", "seeds", "expansions", "hours", "solved", "of", "stopped by"]
    paper_column = any(plan.paper.get(v, PaperNumbers()).train for v in plan.variants)
    if paper_column:
        header.append("paper: expansions / hours / solved")
    lines += _table_head(header)
    for variant in plan.variants:
        runs = [r for r in finished if r.spec.variant == variant]
        if not runs:
            continue
        row = [label(variant), str(len(runs)), _spread([r.total_expansions for r in runs], _count),
               _spread([r.hours for r in runs], _hours), _spread([r.solved for r in runs], solved_count),
               _spread([r.train_count for r in runs], _count), _stop_reasons(runs)]  # fmt: skip
        if plan.algorithm_of(variant) in OFFLINE_ALGORITHMS:
            row[2], row[4], row[6] = "offline (solver trajectories)", "-", "-"
        if paper_column:
            numbers = plan.paper.get(variant, PaperNumbers()).train
            row.append(" / ".join([_count(numbers[0]), _decimal(numbers[1]), _count(numbers[2])]) if numbers else "")
        lines.append(_table_row(row))
    return lines


def _equal_expansions_table(plan: ComparePlan, results: Sequence[RunResult], label: Callable[[str], str]) -> list[str]:
    """Training problems each algorithm had solved at equal expansions, runs still training included:
    the comparison the totals above are not where the runs stopped at different expansions or are
    still on their way. The runs are read at the fewest expansions any of them has made whose count
    could still grow (a finished run that solved all its problems keeps that count beyond its end),
    each at its last batch within them. Runs with no batch yet are left out. Empty unless two
    variants have searched a batch."""
    searched = [(r, r.curve) for r in results if r.curve is not None and len(r.curve.expansions) > 1]
    if len({r.spec.variant for r, _ in searched}) < 2:
        return []
    growing = [r.total_expansions for r, _ in searched if not (r.finished and r.solved == r.train_count)]
    common = min(growing or [r.total_expansions for r, _ in searched])
    at = np.array([common])
    lines = ["", "## At equal expansions", "",
             f"Training problems solved by {_count(common)} expansions, the fewest any run whose count could still",
             "grow has made (runs still training included, marked (in progress); a finished run that solved all",
             "its problems keeps that count), each run read after its last batch within them, at the expansions",
             "shown.", ""]  # fmt: skip
    lines += _table_head(["algorithm", "seeds", "expansions", "solved", "of"])
    for variant in plan.variants:
        runs = [(r, curve) for r, curve in searched if r.spec.variant == variant]
        if not runs:
            continue
        reached = [int(step_at(curve.expansions, curve.expansions, at)[0]) for _, curve in runs]
        solved = [r.train_count - int(step_at(curve.expansions, curve.outstanding, at)[0]) for r, curve in runs]
        running = "" if all(r.finished for r, _ in runs) else " (in progress)"
        counts = [r.train_count for r, _ in runs]
        lines.append(_table_row([label(variant) + running, str(len(runs)), _spread(reached, _count),
                                 _spread(solved, solved_count), _spread(counts, _count)]))  # fmt: skip
    return lines


def _stop_reasons(runs: Sequence[RunResult]) -> str:
    """Why the runs' training ended, with the number of seeds per reason when there are several."""
    counts = collections.Counter(r.stop_reason or "unknown" for r in runs)
    if len(runs) == 1:
        return next(iter(counts))
    return ", ".join(f"{reason} ({count})" for reason, count in counts.items())


def _ablation_tables(plan: ComparePlan, finished: Sequence[RunResult], label: Callable[[str], str]) -> list[str]:
    test = plan.tests[0]
    lines = ["", "## Ablation", "",
             "Settings of each variant, its mean subgoal distance (the mean path length of the pairs",
             f"drawn from failed trees, metrics/learning.csv) and its results on `{test.name}` (means over seeds).",
             ""]  # fmt: skip
    lines += _table_head(["variant", "K", "cluster level", "failed trees", "subgoal distance", "solved", "expansions",
                          "length", "paper: distance", "paper: solved / expansions / length"])  # fmt: skip
    by_level: dict[str, list[float]] = collections.defaultdict(list)
    paper_by_level: dict[str, float] = {}
    for variant in plan.variants:
        runs = [r for r in finished if r.spec.variant == variant]
        if not runs:
            continue
        subgoal = runs[0].spec.algorithm in SUBGOAL_ALGORITHMS
        settings = runs[0].settings.get("subgoal", {})
        level = _level(settings.get("cluster_level", 0)) if subgoal else "-"
        distances = [r.subgoal_distance for r in runs if r.subgoal_distance is not None]
        by_level[level].extend(distances)
        paper = plan.paper.get(variant, PaperNumbers())
        if paper.distance is not None:
            paper_by_level.setdefault(level, paper.distance)
        scores = [r.tests[test.name] for r in runs if test.name in r.tests]
        lines.append(_table_row([
            label(variant),
            str(settings.get("codebook_size", "-")) if subgoal else "-",
            level,
            ("yes" if settings.get("failed_trees", True) else "no") if subgoal else "-",
            _spread(distances, _decimal),
            _spread([s.solved for s in scores], solved_count),
            _spread([s.mean_expansions for s in scores], _decimal),
            _spread([s.mean_length for s in scores], _decimal),
            _decimal(paper.distance),
            _paper_test(paper.test),
        ]))  # fmt: skip
    lines += ["", "Mean subgoal distance per cluster level (over every run drawing pairs at that level):", ""]
    lines += _table_head(["cluster level", "runs", "subgoal distance", "paper"])
    for level, distances in by_level.items():
        if level != "-" and distances:
            lines.append(_table_row([level, str(len(distances)), _spread(distances, _decimal),
                                     _decimal(paper_by_level.get(level))]))  # fmt: skip
    return lines


def _level(value: int) -> str:
    return f"G{value}" if value else "rule ⌊L/2⌋−1"


def _paper_test(numbers: Sequence[float]) -> str:
    if not numbers:
        return ""
    if len(numbers) == 1:
        return f"{_count(numbers[0])} / - / -"
    return f"{_count(numbers[0])} / {_decimal(numbers[1])} / {_decimal(numbers[2])}"


def _spread(values: Sequence[float | None], fmt: Callable[[float], str]) -> str:
    """'mean (min-max)' over the values that exist; the value alone when they agree; '-' for none; and
    ', N of M seeds' when only N of the M have one (a test mean of the seeds that solved something)."""
    present = [float(v) for v in values if v is not None]
    if not present:
        return "-"
    over = "" if len(present) == len(values) else f", {len(present)} of {len(values)} seeds"
    if min(present) == max(present):
        return fmt(present[0]) + over
    return f"{fmt(float(np.mean(present)))} ({fmt(min(present))}-{fmt(max(present))}){over}"


def _count(value: float | None) -> str:
    """A count, or a mean of counts: whole from 1,000 up (a fraction of an expansion says nothing), else 2 decimals."""
    if value is None:
        return "-"
    if float(value).is_integer() or abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def solved_count(value: float | None) -> str:
    """Problems solved, or their mean over seeds: whole when whole, else 2 decimals however large (a
    mean of 10,000, 10,000 and 9,999 must not read as all 10,000)."""
    return "-" if value is None else f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _decimal(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _hours(value: float) -> str:
    return f"{value:.2f}" if value >= 1 else f"{value:.4f}"


def _table_head(columns: Sequence[str]) -> list[str]:
    return [_table_row(columns), _table_row(["---"] * len(columns))]


def _table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"
