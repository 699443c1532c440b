"""How many runs of a comparison go at once, and with how many threads each.

A comparison runs each (algorithm, seed) in its own `sgps train` process. On a CPU
machine the runs compete for the cores, so the plan never gives out more threads than
there are usable cores: `jobs * threads * workers <= cores`. Each run trains in its
own process (`--workers 1`): a pool of search workers pays per batch for shipping the
weights (docs/training.md, "Lockstep in one process, or a pool"), and spare cores are
better spent on other runs of the comparison. Its tests spread its threads over search
processes of one thread each (`sgps.experiments.runner`). The plan depends on the whole comparison,
not on the runs left to do, so a resumed comparison gives a run the thread count it
started with on the same machine (torch's results may differ between thread counts).
"""

from __future__ import annotations

from dataclasses import dataclass

from sgps.errors import ConfigError


@dataclass(frozen=True)
class Concurrency:
    """Concurrent runs, and the torch/OpenMP threads and search workers of each."""

    jobs: int
    threads: int
    workers: int = 1

    def describe(self) -> str:
        plural = "s" if self.threads > 1 else ""
        return f"{self.jobs} at a time, {self.threads} thread{plural} each"


def plan_concurrency(cores: int, runs: int, *, jobs: int | None = None, threads: int | None = None) -> Concurrency:
    """Jobs and threads per job for `runs` runs on `cores` cores.

    By default one run per core, and a comparison with fewer runs than cores shares the
    spare cores out as threads. `jobs` and `threads` (the command's --jobs and --threads)
    ask for a number; a request that would oversubscribe the cores is cut down, jobs
    first when both are given.
    """
    if cores < 1:
        raise ValueError("a machine has at least one core")
    for name, value in (("--jobs", jobs), ("--threads", threads)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1")
    threads = min(threads, cores) if threads is not None else None
    most = cores // threads if threads is not None else cores
    jobs = max(1, min(jobs or most, most, runs))
    if threads is None:
        threads = max(1, cores // jobs)
    return Concurrency(jobs=jobs, threads=threads)
