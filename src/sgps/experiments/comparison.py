"""`sgps compare CONFIG --out DIR`: every (algorithm, seed) of a comparison config, trained and tested.

The comparison folder::

    DIR/compare.toml            the resolved config (a changed config on the same DIR is refused,
                                except for added algorithms, variants and seeds: new runs;
                                and raised limits: the runs train on)
    DIR/problems/               the problem sets (problems.py)
    DIR/configs/NAME-sSEED.toml the training config of each run
    DIR/runs/NAME-sSEED/        each run's ordinary run directory (`sgps test`, `sgps subgoals` work on it)
    DIR/logs/NAME-sSEED.log     the output of each run's `sgps train` / `sgps test` processes

Running it again on the same folder skips finished runs and resumes interrupted ones. A
config that only adds algorithms, variants or seeds grows the comparison: the new runs train
on the same problems and the finished ones are kept as they are. A config that raises the
training limits (`bootstrap.max_expansions`, `max_iterations`, `time_limit_minutes`) carries
the comparison further: every run a limit stopped trains on from its last checkpoint to the
new limits, as if it had been started with them, and is tested again; lowering one is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from sgps.domains import get_domain, read_levels
from sgps.errors import ConfigError
from sgps.execution.placement import usable_cores
from sgps.execution.ray_pool import check_executor, cluster_cpus, connect
from sgps.experiments.concurrency import Concurrency, plan_concurrency
from sgps.experiments.launchers import Launcher, LocalLauncher, RayLauncher, largest_node_cpus
from sgps.experiments.plan import ComparePlan, changed_keys, read_plan
from sgps.experiments.problems import (
    ProblemFiles,
    changed_problem_files,
    count_levels,
    pending_problems,
    problem_files,
    record_problem_digests,
    write_problems,
)
from sgps.experiments.progress import ProgressDisplay
from sgps.experiments.results import (
    buffered_warning,
    damaged_warning,
    guard_cut_runs,
    guard_warning,
    load_results,
    stale_warning,
    unnamed_warning,
)
from sgps.experiments.runner import DONE, FAILED, PAUSED, Job, Scheduler
from sgps.experiments.tomlfile import dumps
from sgps.fileio import atomic_write_text, open_regular
from sgps.models.hips import HipsModel
from sgps.outputs import COMPARISON, FOLDER, Output, check_outputs
from sgps.runs.memory import check_hips_memory
from sgps.runs.rundir import to_toml
from sgps.runs.runner import check_run_fits
from sgps.training.bootstrap import LIMIT_SETTINGS
from sgps.training.config import applicable_settings
from sgps.training.methods.hips import run as hips
from sgps.training.session import Session
from sgps.training.tensorboard import require_tensorboard


@dataclass(frozen=True)
class CompareOutcome:
    """How every run of a comparison ended."""

    out: Path
    jobs: Sequence[Job]
    concurrency: Concurrency
    plan: ComparePlan
    train_total: int  # problems in the training file (validation included when held out)

    def names(self, status: str) -> list[str]:
        return [job.run.name for job in self.jobs if job.status == status]

    def summary(self) -> str:
        done_now = sum(job.status == DONE and job.commands > 0 for job in self.jobs)
        done = len(self.names(DONE))
        parts = [f"{done} done ({done - done_now} earlier)", f"{len(self.names(PAUSED))} paused",
                 f"{len(self.names(FAILED))} failed"]  # fmt: skip
        return f"{len(self.jobs)} runs: {', '.join(parts)} -> {self.out} (next: sgps report {self.out})"

    def failure(self) -> str | None:
        """One line naming the failed runs and why, or None."""
        failed = [job for job in self.jobs if job.status == FAILED]
        if not failed:
            return None
        named = "; ".join(f"{job.run.name}: {job.error}" for job in failed)
        return f"{len(failed)} of {len(self.jobs)} runs failed ({named}); their output is in {self.out / 'logs'}"

    def warnings(self) -> list[str]:
        """Lines naming the finished runs whose training a guard (wall clock, iterations) cut, the
        test records that are not counted (cut, duplicated, edited, unreadable, or made with other
        weights than their run's now) and those counted without naming their weights or not
        searched in exact order."""
        results = load_results(self.plan, self.out, self.train_total)
        lines = (guard_warning(guard_cut_runs(results)), damaged_warning(results), stale_warning(results),
                 unnamed_warning(results), buffered_warning(results))  # fmt: skip
        return [line for line in lines if line]


def compare(
    config: Path,
    out: Path,
    *,
    jobs: int | None = None,
    threads: int | None = None,
    max_batches: int | None = None,
    session_minutes: float | None = None,
    plugins: Sequence[str] = (),
    stream: TextIO | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    tensorboard: bool = False,
) -> CompareOutcome:
    """Run (or go on with) the comparison `config` in folder `out`.

    `jobs` / `threads`: runs at a time and threads per run (default: planned from the usable
    cores); `max_batches`: train each run for at most that many more batches, leaving it to
    resume; `session_minutes`: be done within that many minutes, each training run pausing at a
    checkpoint (`sgps.training.session`), no command starting later and the tests still running
    then stopped (their finished attempts are kept), leaving the runs to resume; `plugins`:
    modules the child processes import (``sgps --plugin``). Everything is checked before
    anything is written: a bad config is a `ConfigError`.
    `executor`: ``local`` runs the commands as child processes here; ``ray`` as Ray tasks
    on the cluster at `ray_address` (or a local Ray instance), planned over the cluster's
    CPUs (`sgps.experiments.launchers`). `tensorboard`: each training run also logs to
    TensorBoard in ``out/tensorboard/RUN`` (`sgps.training.tensorboard`).
    """
    session = None if session_minutes is None else Session.lasting(session_minutes)  # the clock starts now
    if max_batches is not None and max_batches < 1:
        raise ConfigError("--max-batches must be at least 1")
    check_outputs([Output("--out", out, FOLDER, owner=COMPARISON)], [("config", config)])
    out = out.resolve()  # the commands may run elsewhere (Ray tasks on other nodes, other working folders)
    check_executor(executor)
    if tensorboard:
        require_tensorboard()
    plan = read_plan(config)
    launcher: Launcher = LocalLauncher()
    cores, node_cores = usable_cores(), None
    if executor == "ray":
        ray = connect(ray_address)
        launcher, cores, node_cores = RayLauncher(ray), cluster_cpus(ray), largest_node_cpus(ray)
    concurrency = plan_concurrency(cores, len(plan.runs), jobs=jobs, threads=threads)
    if node_cores is not None and concurrency.threads > node_cores:  # a run's threads must fit on one node
        concurrency = plan_concurrency(cores, len(plan.runs), jobs=jobs, threads=node_cores)
    _refuse_changes(config, out, plan)
    files = problem_files(plan, out)
    pending = pending_problems(plan, files, str(config))
    if executor == "local" or ray_address is None:  # the runs go to this machine (a Ray cluster's nodes: not)
        _check_runs_fit(config, plan, files, pending, concurrency.workers)
    with _locked(out):
        _refuse_changes(config, out, plan)
        changed = changed_problem_files(files)
        if changed:
            raise ConfigError(f"{changed[0]}: its levels differ from those this comparison wrote (digest in "
                              f"{files.digests}), which its runs searched; restore the file, or choose another "
                              "--out")  # fmt: skip
        atomic_write_text(out / "compare.toml", dumps(plan.resolved))
        write_problems(plan.domain, pending)
        record_problem_digests(files)
        total = count_levels(files.train)
        queue = []
        for run in plan.runs:
            run_config = out / "configs" / f"{run.name}.toml"
            settings = (applicable_settings(run.config.as_dict(), run.config.run.algorithm) if run.config is not None
                        else {"hips": dict(run.hips or {})})  # fmt: skip
            atomic_write_text(run_config, to_toml(settings))
            queue.append(Job(run, out / "runs" / run.name, run_config, out / "logs" / f"{run.name}.log",
                             plan.train_count(run, total)))  # fmt: skip
        display = ProgressDisplay(stream or sys.stdout)
        display.event(f"compare {config} -> {out}: {len(queue)} runs, {concurrency.describe()}")
        board = out / "tensorboard" if tensorboard else None
        Scheduler(plan, files, queue, concurrency, display, max_batches=max_batches, session=session,
                  plugins=plugins, launcher=launcher, tensorboard=board).run()  # fmt: skip
    return CompareOutcome(out, queue, concurrency, plan, total)


def _check_runs_fit(
    config: Path, plan: ComparePlan, files: ProblemFiles, pending: Sequence[tuple[Path, Any, list[Any]]], workers: int
) -> None:
    """Refuse, before the comparison's folder is made, a run whose networks cannot fit in this machine's
    memory: the estimate its `sgps train` makes at its start (`sgps.runs.memory`), on the training
    levels as they are or are about to be written. Each run would otherwise fail alone, after
    the folder, its compare.toml and problems were written, and the corrected config be refused
    as a change of the comparison. The error names the config and the run."""
    generated = {path: states for path, _, states in pending}
    states = generated[files.train] if files.train in generated else read_levels(files.train, plan.domain).states()
    domain = get_domain(plan.domain)
    for run in plan.runs:
        try:
            if run.config is not None:
                check_run_fits(domain, states[0], run.config, plan.train_count(run, len(states)), workers=workers)
            else:
                _check_hips_fits(domain, states[0], plan.resolved["compare"]["preset"], run.hips or {}, config)
        except ConfigError as error:
            raise ConfigError(f"{config}: the run {run.name}: {error}") from None


def _check_hips_fits(domain: Any, example: Any, preset: str, table: Mapping[str, Any], config: Path) -> None:
    """Refuse HIPS-ε networks of the `preset` and the `[hips]` `table` that cannot fit, as its offline
    `sgps train` (on the CPU, as a comparison starts it) would refuse them at its start."""
    settings = hips.resolve_settings(preset, None, dict(table), origin=str(config))
    shape = domain.observation_shape(example)
    check_hips_memory(lambda: HipsModel(hips.model_config(settings, shape, domain.num_actions)), settings, shape)


def _refuse_changes(config: Path, out: Path, plan: ComparePlan) -> None:
    """A `ConfigError` naming the keys in which `plan` differs from the one `out` was started with."""
    stored = out / "compare.toml"
    if not stored.exists():
        return
    earlier = read_plan(stored, check_files=False, recorded=True)  # a damaged file is a ConfigError naming it
    started = earlier.resolved
    keys = [key for key in changed_keys(started, plan.resolved)
            if not _adds_runs(key, started, plan.resolved) and not _is_limit(key)]  # fmt: skip
    if keys:
        named = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
        raise ConfigError(f"{config}: {named}: differ from {stored}, which the runs in {out} started with; "
                          "restore them (algorithms, variants and seeds may only be added, limits only raised) "
                          "or choose another --out")  # fmt: skip
    lowered = _lowered_limits(earlier, plan)
    if lowered:
        raise ConfigError(f"{config}: {lowered[0]}, lower than in {stored}: a comparison's limits may only be "
                          "raised (its runs may have trained past a lowered one, and its methods are compared at "
                          "equal expansions); restore it or choose another --out")  # fmt: skip


def _is_limit(key: str) -> bool:
    """Whether the changed `key` is a training limit (`LIMIT_SETTINGS`), of every run or of a variant's."""
    parts = key.split(".")
    shape = {3: ["train", "bootstrap"], 4: ["variants", parts[1], "bootstrap"]}.get(len(parts))
    return parts[:-1] == shape and parts[-1] in LIMIT_SETTINGS


def _lowered_limits(earlier: ComparePlan, plan: ComparePlan) -> list[str]:
    """`RUN: bootstrap.KEY OLD -> NEW` for every limit of a run of both plans that `plan` lowers (0: no limit)."""
    before = {run.name: run.config.bootstrap for run in earlier.runs if run.config is not None}
    lowered = []
    for run in plan.runs:
        if run.config is None or run.name not in before:
            continue
        for key in LIMIT_SETTINGS:
            old, new = getattr(before[run.name], key), getattr(run.config.bootstrap, key)
            if (new or math.inf) < (old or math.inf):
                lowered.append(f"{run.name}: bootstrap.{key} {old:,} -> {new:,}")
    return lowered


#: The lists a comparison may grow: each added entry is a new run on the same problems.
_GROWABLE = ("compare.algorithms", "compare.seeds")


def _adds_runs(key: str, started: Mapping[str, Any], resolved: Mapping[str, Any]) -> bool:
    """Whether the change at `key` only adds runs: a longer algorithm or seed list keeping every
    entry, or a variant that did not exist (a run is named by its algorithm or variant and its
    seed, and its settings depend on nothing else, so the finished runs stay valid); the `[hips]`
    table counts as added when no earlier run was HIPS-ε's."""
    if key in _GROWABLE:
        section, name = key.split(".")
        return set(started[section][name]) <= set(resolved[section][name])
    if key.startswith("variants."):
        return key.split(".")[1] not in started.get("variants", {})
    if key.startswith(("hips.", "problems.hips")):  # HIPS-ε's settings and levels: a change only if a run read them
        variants = started.get("variants", {})
        names = started["compare"]["algorithms"]
        return hips.ALGORITHM not in {variants.get(name, {}).get("algorithm", name) for name in names}
    return False


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold `out` for this comparison: a second `sgps compare` on the same folder is refused."""
    out.mkdir(parents=True, exist_ok=True)
    with open_regular(out / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"{out} is in use by another sgps compare") from None
        yield
