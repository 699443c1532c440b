"""`sgps train`, `sgps test`, `sgps subgoals`: train into a run directory, test it, look at its subgoals."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from sgps.domains.levels import read_levels, states_digest
from sgps.errors import ConfigError
from sgps.fileio import atomic_write_text
from sgps.models.checkpoint import weights_digest
from sgps.outputs import FOLDER, Output, check_outputs
from sgps.search.engine import SearchResult
from sgps.search.shared import evaluator_place
from sgps.training.bootstrap import BatchSearcher, Bootstrap, LoopState, Method
from sgps.training.config import (
    TrainConfig,
    check_options_apply,
    given_options,
    load_run_config,
    option_flag,
    resolve_config,
)
from sgps.training.methods.hips import run as hips
from sgps.training.methods.subgoal.view import SubgoalView, decode_subgoals
from sgps.training.pool import SearchPool, SharedEvaluatorPool, request_rows
from sgps.training.ray_pool import RaySearchPool, check_executor, cluster_cpus, connect
from sgps.training.rundir import RUN_FILES, RunDirectory, to_toml
from sgps.training.setup import (
    SUBGOAL_COSTS,
    build_method,
    build_subgoal_method,
    pick_device,
    setup_frozen,
    training_and_validation,
)
from sgps.training.tensorboard import TensorBoardLog, remove_run_events, require_tensorboard
from sgps.training.testing import TestProgress, TestSummary, attempt_identity, record_path, run_test
from sgps.version import sgps_version


def train(
    problems: Path,
    out: Path,
    *,
    domain: str | None = None,
    validation: Path | None = None,
    preset: str | None = None,
    config_file: Path | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    resume: bool = False,
    quiet: bool = False,
    threads: int | None = None,
    max_batches: int | None = None,
    overwrite: bool = False,
    executor: str = "local",
    ray_address: str | None = None,
    spell: Callable[[str], str] = option_flag,
) -> tuple[TrainConfig, LoopState]:
    """Train on the levels in `problems` into run directory `out` (or resume it).

    A fresh run refuses a folder that already holds run files unless `overwrite` (which
    deletes those files, and only those, once everything else has been checked). The
    folder is locked while training: a second process on it fails at once. A resumed
    run keeps its ``config.toml``: only the `RESUME_OVERRIDES` may be given (and are
    written back), and a changed configuration or problem set is refused.
    `preset`: ``cpu`` when None (fresh runs only).
    `threads`: torch threads of this process (default: `default_threads`);
    `max_batches`: stop after that many batches (after a checkpoint), to go on with `resume`.
    `executor`: ``local`` searches in this process or a pool of local worker processes
    (`run.workers`); ``ray`` on Ray actors (`sgps.training.ray_pool`), `run.workers` of them
    (0: one per CPU of the cluster), joining the cluster at `ray_address` or starting a
    local Ray instance. Where the searches run does not change the run's results.
    `spell`: how the caller names an option of `TRAIN_OPTIONS` in messages (the flag by default).
    """
    if max_batches is not None and max_batches < 1:
        raise ConfigError("--max-batches must be at least 1")
    if resume and overwrite:
        raise ConfigError("--resume continues the run in --out and --overwrite replaces it: give one of them")
    check_run_outputs(out, overrides, inputs=(("--problems", problems), ("--validation", validation),
                                              ("--config", config_file)))  # fmt: skip
    if resume:
        config = _resumed_config(out, preset, config_file, overrides)
    else:
        if RunDirectory(out).holds_a_run() and not overwrite:
            raise ConfigError(
                f"{out} already holds a run; pass --resume to continue it, --overwrite to replace it, "
                "or choose another --out"
            )
        config = resolve_config(preset or "cpu", config_file, overrides, spell)
        check_options_apply(config.run.algorithm, given_options(overrides), spell)
    if domain and config.run.domain and domain != config.run.domain:
        raise ConfigError(f"--domain {domain} contradicts run.domain = {config.run.domain!r}")
    levels = read_levels(problems, domain or config.run.domain or None)  # refuses files of another domain
    check_executor(executor)
    if config.run.tensorboard:  # before anything is written: a missing package or a bad folder is refused here
        require_tensorboard()
        check_outputs([Output("--tensorboard", Path(config.run.tensorboard), FOLDER), run_output(out)])
    device = pick_device(config.run.device)
    if executor == "ray" and config.run.evaluator == "shared":
        raise ConfigError('run.evaluator = "shared" is for local search processes; Ray actors evaluate with '
                          "their own CPU copies (drop it, or use --executor local)")  # fmt: skip
    if executor == "ray":  # before anything is written: Ray missing or unreachable is refused here
        ray = connect(ray_address)
        workers = config.run.workers or cluster_cpus(ray)
    else:
        workers = config.run.workers or default_workers(evaluator_place(config.run.evaluator, device.type))
    threads = default_threads() if threads is None else threads
    check_threads(threads)
    torch.set_num_threads(threads)
    run_settings = dataclasses.replace(config.run, domain=levels.domain.name, workers=workers)
    search_device = "cpu" if executor == "ray" else device.type  # Ray actors always search on their CPUs
    evaluation_batch = config.search.evaluation_batch or default_evaluation_batch(search_device)
    search_settings = dataclasses.replace(config.search, evaluation_batch=evaluation_batch)
    config = dataclasses.replace(config, run=run_settings, search=search_settings)
    train_levels, validation_levels = training_and_validation(problems, levels, validation, config)
    method = build_method(levels.domain, train_levels[0], config)
    run_dir = RunDirectory(out, method.report_columns)
    with contextlib.ExitStack() as stack:
        stack.enter_context(run_dir.lock())
        pool: BatchSearcher | None = None
        if executor == "ray":
            pool = stack.enter_context(RaySearchPool(workers, levels.domain, train_levels[0], config,
                                                     address=ray_address))  # fmt: skip
        elif workers > 1:
            pool = stack.enter_context(local_pool(workers, levels.domain, train_levels[0], method, config))
        fingerprint = run_fingerprint(config, levels.domain, train_levels, validation_levels)
        bootstrap = Bootstrap(levels.domain, train_levels, validation_levels, method, config.bootstrap, run_dir, pool,
                              fingerprint, evaluation_batch=config.search.evaluation_batch,
                              device=device.type)  # fmt: skip
        if resume:
            left_out = run_dir.keep_older_learning_columns()
            bootstrap.resume()
            finished = bootstrap.why_finished()
            if finished is not None:  # allowed, and nothing happens: say so, and how to go on
                warnings.warn(f"{out}: nothing trained: {finished}", stacklevel=2)
            else:
                _log_resume(run_dir, bootstrap, device.type)
            if left_out:
                run_dir.log(f"sgps {sgps_version()}: this run started before metrics/learning.csv had the columns "
                            f"{', '.join(left_out)}; they are not recorded for it")  # fmt: skip
            if overrides:
                atomic_write_text(out / "config.toml", to_toml(config.as_dict()))
        else:
            if overwrite:
                run_dir.clear()
                if config.run.tensorboard:  # the replaced run's events would mix with this one's
                    remove_run_events(Path(config.run.tensorboard), out)
            run_dir.create(config.as_dict())
            run_dir.log(f"sgps {sgps_version()}")
        if config.run.tensorboard:
            stack.callback(_follow_in_tensorboard(bootstrap, config, resume).close)
        with setup_frozen():
            state = _run_with_progress(bootstrap, len(train_levels), quiet, max_batches)
    return config, state


def _log_resume(run_dir: RunDirectory, bootstrap: Bootstrap, device: str) -> None:
    """Say in the run's log where it goes on, and whether it moved to another device (a run may
    move between a laptop and a GPU machine through its archive, `sgps.training.packing`)."""
    last = bootstrap.last_device
    moved = f", moved from {last}" if last is not None and last != device else ""
    run_dir.log(f"sgps {sgps_version()}: resumed on {device}{moved} at {bootstrap.state.cumulative_expansions} "
                f"expansions (iteration {bootstrap.state.iteration}, batch {bootstrap.state.next_batch})")


def run_output(out: Path) -> Output:
    """The run directory as an output: a folder whose run files `--overwrite` replaces."""
    return Output("--out", out, FOLDER, replaces=RUN_FILES)


def check_run_outputs(
    out: Path, overrides: Mapping[str, Mapping[str, Any]] | None, inputs: Sequence[tuple[str, Path | None]]
) -> None:
    """Check the run directory and the TensorBoard folder given as options before anything is created.

    A TensorBoard folder named in a config file is checked once the config is read; an
    empty ``--tensorboard`` would mean "no TensorBoard" without a word, so it is refused.
    """
    outputs = [run_output(out)]
    tensorboard = (overrides or {}).get("run", {}).get("tensorboard")
    if tensorboard is not None:
        if not str(tensorboard).strip():
            raise ConfigError("--tensorboard needs a folder for the event files, not an empty name")
        outputs.append(Output("--tensorboard", Path(tensorboard), FOLDER))
    check_outputs(outputs, inputs)


def _follow_in_tensorboard(bootstrap: Bootstrap, config: TrainConfig, resume: bool) -> TensorBoardLog:
    """A TensorBoard log of the run in `run.tensorboard`, listening to its loop from now on."""
    loop = bootstrap.state
    log = TensorBoardLog(Path(config.run.tensorboard), bootstrap.run_dir.path,
                         config_text=None if resume else to_toml(config.as_dict()),
                         resumed_at=loop.cumulative_expansions if resume else None, seconds=loop.seconds)  # fmt: skip
    bootstrap.listeners.append(log)
    return log


#: The settings a resumed run may change (its limits and where it runs); everything else is the run's.
RESUME_OVERRIDES = (
    ("bootstrap", "max_iterations"), ("bootstrap", "time_limit_minutes"), ("bootstrap", "max_expansions"),
    ("run", "workers"), ("run", "evaluator"), ("run", "device"), ("run", "tensorboard"),
)  # fmt: skip


def _resumed_config(
    out: Path, preset: str | None, config_file: Path | None, overrides: Mapping[str, Mapping[str, Any]] | None
) -> TrainConfig:
    """The run's own configuration, with the allowed overrides applied; other options are refused."""
    if preset is not None or config_file is not None:
        raise ConfigError("--preset and --config cannot be given with --resume: the run keeps its config.toml")
    refused = [f"{section}.{key}" for section, entries in (overrides or {}).items() for key in entries
               if (section, key) not in RESUME_OVERRIDES]  # fmt: skip
    if refused:
        allowed = ", ".join(f"{section}.{key}" for section, key in RESUME_OVERRIDES)
        raise ConfigError(f"{', '.join(refused)} cannot change when a run is resumed (allowed: {allowed})")
    return load_run_config(out / "config.toml", overrides)


