"""Where a run's searches run: the one place that picks the pool, and the defaults it picks by.

Training (`sgps.runs.runner.train`) and testing (`sgps.runs.runner.test`) search in
this process, in local search processes or on Ray actors. `search_pool` picks among the
pools beside this module from the run's settings and the command's executor:

- ``local`` with one worker: no pool, the searches run in this process in lockstep;
- ``local`` with more: search processes around the method's own evaluator
  (`SharedEvaluatorPool`) where `run.evaluator` places evaluation in this process, else
  processes with a model copy each (`SearchPool`, one torch thread each);
- ``ray``: Ray actors with a CPU copy of the model each (`RaySearchPool`).

Where the searches run never changes a run's results. The defaults for a run that
does not say (workers, threads) are here too, each with the measurement that set it;
those picked by the model's device (`run.evaluator = "auto"`, `search.evaluation_batch = 0`)
are `sgps.training.setup.evaluator_place` and `default_evaluation_batch`, which the method
plug-ins use too.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from sgps.errors import ConfigError
from sgps.execution.pool import SearchPool, SharedEvaluatorPool, request_rows
from sgps.execution.ray_pool import RaySearchPool, cluster_cpus, connect
from sgps.training.bootstrap import Method
from sgps.training.config import TrainConfig
from sgps.training.setup import evaluator_place, pick_device

#: The pools `search_pool` picks among: each searches a batch (`BatchSearcher`) and streams a test's
#: levels (`search_stream`, the next level's search starting as soon as one ends).
Pool = SearchPool | SharedEvaluatorPool | RaySearchPool


@contextlib.contextmanager
def search_pool(
    executor: str,
    workers: int,
    domain: Any,
    example: Any,
    method: Method,
    config: TrainConfig,
    *,
    ray_address: str | None = None,
) -> Iterator[Pool | None]:
    """The pool the run's searches go to (None: this process), open for the block and closed after it.

    `workers`: search processes of a local pool (1: none), or Ray actors (0: one per CPU of
    the cluster); `example`: a level's state, for the workers to build their networks.
    """
    if executor == "ray":
        with RaySearchPool(workers, domain, example, config, address=ray_address) as pool:
            yield pool
    elif workers <= 1:
        yield None
    elif evaluator_place(config.run.evaluator, pick_device(config.run.device).type) == "shared":
        share = -(-config.bootstrap.batch_size // workers)
        rows = request_rows(share, config.search.evaluation_batch, domain.num_actions)
        with SharedEvaluatorPool(workers, domain, example, method.algorithm, rows) as pool:
            yield pool
    else:
        with _one_thread_per_worker(), SearchPool(workers, domain, example, config) as pool:
            yield pool


def search_workers(executor: str, config: TrainConfig, device_type: str, ray_address: str | None = None) -> int:
    """The search processes or actors of a training run: `run.workers`, or when 0 one per usable core
    (`default_workers`), or one actor per CPU of the Ray cluster at `ray_address`, which is joined here
    (so that Ray missing or unreachable is refused before anything is written)."""
    if executor != "ray":
        return config.run.workers or default_workers(evaluator_place(config.run.evaluator, device_type))
    if config.run.evaluator == "shared":
        raise ConfigError('run.evaluator = "shared" is for local search processes; Ray actors evaluate with '
                          "their own CPU copies (drop it, or use --executor local)")  # fmt: skip
    ray = connect(ray_address)
    return config.run.workers or cluster_cpus(ray)


@contextlib.contextmanager
def _one_thread_per_worker() -> Iterator[None]:
    """One OpenMP / MKL thread in the search workers spawned meanwhile (they inherit the environment)."""
    saved = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    os.environ.update(dict.fromkeys(saved, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_threads(threads: int) -> None:
    """Refuse a thread count below 1 or above the cores this process may use (more threads than
    cores only slow torch down, and a million of them crash the process)."""
    cores = usable_cores()
    if not 1 <= threads <= cores:
        raise ConfigError(f"--threads must be from 1 to {cores} (the cores this process may use), got {threads}")


def usable_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_workers(place: str) -> int:
    """Search processes of a local run (`run.workers = 0`): one per usable core, or one fewer
    around a shared evaluator on a machine with more than 2 cores, so that the evaluating
    process has a core of its own (H200 box, 16 cores: 15 processes searched 1.1x faster than
    16; docs/training.md, "Scaling")."""
    cores = usable_cores()
    return cores - 1 if place == "shared" and cores > 2 else cores


def default_threads() -> int:
    """Torch threads of a training process: OMP_NUM_THREADS where set, else every usable core.

    The process and its search pool never compute at once (the workers search while it
    waits; it learns while they wait), and the workers run one thread each, so a lone
    run may use every core. Runs side by side must say so (`sgps compare` sets both).
    """
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else usable_cores()
