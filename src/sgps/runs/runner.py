"""`sgps train`, `sgps test`, `sgps subgoals`: train into a run directory, test it, look at its subgoals."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import io
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from sgps.domains.levels import generated_set, read_levels, states_digest
from sgps.errors import CheckpointError, ConfigError
from sgps.execution.placement import (
    Pool,
    check_threads,
    default_threads,
    search_pool,
    search_workers,
)
from sgps.execution.pool import StreamOptions
from sgps.execution.ray_pool import check_executor
from sgps.fileio import atomic_write_text, open_regular
from sgps.models.checkpoint import weights_digest
from sgps.models.subgoal import SubgoalModel
from sgps.outputs import FOLDER, RUN, Output, check_outputs
from sgps.runs.memory import check_training_memory, concurrent_searches, searches_in_step
from sgps.runs.run import Run
from sgps.runs.rundir import RUN_FILES, RunDirectory, to_toml
from sgps.runs.testing import (
    TestProgress,
    TestSummary,
    attempt_identity,
    foreign_record,
    journal_path,
    level_set_digest,
    run_test,
)
from sgps.search.engine import SearchResult
from sgps.training.bootstrap import LIMIT_SETTINGS, BatchSearcher, Bootstrap, LoopState, changed_settings
from sgps.training.config import TrainConfig, check_options_apply, given_options, option_flag, resolve_config
from sgps.training.methods.plugin import RunSearch
from sgps.training.methods.subgoal.view import SubgoalView, decode_subgoals
from sgps.training.recipes import describe_recipe
from sgps.training.schema import MAX_EVALUATION_BATCH
from sgps.training.session import Session
from sgps.training.setup import (
    build_method,
    build_subgoal_method,
    default_evaluation_batch,
    pick_device,
    setup_frozen,
    training_and_validation,
)
from sgps.training.tensorboard import TensorBoardLog, remove_run_events, require_tensorboard
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
    session_minutes: float | None = None,
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
    `max_batches`: stop after that many batches (after a checkpoint), to go on with `resume`;
    `session_minutes`: stop likewise before a batch that would not be over within that many
    minutes of this call (`sgps.training.session`).
    `executor`: ``local`` searches in this process or a pool of local worker processes
    (`run.workers`); ``ray`` on Ray actors (`sgps.execution.ray_pool`), `run.workers` of them
    (0: one per CPU of the cluster), joining the cluster at `ray_address` or starting a
    local Ray instance. Where the searches run does not change the run's results.
    `spell`: how the caller names an option of `TRAIN_OPTIONS` in messages (the flag by default).
    """
    session = None if session_minutes is None else Session.lasting(session_minutes)  # the clock starts now
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
        config = resolve_config(preset or "cpu", config_file, overrides, spell, file_keys_apply=True,
                                generated_as=generated_set(problems))  # fmt: skip
        check_options_apply(config.run.algorithm, given_options(overrides), spell)
    if domain and config.run.domain and domain != config.run.domain:
        raise ConfigError(f"--domain {domain} contradicts run.domain = {config.run.domain!r}")
    levels = read_levels(problems, domain or config.run.domain or None)  # refuses files of another domain
    check_executor(executor)
    if config.run.tensorboard:  # before anything is written: a missing package or a bad folder is refused here
        require_tensorboard()
        check_outputs([Output("--tensorboard", Path(config.run.tensorboard), FOLDER), run_output(out)])
    device = pick_device(config.run.device)
    workers = search_workers(executor, config, device.type, ray_address)  # Ray missing or unreachable: refused now
    threads = default_threads() if threads is None else threads
    check_threads(threads)
    torch.set_num_threads(threads)
    config = resolved_run_config(config, levels.domain.name, device.type, workers, executor)
    train_levels, validation_levels = training_and_validation(problems, levels, validation, config)
    # Sizes that cannot fit are refused here, before the networks are built or the folder is made.
    check_training_memory(levels.domain, train_levels[0], config, len(train_levels), executor=executor,
                          ray_address=ray_address, device=device.type)  # fmt: skip
    method = build_method(levels.domain, train_levels[0], config)
    run_dir = RunDirectory(out, method.report_columns)
    with contextlib.ExitStack() as stack:
        stack.enter_context(run_dir.lock())
        pool: BatchSearcher | None = stack.enter_context(
            search_pool(executor, workers, levels.domain, train_levels[0], method, config, ray_address=ray_address)
        )
        fingerprint = run_fingerprint(config, levels.domain, train_levels, validation_levels)
        bootstrap = Bootstrap(levels.domain, train_levels, validation_levels, method, config.bootstrap, run_dir, pool,
                              fingerprint, evaluation_batch=config.search.evaluation_batch,
                              device=device.type)  # fmt: skip
        if resume:
            _check_resumed_checkpoint(run_dir)
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
            run_dir.log(describe_recipe(config.run.recipe))
        if config.run.tensorboard:
            stack.callback(_follow_in_tensorboard(bootstrap, config, resume).close)
        with setup_frozen():
            state = _run_with_progress(bootstrap, len(train_levels), quiet, max_batches, session)
    return config, state


