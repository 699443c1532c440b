"""Comparisons of training methods, as in the paper's experiments (docs/experiments.md).

`compare` trains and tests every (algorithm, seed) of a comparison config, each in its
own `sgps train` process, concurrently and resumably; `write_report` turns the run
directories into tables (report.md) and learning curves (curves.png, curves.csv).
This package sits above `sgps.runs`, `sgps.execution` and `sgps.training` and only drives them;
`packing` packs a comparison folder, each of its runs as `sgps.runs.packing` does.
"""

from sgps.experiments.comparison import CompareOutcome, compare
from sgps.experiments.concurrency import Concurrency, plan_concurrency
from sgps.experiments.plan import ComparePlan, read_plan
from sgps.experiments.report import write_report

__all__ = ["CompareOutcome", "ComparePlan", "Concurrency", "compare", "plan_concurrency", "read_plan", "write_report"]