def run_fingerprint(
    config: TrainConfig, domain: Any, train: Sequence[Any], validation: Sequence[Any]
) -> dict[str, str]:
    """What a resumed run must share with its start: every setting but `RESUME_OVERRIDES`, and the problems."""
    fingerprint = {
        f"{section}.{key}": repr(value)
        for section, entries in config.as_dict().items()
        for key, value in entries.items()
        if (section, key) not in RESUME_OVERRIDES
    }
    for name, levels in (("train", train), ("validation", validation)):
        fingerprint[f"problems.{name}"] = states_digest(domain, levels)
    return fingerprint


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


def default_evaluation_batch(device_type: str) -> int:
    """Children a search gathers per evaluation when `search.evaluation_batch = 0`: 1 (exact
    order) on a CPU, 32 (the reference trainer's buffered order) on a GPU, where it made
    learning faster in wall time although it costs expansions (docs/training.md, "The
    evaluation batch")."""
    return 32 if device_type == "cuda" else 1


def default_threads() -> int:
    """Torch threads of a training process: OMP_NUM_THREADS where set, else every usable core.

    The process and its search pool never compute at once (the workers search while it
    waits; it learns while they wait), and the workers run one thread each, so a lone
    run may use every core. Runs side by side must say so (`sgps compare` sets both).
    """
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else usable_cores()