def resolved_run_config(config: TrainConfig, domain: str, device: str, workers: int, executor: str) -> TrainConfig:
    """`config` as a run trains with it (and writes it to its config.toml): on levels of `domain`,
    with `workers` search processes (`search_workers`), its networks on the `device` type, and
    the evaluation batch that `search.evaluation_batch = 0` means there (Ray actors search on
    their CPUs)."""
    run_settings = dataclasses.replace(config.run, domain=domain, workers=workers)
    search_device = "cpu" if executor == "ray" else device
    evaluation_batch = config.search.evaluation_batch or default_evaluation_batch(search_device)
    search_settings = dataclasses.replace(config.search, evaluation_batch=evaluation_batch)
    return dataclasses.replace(config, run=run_settings, search=search_settings)


def check_run_fits(domain: Any, example: Any, config: TrainConfig, train_count: int, *, workers: int) -> None:
    """Refuse (`check_training_memory`) the run of `config` that `sgps train --workers WORKERS` would
    start on `train_count` levels like `example` of `domain` in a local process, and refuse at its
    start for want of memory: `sgps compare` asks before it makes its folder."""
    device = pick_device(config.run.device).type
    resolved = resolved_run_config(config, domain.name, device, workers, "local")
    check_training_memory(domain, example, resolved, train_count, device=device)


def _check_resumed_checkpoint(run_dir: RunDirectory) -> None:
    """Refuse to resume from a trainer checkpoint that another run wrote (`check_checkpoint_rows`: its
    expansions against the run's metrics/outstanding.csv); a missing or damaged checkpoint, and
    metrics that lost rows, are left to `Bootstrap.resume`, which names them."""
    path, outstanding = run_dir.checkpoints / "trainer.pt", run_dir.metrics / "outstanding.csv"
    if not path.is_file():
        return
    try:
        with open_regular(outstanding, "rb") as handle:
            files = {"metrics/outstanding.csv": handle.read()}
    except OSError:
        return
    check_checkpoint_rows(run_dir.path, files, run_dir.read_trainer_state(), counts=False)


def _log_resume(run_dir: RunDirectory, bootstrap: Bootstrap, device: str) -> None:
    """Say in the run's log where it goes on, and whether it moved to another device (a run may
    move between a laptop and a GPU machine through its archive, `sgps.runs.packing`)."""
    last = bootstrap.last_device
    moved = f", moved from {last}" if last is not None and last != device else ""
    run_dir.log(
        f"sgps {sgps_version()}: resumed on {device}{moved} at {bootstrap.state.cumulative_expansions} "
        f"expansions (iteration {bootstrap.state.iteration}, batch {bootstrap.state.next_batch})"
    )


