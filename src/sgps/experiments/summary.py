"""A comparison's headline numbers as a plain-text table for the terminal (`sgps demo`).

One row per algorithm, means over its finished seeds: training problems solved, training
expansions and minutes, then the first test set's solved count, mean expansions and mean
length (over the solved problems, as the paper counts). `sgps report` writes the full
tables with their spreads; this is the short version a user reads after a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sgps.errors import ConfigError
from sgps.experiments.plan import read_plan
from sgps.experiments.problems import count_levels, problem_files
from sgps.experiments.report import GUARD_MARK, OFFLINE_ALGORITHMS, marked_label, solved_count
from sgps.experiments.results import guard_cut_runs, load_results


def terminal_summary(out: Path) -> str:
    """The table of the comparison in folder `out` (finished runs only)."""
    stored = out / "compare.toml"
    if not stored.exists():
        raise ConfigError(f"{out}: no compare.toml here; run `sgps compare CONFIG --out {out}` first")
    plan = read_plan(stored, check_files=False, recorded=True)
    results = [r for r in load_results(plan, out, count_levels(problem_files(plan, out).train)) if r.finished]
    cut = {r.spec.variant for r in guard_cut_runs(results)}
    test = plan.tests[0] if plan.tests else None
    header = ["algorithm", "seeds", "train solved", "train expansions", "minutes"]
    if test is not None:
        header += [f"{test.name}: solved", "mean expansions", "mean length"]
    rows = [header]
    for variant in plan.variants:
        runs = [r for r in results if r.spec.variant == variant]
        if not runs:
            continue
        row = [marked_label(plan, variant, cut), str(len(runs)),
               f"{solved_count(_mean([r.solved for r in runs]))} of {runs[0].train_count:,}",
               f"{_mean([r.total_expansions for r in runs]):,.0f}",
               f"{_mean([r.hours * 60 for r in runs]):.1f}"]  # fmt: skip
        if plan.algorithm_of(variant) in OFFLINE_ALGORITHMS:  # HIPS-ε learns from a solver's trajectories
            row[2:4] = ["offline", "-"]
        if test is not None:
            scores = [r.tests[test.name] for r in runs if test.name in r.tests]
            tested = "" if len(scores) == len(runs) else f" ({len(scores)} tested)"  # means over the tested seeds
            solved = solved_count(_mean([s.solved for s in scores]))
            row += [f"{solved} of {scores[0].problems}{tested}" if scores else "-",
                    _seeds_mean([s.mean_expansions for s in scores], ",.1f"),
                    _seeds_mean([s.mean_length for s in scores], ".2f")]  # fmt: skip
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width)
                       in enumerate(zip(row, widths, strict=True))) for row in rows]  # fmt: skip
    if cut:
        lines.append(f"{GUARD_MARK} cut by a guard (time or iteration limit) before its expansion budget: not a result")
    return "\n".join(lines)


def _mean(values: Sequence[float | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _seeds_mean(values: Sequence[float | None], spec: str) -> str:
    """The mean over the seeds that have a value (a test's means need a solved level), and how many
    of them those are when not all."""
    present = [value for value in values if value is not None]
    if not present:
        return "-"
    over = "" if len(present) == len(values) else f" ({len(present)} of {len(values)} seeds)"
    return format(sum(present) / len(present), spec) + over