@contextlib.contextmanager
def local_pool(workers: int, domain: Any, example: Any, method: Method, config: TrainConfig) -> Iterator[BatchSearcher]:
    """The local pool `run.evaluator` asks for: search processes around the method's own
    evaluator (`SharedEvaluatorPool`), or processes with a model copy each (`SearchPool`)."""
    if evaluator_place(config.run.evaluator, pick_device(config.run.device).type) == "shared":
        share = -(-config.bootstrap.batch_size // workers)
        rows = request_rows(share, config.search.evaluation_batch, domain.num_actions)
        with SharedEvaluatorPool(workers, domain, example, method.algorithm, rows) as pool:
            yield pool
        return
    with _one_thread_per_worker(), SearchPool(workers, domain, example, config) as pool:
        yield pool


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


def _run_with_progress(bootstrap: Bootstrap, train_count: int, quiet: bool, max_batches: int | None) -> LoopState:
    """Run the loop under a progress bar (iteration, budget, solved, expansions/s)."""
    started = time.perf_counter()
    with tqdm(desc="training", unit="batch", disable=quiet, leave=False) as bar:

        def progress(state: LoopState) -> None:
            bar.update(1)
            rate = state.cumulative_expansions / max(time.perf_counter() - started, 1e-9)
            bar.set_postfix(
                iteration=state.iteration,
                budget=state.train_budget,
                solved=f"{len(state.solved)}/{train_count}",
                exp_per_s=f"{rate:,.0f}",
            )

        return bootstrap.run(max_batches=max_batches, on_batch=progress)


def test(
    run: Path,
    problems: Path,
    *,
    budget: int = 4000,
    rounds: int = 1,
    checkpoint: str = "best",
    executor: str = "local",
    ray_address: str | None = None,
    progress: TestProgress | None = None,
    workers: int = 1,
) -> TestSummary:
    """Test a run's model (best, last or a checkpoint path) with budget doubling over `rounds`.

    `executor`: ``local`` searches in this process, or with `workers` > 1 in that many
    local search processes (`local_pool`: around one shared evaluator where the run's
    `run.evaluator` says so, else with a model copy each), each round's problems split
    between them; ``ray`` deals each round's problems to one Ray actor per CPU of the
    cluster at `ray_address` (or of a local instance). Where the searches run does not
    change the record. `progress`: told as each round's searches finish (`run_test`;
    in-process searches only).
    """
    if budget < 1 or rounds < 1:
        raise ConfigError("--budget and --rounds must be at least 1")
    if workers < 1 or workers > MAX_TEST_WORKERS:
        raise ConfigError(f"--workers must be from 1 to {MAX_TEST_WORKERS}, got {workers}")
    check_executor(executor)
    if hips.is_hips_run(run):
        if executor != "local" or workers != 1:
            where = f"--executor {executor}" if executor != "local" else f"--workers {workers}"
            raise ConfigError(f"{run}: a {hips.ALGORITHM} run is tested in this process; drop {where}")
        return hips.test(run, problems, budget=budget, rounds=rounds, checkpoint=checkpoint_path(run, checkpoint),
                         progress=progress)  # fmt: skip
    config = load_run_config(run / "config.toml")
    levels = read_levels(problems, config.run.domain)
    levels.observation_shape()
    states = levels.states()
    method = build_method(levels.domain, states[0], config)
    model_file = checkpoint_path(run, checkpoint)
    method.load_model(model_file)
    evaluation_batch = config.search.evaluation_batch or default_evaluation_batch(pick_device(config.run.device).type)
    config = dataclasses.replace(config, search=dataclasses.replace(config.search, evaluation_batch=evaluation_batch))
    with contextlib.ExitStack() as stack:
        search_batch = None
        if executor == "ray":
            pool = stack.enter_context(RaySearchPool(0, levels.domain, states[0], config, address=ray_address))
            search_batch = functools.partial(_test_round, pool, method, config.bootstrap.epsilon, evaluation_batch)
        elif workers > 1:
            pool = stack.enter_context(local_pool(workers, levels.domain, states[0], method, config))
            search_batch = functools.partial(_test_round, pool, method, config.bootstrap.epsilon, evaluation_batch)
        return run_test(
            levels.domain,
            states,
            method.algorithm,
            method.test_evaluator(),
            budget=budget,
            rounds=rounds,
            epsilon=config.bootstrap.epsilon,
            evaluation_batch=evaluation_batch,
            csv_path=record_path(run, problems),
            identity=attempt_identity(
                model_file,
                problems,
                budget=budget,
                rounds=rounds,
                epsilon=config.bootstrap.epsilon,
                evaluation_batch=evaluation_batch,
            ),
            weights=weights_digest(model_file),
            search_batch=search_batch,
            progress=progress,
        )


#: Search processes `sgps test --workers` starts at most.
MAX_TEST_WORKERS = 1024


def _test_round(
    pool: BatchSearcher, method: Method, epsilon: float, batch_size: int, levels: Sequence[Any], budget: int
) -> list[SearchResult]:
    """One round of the test procedure on `pool`, with the method's test evaluator."""
    return pool.search(method, levels, budget=budget, epsilon=epsilon, record_graph=False, batch_size=batch_size,
                       test=True)  # fmt: skip


def subgoals(run: Path, problems: Path, *, index: int = 0, checkpoint: str = "best") -> SubgoalView:
    """The K subgoals a phs-sg / levin-sg run's generator proposes for level `index` of `problems`."""
    if hips.is_hips_run(run):
        raise ConfigError(f"{run} trained {hips.ALGORITHM}; `sgps subgoals` draws π^SG's subgoals (phs-sg, levin-sg)")
    config = load_run_config(run / "config.toml")
    if config.run.algorithm not in SUBGOAL_COSTS:
        raise ConfigError(f"{run} trained {config.run.algorithm}, which has no subgoal generator (phs-sg, levin-sg)")
    levels = read_levels(problems, config.run.domain)
    if not 0 <= index < len(levels):
        raise ConfigError(f"{problems} has {len(levels)} levels; --index {index} is out of range")
    state = levels.levels[index].state
    method = build_subgoal_method(levels.domain, state, config)
    method.load_model(checkpoint_path(run, checkpoint))
    return decode_subgoals(levels.domain, method.model, state, last_code_counts(run, method.report_columns))


def last_code_counts(run: Path, report_columns: Sequence[str]) -> tuple[int, ...] | None:
    """The code use of the last training batch that logged one (metrics/learning.csv), if any."""
    try:
        rows = RunDirectory(run, report_columns).read("learning")
    except (OSError, csv.Error):
        return None
    for row in reversed(rows):
        counts = (row.get("code_counts") or "").split()
        if counts and all(count.isdigit() for count in counts):
            return tuple(int(count) for count in counts)
    return None


def checkpoint_path(run: Path, checkpoint: str) -> Path:
    """`best` (falling back to the latest when no validation has run yet), `last`, or a path."""
    named = {"best": run / "checkpoints" / "best.safetensors", "last": run / "checkpoints" / "latest.safetensors"}
    path = named.get(checkpoint, Path(checkpoint))
    if checkpoint == "best" and not path.exists():
        path = named["last"]
    return path