def run_output(out: Path) -> Output:
    """The run directory as an output: a folder whose run files `--overwrite` replaces."""
    return Output("--out", out, FOLDER, replaces=RUN_FILES, owner=RUN)


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
    *(("bootstrap", key) for key in LIMIT_SETTINGS),
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
    return Run.open(out, overrides).config


def run_fingerprint(
    config: TrainConfig, domain: Any, train: Sequence[Any], validation: Sequence[Any]
) -> dict[str, str]:
    """What a resumed run must share with its start: every setting but `RESUME_OVERRIDES`, and the problems."""
    fingerprint = settings_fingerprint(config)
    for name, levels in (("train", train), ("validation", validation)):
        fingerprint[f"problems.{name}"] = states_digest(domain, levels)
    return fingerprint


def settings_fingerprint(config: TrainConfig) -> dict[str, str]:
    """The settings part of `run_fingerprint`: every setting of `config` but `RESUME_OVERRIDES`, as text.

    A run's config.toml gives the one its checkpoints recorded (`check_checkpoint` compares them
    before a run is packed or forked)."""
    return {
        f"{section}.{key}": repr(value)
        for section, entries in config.as_dict().items()
        for key, value in entries.items()
        if (section, key) not in RESUME_OVERRIDES
    }


#: The trainer checkpoint in a run folder (`sgps.runs.trainer_state`).
TRAINER = "checkpoints/trainer.pt"


def check_checkpoint(run: Path, config: TrainConfig, files: Mapping[str, bytes], state: Any, prefix: str = "") -> None:
    """Refuse a trainer checkpoint (decoded: `state`) that the run folder `run`, whose config.toml
    holds `config`, could not go on from: one whose config.toml was edited since it was written, or
    one that another run wrote (copied in). `files`: the run's files (member path under `prefix` ->
    bytes), the metrics among them (`check_checkpoint_rows`).

    `sgps pack` and `sgps fork` call it before they make anything: a fork would not resume, and
    an archive would carry another run's progress under this run's name. (A resume refuses
    changed settings itself, `Bootstrap.resume`.)
    """
    trainer = run / TRAINER
    if not isinstance(state, dict) or not {"loop", "method", "rng", "rows"} <= state.keys():
        raise CheckpointError(f"{trainer}: not a trainer checkpoint sgps reads (entries are missing)")
    saved = dict(state.get("fingerprint") or {})
    settings = changed_settings(saved, settings_fingerprint(config)) if saved else []
    if settings:
        details = ", ".join(f"{key} ({old} in the checkpoint, {new} in config.toml)" for key, old, new in settings)
        raise ConfigError(f"{run / 'config.toml'}: does not match the run's checkpoint {trainer}: {details}; the "
                          "run could not go on from it: put the old values back, or, if trainer.pt was copied "
                          "from another run, put the run's own back")  # fmt: skip
    check_checkpoint_rows(run, files, state, prefix)


def check_checkpoint_rows(
    run: Path, files: Mapping[str, bytes], state: Mapping[str, Any], prefix: str = "", *, counts: bool = True
) -> None:
    """Refuse a trainer checkpoint `state` that saw other metrics than those of the run folder `run`
    (`files`: the run's files, member path under `prefix` -> bytes): a last ``outstanding.csv`` row
    it saw that records other expansions than the checkpoint's own, and with `counts` (a resume
    leaves it to `RunDirectory.truncate`, which names the row) more rows of a metrics file than
    it holds. Both hold for every checkpoint of the run itself (a row is appended after each
    batch, and the checkpoint written after it, `Bootstrap.run`); a checkpoint copied in from
    another run fails them, whether its settings and problems are this run's or not."""
    trainer = run / TRAINER
    try:
        seen = {str(name): int(count) for name, count in dict(state["rows"]).items()}
        expansions = int(state["loop"]["cumulative_expansions"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{trainer}: not a trainer checkpoint sgps reads ({error})") from None
    for name, count in seen.items():
        member = f"metrics/{name}.csv"
        header, *rows = _csv_rows(files.get(f"{prefix}{member}", b"")) or [[]]
        if len(rows) < count:
            if not counts:
                continue
            found, why = f"holds {len(rows)}", "another run's (copied in), or the metrics lost rows"
        elif name == "outstanding" and count > 0 and "cumulative_expansions" in header:
            last = rows[count - 1]
            column = header.index("cumulative_expansions")
            recorded = last[column] if column < len(last) else ""
            if recorded == str(expansions):
                continue
            found, why = f"records {recorded or 'no'} expansions at that row", "another run's (copied in)"
        else:
            continue
        raise ConfigError(f"{trainer}: saw {count} rows of {member} at {expansions} expansions, but the run's "
                          f"{member} {found}: the checkpoint is {why}; the run could not go on from it: put its "
                          "own checkpoints/ and metrics/ back")  # fmt: skip


def _csv_rows(data: bytes) -> list[list[str]]:
    """The rows of a metrics file's bytes (header first); none for bytes that are no CSV text."""
    try:
        return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error):
        return []


def _run_with_progress(
    bootstrap: Bootstrap, train_count: int, quiet: bool, max_batches: int | None, session: Session | None
) -> LoopState:
    """Run the loop under a progress bar (iteration, budget, solved, expansions/s).

    The rate is this command's: a resumed run's earlier expansions are not divided by its seconds."""
    started, expansions_before = time.perf_counter(), bootstrap.state.cumulative_expansions
    with tqdm(desc="training", unit="batch", disable=quiet, leave=False) as bar:

        def progress(state: LoopState) -> None:
            bar.update(1)
            rate = (state.cumulative_expansions - expansions_before) / max(time.perf_counter() - started, 1e-9)
            bar.set_postfix(
                iteration=state.iteration,
                budget=state.train_budget,
                solved=f"{len(state.solved)}/{train_count}",
                exp_per_s=f"{rate:,.0f}",
            )

        return bootstrap.run(max_batches=max_batches, on_batch=progress, session=session)


def test(
    run: Path | Run,
    problems: Path,
    *,
    budget: int = 4000,
    rounds: int = 1,
    checkpoint: str = "best",
    executor: str = "local",
    ray_address: str | None = None,
    progress: TestProgress | None = None,
    workers: int = 1,
    record: bool = True,
    restart_rounds: bool = False,
    evaluation_batch: int = 1,
    refill: bool = True,
    at_once: int | None = None,
) -> TestSummary:
    """Test a run's model (best, last or a checkpoint path) with budget doubling over `rounds`.

    Each problem is searched once, through all its rounds, unless `restart_rounds` searches
    every round afresh: the same record (`run_test`).

    `run`: the run folder, or the run a command has opened already (`Run.of`). `record`:
    write the attempts to the run's test record (journalled, so an interrupted test
    resumes); a pretrained model's folder is read-only, so its tests record nothing.

    `executor`: ``local`` searches in this process, or with `workers` > 1 in that many
    local search processes (`sgps.execution.placement.search_pool`: around one shared
    evaluator where the run's `run.evaluator` says so, else with a model copy each);
    ``ray`` on one Ray actor per CPU of the cluster at `ray_address` (or of a local
    instance). Wherever they run, each process or actor takes the next of a round's problems
    as soon as one of its searches ends (the pool's `search_stream`), unless `refill=False`.
    Where the searches run does not change the record. `progress`: told as the searches
    finish (`run_test`; not with `refill=False` and several search processes or actors).
    `evaluation_batch`: children each search
    gathers before an evaluation; 1, exact best-first order, is the test procedure's (spec 6.7),
    whatever order the run trained in (its `search.evaluation_batch`). `refill=False`: the searches
    go in groups, each waiting for its longest (`run_test`; to measure what refilling saves).
    `at_once`: searches at a time over all search processes (default: as many as fit in half
    this machine's memory at the round's budget, `concurrent_searches`; where searches go in
    groups dealt to several local processes, rounded down to a multiple of them, `searches_in_step`).
    """
    check_test_request(budget, rounds, workers, executor, evaluation_batch)
    if at_once is not None and at_once < 1:
        raise ConfigError(f"at least one search must run at a time, got at_once = {at_once}")
    opened = Run.of(run)
    if not opened.plugin.bootstrap and (executor != "local" or workers != 1):
        where = f"--executor {executor}" if executor != "local" else f"--workers {workers}"
        raise ConfigError(f"{opened.path}: a {opened.algorithm} run is tested in this process (it learns offline, "
                          f"without a Bootstrap method to copy into search processes); drop {where}")  # fmt: skip
    levels = read_levels(problems, opened.domain)
    levels.observation_shape()
    states = levels.states()
    level_set = level_set_digest(problems)
    record_file = opened.record_path(problems) if record else None
    if record_file is not None:
        _check_record(record_file, problems, level_set, levels.domain, states)
    model_file = opened.checkpoint(checkpoint)
    weights = weights_digest(model_file)  # named before the load, checked after it
    trained = opened.searcher(states[0], model_file)
    identity = attempt_identity(model_file, problems, budget=budget, rounds=rounds, epsilon=trained.epsilon,
                                evaluation_batch=evaluation_batch)  # fmt: skip
    if weights_digest(model_file) != weights:
        raise CheckpointError(f"{model_file} was replaced while it was read (a training run still writing it?); "
                              "test again once it is finished, or give --checkpoint a copy of the weights")  # fmt: skip
    with contextlib.ExitStack() as stack:
        search_batch = search_stream = None
        if trained.method is not None and (executor == "ray" or workers > 1):
            config = opened.config
            config = dataclasses.replace(config, search=dataclasses.replace(
                config.search, evaluation_batch=evaluation_batch))  # fmt: skip
            pool = stack.enter_context(
                search_pool(
                    executor,
                    0 if executor == "ray" else workers,
                    levels.domain,
                    states[0],
                    trained.method,
                    config,
                    ray_address=ray_address,
                )
            )
            search_batch = functools.partial(_test_round, pool, trained, evaluation_batch)
            if refill:
                search_stream = functools.partial(_test_stream, pool, trained, evaluation_batch)
        searches_at_once: Callable[[int], int] = concurrent_searches  # refilled, or groups in one place
        if at_once is not None:
            searches_at_once = functools.partial(_fixed, at_once)
        elif search_batch is not None and search_stream is None and executor == "local":
            searches_at_once = functools.partial(searches_in_step, workers)  # groups dealt to the processes
        return run_test(levels.domain, states, trained.algorithm, trained.evaluator, budget=budget, rounds=rounds,
                        epsilon=trained.epsilon, evaluation_batch=evaluation_batch,
                        children=trained.children, csv_path=record_file, identity=identity,
                        weights=weights, level_set=level_set, search_batch=search_batch,
                        search_stream=search_stream, progress=progress, restart_rounds=restart_rounds, refill=refill,
                        at_once=searches_at_once)  # fmt: skip


def _fixed(count: int, budget: int) -> int:
    """`count` searches at a time whatever the round's `budget` (`test`'s `at_once`)."""
    return count


def _check_record(record: Path, problems: Path, level_set: str, domain: Any, states: Sequence[Any]) -> None:
    """Refuse, before any search, a test whose record or journal cannot be written, or would replace
    the record of another level set that shares the level file's name (`foreign_record`)."""
    check_outputs([Output("the test record", record, owner=RUN),
                   Output("the test journal", journal_path(record), owner=RUN)],
                  [("--problems", problems)])  # fmt: skip
    foreign = foreign_record(record, level_set, domain, states)
    if foreign is not None:
        raise ConfigError(f"{record} is the record of another level set named like {problems} ({foreign}); "
                          "a test would replace it: rename the level file, or move the old record away")  # fmt: skip


#: Search processes `sgps test --workers` starts at most.
MAX_TEST_WORKERS = 1024


def check_test_request(budget: int, rounds: int, workers: int, executor: str, evaluation_batch: int = 1) -> None:
    """Refuse a test's options that can never work, before its run is opened."""
    if budget < 1 or rounds < 1:
        raise ConfigError("--budget and --rounds must be at least 1")
    if not 1 <= evaluation_batch <= MAX_EVALUATION_BATCH:
        raise ConfigError(f"--evaluation-batch must be from 1 to {MAX_EVALUATION_BATCH}, got {evaluation_batch}")
    if workers < 1 or workers > MAX_TEST_WORKERS:
        raise ConfigError(f"--workers must be from 1 to {MAX_TEST_WORKERS}, got {workers}")
    check_executor(executor)


def _test_round(
    pool: BatchSearcher,
    trained: RunSearch,
    evaluation_batch: int,
    levels: Sequence[Any],
    budget: int,
    interim_budgets: tuple[int, ...],
) -> list[SearchResult]:
    """Searches of the test procedure on `pool`, with the trained method's test evaluator."""
    assert trained.method is not None
    return pool.search(trained.method, levels, budget=budget, epsilon=trained.epsilon, record_graph=False,
                       batch_size=evaluation_batch, test=True, interim_budgets=interim_budgets)  # fmt: skip


def _test_stream(
    pool: Pool,
    trained: RunSearch,
    evaluation_batch: int,
    levels: Sequence[Any],
    budget: int,
    interim_budgets: tuple[int, ...],
    concurrency: int,
    on_result: Callable[[int, SearchResult], None],
) -> None:
    """Searches of the test procedure on `pool`'s processes, `concurrency` at a time in all, each
    result told as it arrives (each pool's `search_stream`), with the trained method's test evaluator."""
    assert trained.method is not None
    options = StreamOptions(budget=budget, epsilon=trained.epsilon, batch_size=evaluation_batch,
                            interim_budgets=interim_budgets, test=True, concurrency=concurrency)  # fmt: skip
    pool.search_stream(trained.method, levels, options, on_result)


def subgoals(run: Path | Run, problems: Path, *, index: int = 0, checkpoint: str = "best") -> SubgoalView:
    """The K subgoals a phs-sg / levin-sg run's generator proposes for level `index` of `problems`."""
    opened = Run.of(run)
    if not opened.plugin.draws_subgoals:
        raise ConfigError(f"{opened.path} trained {opened.algorithm}, which has no subgoal generator to draw; "
                          "`sgps subgoals` draws those of phs-sg and levin-sg runs")  # fmt: skip
    levels = read_levels(problems, opened.domain)
    if not 0 <= index < len(levels):
        raise ConfigError(f"{problems} has {len(levels)} levels; --index {index} is out of range")
    state = levels.levels[index].state
    model = trained_subgoal_model(opened, state, checkpoint)
    return decode_subgoals(levels.domain, model, state, last_code_counts(opened.directory))


def trained_subgoal_model(run: Run, example: Any, checkpoint: str = "best") -> SubgoalModel:
    """The π^SG networks of the phs-sg / levin-sg `run`, sized for levels like `example`, with the
    weights of `checkpoint` (best, latest or a weights file)."""
    method = build_subgoal_method(run.domain, example, run.config)
    method.load_model(run.checkpoint(checkpoint))
    return method.model


def last_code_counts(directory: RunDirectory) -> tuple[int, ...] | None:
    """The code use of the last training batch that logged one (metrics/learning.csv), if any."""
    try:
        rows = directory.read("learning")
    except (OSError, csv.Error):
        return None
    for row in reversed(rows):
        counts = (row.get("code_counts") or "").split()
        if counts and all(count.isdigit() for count in counts):
            return tuple(int(count) for count in counts)
    return None
