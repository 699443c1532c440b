"""The Bootstrap search-and-learn loop (spec/algorithms.md section 6).

One loop serves every method. A `Method` supplies the search (its algorithm and an
evaluator over the current model) and what to learn from a batch of search results;
the loop supplies shuffling, batching, lockstep search, budgets, validation, the
stopping rule, metrics, checkpoints and resuming.

A run starts by logging (0 expansions, N outstanding). Per pass: shuffle the training
problems with the run's generator, cut them into batches (32 by default), search each
batch in lockstep with the current budget, log a row per search, make one model
update from the batch, log the outstanding count and the wall-clock time. Then search
the validation problems (no learning) and keep the best model so far (most validation
problems solved, then the shortest total solution length: spec 6.8). Stop when every
training problem has been solved (the paper's Algorithms 4 and 6), or one pass after the
cumulative validation-solved set reaches `validation_ratio` of them; otherwise update
the budget with the schedule. Limits on iterations, wall-clock time and total training
expansions end the run early (checked between batches).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from sgps.domains.base import Domain
from sgps.errors import CheckpointError, ConfigError
from sgps.search.costs import Algorithm
from sgps.search.drivers import search_lockstep
from sgps.search.engine import SearchResult
from sgps.search.evaluators import ObservationEvaluator
from sgps.training.budget import Budgets, PassOutcome, get_schedule
from sgps.training.randomness import numpy_state, restore_numpy_state
from sgps.training.session import Session, StepTimes
from sgps.training.solution_memory import check_memory, recall, remember


class ResultDrawer(Protocol):
    """What a method draws from each search of a training batch, right where the search ran.

    A pool's worker applies it to its share's results before sending them back, so that
    the draw travels instead of the search graph, and the drawing is done by many processes
    at once rather than by the training process alone; without a pool the loop applies it
    itself. Its draws depend only on each search and on the search's place in the batch,
    so where it runs does not change them.
    """

    def part(self, start: int, step: int) -> ResultDrawer:
        """The drawer of the batch's searches start, start + step, ... (a share of `sgps.execution.pool.deal`)."""
        ...

    def __call__(self, results: list[SearchResult]) -> list[SearchResult]:
        """`results` (of this drawer's searches, in order), each with its draw and without its graph."""
        ...


class Method(Protocol):
    """What the loop needs from a learning method (flat baselines, the subgoal policy, ...)."""

    algorithm: Algorithm
    needs_graphs: bool  # whether `learn` wants the search graphs of failed searches
    report_columns: tuple[str, ...]  # the keys of what `learn` reports (metrics/learning.csv)

    def result_drawer(self, iteration: int, batch: int, count: int) -> ResultDrawer | None:
        """The drawer of training batch `batch` of pass `iteration`, `count` searches; None: none."""
        ...

    def evaluator(self) -> ObservationEvaluator:
        """The evaluator of training and validation searches."""
        ...

    def test_evaluator(self) -> ObservationEvaluator:
        """The evaluator of test searches (π^SG weights its unconditional policy differently there)."""
        ...

    def learn(self, domain: Domain[Any], results: Sequence[SearchResult]) -> dict[str, Any]:
        """One model update from a batch of searches; a report keyed by `report_columns`."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def save_model(self, path: Path) -> None:
        """Write the model's weights (a safetensors checkpoint)."""
        ...

    def load_model(self, path: Path) -> None:
        """Load weights written by `save_model`; `CheckpointError` if they do not fit."""
        ...

    def model_weights(self) -> dict[str, torch.Tensor]:
        """The model's current weights (what search workers need)."""
        ...

    def load_model_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Replace the model's weights with `model_weights()` of a method of the same configuration."""
        ...


@dataclass(frozen=True)
class BatchRecord:
    """What one training batch did, as the loop's listeners see it (after the update)."""

    iteration: int  # passes completed before this batch
    batch: int
    budget: int
    searches: int
    solved: int  # searches of the batch that solved their problem
    solved_in_pass: int  # searches of this pass so far that solved their problem (re-solves included)
    expansions: int  # of the batch's searches
    cumulative_expansions: int  # of the run so far, this batch included
    outstanding: int  # training problems never solved so far
    seconds: float  # the loop's wall clock after the batch (resumes add up, downtime left out)
    report: Mapping[str, Any]  # what the method's update reported (metrics/learning.csv)


@dataclass(frozen=True)
class PassRecord:
    """The validation at the end of a pass, as the loop's listeners see it."""

    iteration: int  # the pass just ended (0-based)
    cumulative_expansions: int
    seconds: float
    validation_solved: int  # in this validation
    validation_problems: int
    validation_solved_ever: int  # distinct validation problems solved in any pass so far


class LoopListener(Protocol):
    """Something that follows a run as it trains (`sgps.training.tensorboard.TensorBoardLog`)."""

    def batch_done(self, record: BatchRecord) -> None: ...

    def pass_done(self, record: PassRecord) -> None: ...


class RunRecord(Protocol):
    """Where the loop writes what it does and what a resume needs: a run directory
    (`sgps.runs.rundir.RunDirectory`, whose docstring lays out the files).

    The loop names the metrics files it appends to and the checkpoint files it writes
    (``checkpoints/latest.safetensors``, ``best.safetensors``, ``trainer.pt``); how the
    rows, the log and the trainer state are stored is the record's. It is a protocol so
    that the loop imports nothing from the run folder's package, which sits above it.
    """

    path: Path  # the run folder (named in errors)
    checkpoints: Path  # the folder of its checkpoints

    def append(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append rows to the metrics file `name` (train, validate, outstanding, learning)."""
        ...

    def log(self, message: str) -> None:
        """Append a line to the run's log."""
        ...

    def row_counts(self) -> dict[str, int]:
        """Data rows in each metrics file (a checkpoint records them)."""
        ...

    def log_lines(self) -> int:
        """Lines in the log (a checkpoint records them)."""
        ...

    def truncate(self, counts: Mapping[str, int]) -> None:
        """Cut every metrics file back to `counts` rows; `CheckpointError` when they no longer match."""
        ...

    def truncate_log(self, lines: int) -> None:
        """Cut the log back to its first `lines` lines."""
        ...

    def save_checkpoint(self, trainer_state: dict[str, Any], save_model: Callable[[Path], None]) -> None:
        """Write the latest weights (`save_model` is handed their path) and then the trainer state."""
        ...

    def read_trainer_state(self) -> dict[str, Any]:
        """The trainer state of the last checkpoint, checked; `CheckpointError` naming the file otherwise."""
        ...


class BatchSearcher(Protocol):
    """Searches a batch elsewhere than in this process (`sgps.execution`: worker processes, Ray actors).

    It searches with `method`'s current model: a pool of model copies is sent its weights
    with every batch, a pool around a shared evaluator evaluates with the method's own
    evaluator. The results come back in the order of `levels`. `batch_size` is each
    search's evaluation batch (1: exact order); `test` searches with the method's test
    evaluator (the test procedure uses it; the loop never does); `drawer` is applied to
    the results where they were searched; `interim_budgets`: each search also records the
    results of these smaller budgets (`SearchResult.within`; the test procedure's rounds).
    """

    def search(
        self, method: Method, levels: Sequence[Any], *, budget: int, epsilon: float, record_graph: bool,
        batch_size: int = 1, test: bool = False, drawer: ResultDrawer | None = None,
        interim_budgets: tuple[int, ...] = (),
    ) -> list[SearchResult]: ...  # fmt: skip


@dataclass(frozen=True)
class BootstrapConfig:
    """Settings of the loop (defaults: the paper's; 0 means "no limit"); their rules are in `sgps.training.schema`."""

    seed: int = 0
    batch_size: int = 32
    initial_budget: int = 4000
    max_budget: int = 0
    schedule: str = "lts-cm"
    epsilon: float = 0.01
    validation_ratio: float = 0.9
    max_iterations: int = 30
    time_limit_minutes: float = 0.0
    max_expansions: int = 0
    checkpoint_every: int = 10
    stop_when_all_solved: bool = True  # the paper's loop; False: run on until the validation rule
    #: Earlier solutions each update learns from again, besides its batch's (0: none, the reference's;
    #: `sgps.training.solution_memory`).
    solution_memory: int = 0
    #: Batches between the validations inside a pass that choose the `best` weights (0: only the
    #: validation at each pass end, the reference's). They change no training search and do not
    #: count towards the validation stopping rule; on a hard set a pass is hundreds of batches, and
    #: without them `best` would be weights from hundreds of updates back.
    validate_every: int = 0


@dataclass
class LoopState:
    """Everything that changes during a run and must survive a resume."""

    iteration: int = 0
    next_batch: int = 0
    order: list[int] = dataclasses.field(default_factory=list)
    train_budget: int = 0
    validation_budget: int = 0
    solved: set[int] = dataclasses.field(default_factory=set)
    validation_solved: set[int] = dataclasses.field(default_factory=set)
    best_validation: int = -1
    best_validation_length: int = 0  # total solution length of the best validation pass
    cumulative_expansions: int = 0
    unique_before_pass: int = 0
    pass_successes: int = 0
    pass_success_expansions: int = 0
    previous_successes: int | None = None
    final_pass: bool = False
    finished: bool = False
    stopped_by_limit: bool = False  # finished by an iteration, time or expansion limit, not by a stopping rule
    stop_reason: str = ""  # why the run finished: one of STOP_REASONS ("" while it runs)
    started: bool = False  # the initial (0 expansions, N outstanding) row is written
    seconds: float = 0.0
    remembered: list[list[Any]] = dataclasses.field(default_factory=list)  # `solution_memory` entries


#: Why a run finished. The first two are the paper's stopping rules and the third the training budget
#: a comparison gives every method alike; the last two are guards (`GUARD_STOPS`): a run they end
#: has had fewer expansions than its budget, so it is no result of a comparison at equal expansions.
STOP_REASONS = ("every training problem solved", "validation rule", "expansion limit", "iteration limit",
                "wall-clock limit")  # fmt: skip
GUARD_STOPS = ("iteration limit", "wall-clock limit")
#: The stops a resume with a raised limit goes on from.
LIMIT_STOPS = ("expansion limit", *GUARD_STOPS)


#: What a run's log says when `--session-minutes` paused it.
SESSION_OVER = "paused: the session's time is up (resume to go on)"

#: The `BootstrapConfig` settings that end a run by a limit (`LIMIT_STOPS`); 0 means no limit.
LIMIT_SETTINGS = ("max_iterations", "time_limit_minutes", "max_expansions")


def iterations_spent(config: BootstrapConfig, iteration: int) -> bool:
    """Whether a run has made its `max_iterations` passes after `iteration` of them (0: no limit)."""
    return bool(config.max_iterations) and iteration >= config.max_iterations


def limit_reached(config: BootstrapConfig, *, iteration: int, expansions: int, seconds: float) -> str | None:
    """Which of `config`'s limits a run stops at after `iteration` passes, `expansions` expansions and
    `seconds` of training (None: none; checked in this order). A run a limit stopped trains on once the
    limit is raised above this (`Bootstrap.run`; `sgps compare` with raised limits)."""
    if iterations_spent(config, iteration):
        return "iteration limit"
    if config.time_limit_minutes and seconds >= 60 * config.time_limit_minutes:
        return "wall-clock limit"
    if config.max_expansions and expansions >= config.max_expansions:
        return "expansion limit"
    return None


def is_better_validation(solved: int, total_length: int, best_solved: int, best_length: int) -> bool:
    """The model-selection rule (spec 6.8): more problems solved, then a shorter total solution length."""
    return solved > best_solved or (solved == best_solved and total_length < best_length)


class Bootstrap:
    """Runs (or resumes) one Bootstrap training run in a run directory."""

    def __init__(
        self,
        domain: Domain[Any],
        train: Sequence[Any],
        validation: Sequence[Any],
        method: Method,
        config: BootstrapConfig,
        run_dir: RunRecord,
        pool: BatchSearcher | None = None,
        fingerprint: Mapping[str, str] | None = None,
        listeners: Sequence[LoopListener] = (),
        evaluation_batch: int = 1,
        device: str = "cpu",
    ) -> None:
        """`pool`: where to search (worker processes); None searches in this process, in lockstep.

        `device`: where the method computes, saved with every checkpoint; `last_device` then
        tells the device a resumed run last trained on (a run may move between machines).

        `evaluation_batch`: children each search gathers before one evaluation (1: exact
        best-first order; `search.evaluation_batch`).

        `listeners`: told of every batch and validation (they may be added until `run`).

        `fingerprint`: what must not change when the run is resumed (the configuration
        keys that shape the run and a digest of the problems), saved with every
        checkpoint and compared by `resume`.
        """
        if not train:
            raise ValueError("the training set is empty")
        self.domain = domain
        self.train = list(train)
        self.validation = list(validation)
        self.method = method
        self.pool = pool
        self.evaluation_batch = evaluation_batch
        self.config = config
        self.run_dir = run_dir
        self.fingerprint = dict(fingerprint or {})
        self.device = device
        self.last_device: str | None = None  # the device of the checkpoint resumed from (None: not saved)
        self.listeners = list(listeners)
        self.schedule = get_schedule(config.schedule)
        self.rng = np.random.default_rng(config.seed)
        self.state = LoopState(train_budget=config.initial_budget, validation_budget=config.initial_budget)
        self.step_times = StepTimes()  # what the run's recent steps took (`--session-minutes` predicts from them)

    # -- the loop -----------------------------------------------------------------------

    def run(
        self,
        max_batches: int | None = None,
        on_batch: Callable[[LoopState], None] | None = None,
        session: Session | None = None,
    ) -> LoopState:
        """Train until a stopping rule fires, or for `max_batches` more batches, or until the next step
        (a batch, or a pass end) would not be over before the `session` ends, as predicted from the
        run's `step_times`; then checkpoint and stop: the run resumes from there.

        `on_batch` is called with the loop state after every training batch (progress display).
        """
        state, config = self.state, self.config
        started = time.perf_counter() - state.seconds
        if not state.started:
            self.run_dir.append("outstanding", [{"iteration": 0, "batch": -1, "cumulative_expansions": 0,
                                                 "outstanding": len(self.train), "seconds": 0.0}])  # fmt: skip
            state.started = True
        if state.finished and state.stopped_by_limit and self._limit_reached(started) is None:
            state.finished = state.stopped_by_limit = False  # resumed with a raised limit: go on
            state.stop_reason = ""
            self.run_dir.log("limits raised: continuing")
        batches_run = 0
        batches_per_pass = -(-len(self.train) // config.batch_size)
        validation_batches = -(-len(self.validation) // config.batch_size)
        while not state.finished:
            if state.next_batch == 0 and not state.order:
                state.order = [int(i) for i in self.rng.permutation(len(self.train))]
                state.unique_before_pass = len(state.solved)
            while state.next_batch < batches_per_pass:
                needed = self.step_times.batch_needs(state.train_budget)
                if state.next_batch + 1 == batches_per_pass:
                    needed += self.step_times.pass_end_needs(state.validation_budget, validation_batches)
                if max_batches is not None and batches_run >= max_batches:
                    return self._pause(started)
                if session is not None and not session.allows(needed):
                    return self._pause(started, SESSION_OVER)
                reason = self._limit_reached(started)
                if reason is not None:
                    self.run_dir.log(f"stopping: {reason} reached")
                    self._finish(reason)
                    break
                batch_started, budget = time.monotonic(), state.train_budget
                self._train_batch(state.next_batch, started)
                state.next_batch += 1
                batches_run += 1
                if on_batch is not None:
                    on_batch(state)
                if config.validate_every and state.next_batch % config.validate_every == 0 \
                        and state.next_batch < batches_per_pass:  # fmt: skip
                    self._validate_within_pass()
                self.step_times.batch_took(time.monotonic() - batch_started, budget)
                if (state.next_batch - 1) % config.checkpoint_every == 0:
                    state.seconds = time.perf_counter() - started
                    self.checkpoint()
            if not state.finished:
                pass_end = self.step_times.pass_end_needs(state.validation_budget, validation_batches)
                if session is not None and not session.allows(pass_end):
                    return self._pause(started, SESSION_OVER)
                pass_end_started, budget = time.monotonic(), state.validation_budget
                self._end_of_pass(started)
                self.step_times.pass_end_took(time.monotonic() - pass_end_started, budget)
            state.seconds = time.perf_counter() - started
            self.checkpoint()
        return state

    def _pause(self, started: float, why: str = "") -> LoopState:
        """Stop here, resumably: log `why` (if any) and checkpoint."""
        if why:
            self.run_dir.log(why)
        self.state.seconds = time.perf_counter() - started
        self.checkpoint()
        return self.state

    def why_finished(self) -> str | None:
        """Why the run, as loaded, cannot train on (None when it can): a stopping rule, or a limit not raised.

        A resume that would do nothing says so (`sgps train --resume` warns with this)
        instead of reporting the old result as if it had trained.
        """
        state = self.state
        if not state.finished:
            return None
        if not state.stopped_by_limit:
            return (f"it finished ({state.stop_reason}); nothing is left to train: start a new run "
                    "with --overwrite or another --out")  # fmt: skip
        reason = self._limit_reached(time.perf_counter() - state.seconds)
        how = {
            "iteration limit": f"give --max-iterations above {state.iteration}",
            "wall-clock limit": f"give --time-limit above {state.seconds / 60:.2f} (minutes: the limit counts all "
                                "of the run's training time, not this session's)",
            "expansion limit": f"give --max-expansions above {state.cumulative_expansions}",
        }  # fmt: skip
        return None if reason is None else f"it stopped at its {reason}; to train on, {how[reason]}"

    def _limit_reached(self, started: float) -> str | None:
        """Which limit stops the run now, if any (`limit_reached`)."""
        state = self.state
        return limit_reached(self.config, iteration=state.iteration, expansions=state.cumulative_expansions,
                             seconds=time.perf_counter() - started)  # fmt: skip

    def _finish(self, reason: str) -> None:
        """End the run, recording why (`STOP_REASONS`); a limit's stop resumes when the limit is raised."""
        self.state.finished, self.state.stop_reason = True, reason
        self.state.stopped_by_limit = reason in LIMIT_STOPS

    def _train_batch(self, batch: int, started: float) -> None:
        state, config = self.state, self.config
        ids = state.order[batch * config.batch_size : (batch + 1) * config.batch_size]
        drawer = self.method.result_drawer(state.iteration, batch, len(ids))
        results = self._search([self.train[i] for i in ids], state.train_budget, self.method.needs_graphs, drawer)
        self.run_dir.append("train", self._rows(ids, results, batch, state.train_budget))
        for problem, result in zip(ids, results, strict=True):
            state.cumulative_expansions += result.expanded
            if result.solved:
                state.solved.add(problem)
                state.pass_successes += 1
                state.pass_success_expansions += result.expanded
        recalled = self._recall(ids, results)
        state.remembered = remember(state.remembered, ids, results, config.solution_memory)
        report = self.method.learn(self.domain, [*results, *recalled])
        outstanding = len(self.train) - len(state.solved)
        where = {"iteration": state.iteration, "batch": batch}
        seconds = round(time.perf_counter() - started, 3)
        self.run_dir.append(
            "outstanding",
            [{**where, "cumulative_expansions": state.cumulative_expansions, "outstanding": outstanding,
              "seconds": seconds}],
        )  # fmt: skip
        self.run_dir.append("learning", [{**where, **report}])
        solved = sum(r.solved for r in results)
        record = BatchRecord(state.iteration, batch, state.train_budget, len(results), solved, state.pass_successes,
                             sum(r.expanded for r in results), state.cumulative_expansions, outstanding, seconds,
                             report)  # fmt: skip
        for listener in self.listeners:
            listener.batch_done(record)
        losses = ", ".join(f"{k} {v:.4g}" for k, v in report.items() if k.startswith("loss") and v is not None)
        memory = f"; learnt {len(recalled)} remembered solutions again" if config.solution_memory else ""
        self.run_dir.log(
            f"iteration {state.iteration} batch {batch}: solved {solved}/{len(ids)}, "
            f"budget {state.train_budget}, outstanding {outstanding}; {losses or 'no update'}{memory}"
        )

    def _recall(self, ids: Sequence[int], results: Sequence[SearchResult]) -> list[SearchResult]:
        """The remembered solutions this batch's update learns again: those of problems it did not solve."""
        solved_now = {problem for problem, result in zip(ids, results, strict=True) if result.solved}
        try:
            return recall(self.domain, self.train, self.state.remembered, solved_now)
        except ValueError as error:
            raise CheckpointError(f"{self.run_dir.checkpoints / 'trainer.pt'}: {error}") from None

    def _end_of_pass(self, started: float) -> None:
        state, config = self.state, self.config
        solved_now, total_length = self._validate()
        record = PassRecord(state.iteration, state.cumulative_expansions, round(time.perf_counter() - started, 3),
                            solved_now, len(self.validation), len(state.validation_solved))  # fmt: skip
        for listener in self.listeners:
            listener.pass_done(record)
        if is_better_validation(solved_now, total_length, state.best_validation, state.best_validation_length):
            state.best_validation, state.best_validation_length = solved_now, total_length
            self.method.save_model(self.run_dir.checkpoints / "best.safetensors")
        outcome = PassOutcome(
            len(self.train),
            state.unique_before_pass,
            len(state.solved),
            state.pass_successes,
            state.pass_success_expansions,
            state.previous_successes,
        )
        state.iteration += 1
        reached = len(state.validation_solved) >= config.validation_ratio * len(self.validation)
        if config.stop_when_all_solved and len(state.solved) == len(self.train):
            self._finish("every training problem solved")
            self.run_dir.log("every training problem is solved: stopping")
        elif state.final_pass:
            self._finish("validation rule")
        else:
            if reached and self.validation:
                state.final_pass = True
                self.run_dir.log("validation target reached: one more pass, then stop")
            else:
                budgets = self.schedule(
                    Budgets(state.train_budget, state.validation_budget), outcome, config.initial_budget
                )
                cap = config.max_budget or None
                state.train_budget = min(budgets.train, cap) if cap else budgets.train
                state.validation_budget = min(budgets.validation, cap) if cap else budgets.validation
            if iterations_spent(config, state.iteration):  # the next pass is ready; a raised limit resumes it
                self.run_dir.log("stopping: iteration limit reached")
                self._finish("iteration limit")
        state.previous_successes = state.pass_successes
        state.pass_successes = state.pass_success_expansions = 0
        state.next_batch = 0
        state.order = []

    def _validate(self) -> tuple[int, int]:
        """The validation at a pass end: search the validation problems, record them, and count their
        solves towards the stopping rule; (solved, total solution length of the solved)."""
        state = self.state
        solved_ids, total_length = self._search_validation(record=True)
        state.validation_solved.update(solved_ids)
        self.run_dir.log(
            f"iteration {state.iteration} validation: solved {len(solved_ids)}/{len(self.validation)} "
            f"(cumulative {len(state.validation_solved)})"
        )
        return len(solved_ids), total_length

    def _validate_within_pass(self) -> None:
        """A validation between batches (`validate_every`): it only chooses the `best` weights."""
        state = self.state
        solved_ids, total_length = self._search_validation(record=False)
        better = is_better_validation(len(solved_ids), total_length, state.best_validation,
                                      state.best_validation_length)  # fmt: skip
        if better:
            state.best_validation, state.best_validation_length = len(solved_ids), total_length
            self.method.save_model(self.run_dir.checkpoints / "best.safetensors")
        self.run_dir.log(
            f"iteration {state.iteration} after batch {state.next_batch - 1}: validation solved "
            f"{len(solved_ids)}/{len(self.validation)}" + ("; best weights replaced" if better else "")
        )

    def _search_validation(self, *, record: bool) -> tuple[list[int], int]:
        """Search every validation problem at the validation budget; the solved ones and their total
        solution length. `record`: append the searches to metrics/validate.csv."""
        state, config = self.state, self.config
        solved: list[int] = []
        total_length = 0
        for batch, start in enumerate(range(0, len(self.validation), config.batch_size)):
            ids = list(range(start, min(start + config.batch_size, len(self.validation))))
            results = self._search([self.validation[i] for i in ids], state.validation_budget, False)
            if record:
                self.run_dir.append("validate", self._rows(ids, results, batch, state.validation_budget))
            for problem, result in zip(ids, results, strict=True):
                if result.solved:
                    solved.append(problem)
                    total_length += result.length or 0
        return solved, total_length

    def _search(
        self, levels: Sequence[Any], budget: int, record_graph: bool, drawer: ResultDrawer | None = None
    ) -> list[SearchResult]:
        if self.pool is not None:
            return self.pool.search(self.method, levels, budget=budget, epsilon=self.config.epsilon,
                                    record_graph=record_graph, batch_size=self.evaluation_batch,
                                    drawer=drawer)  # fmt: skip
        results = search_lockstep(
            self.domain,
            levels,
            self.method.algorithm,
            self.method.evaluator(),
            budget=budget,
            epsilon=self.config.epsilon,
            batch_size=self.evaluation_batch,
            record_graph=record_graph,
        )
        return results if drawer is None else drawer(results)

    def _rows(self, ids: Sequence[int], results: Sequence[SearchResult], batch: int, budget: int) -> list[dict]:
        return [
            {"iteration": self.state.iteration, "batch": batch, "problem": problem, "solved": r.solved,
             "expanded": r.expanded, "generated": r.generated, "length": r.length, "budget": budget,
             "seconds": r.seconds}
            for problem, r in zip(ids, results, strict=True)
        ]  # fmt: skip

    # -- checkpoints --------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Save the model and everything needed to resume, atomically."""
        state = dataclasses.asdict(self.state)
        state["solved"] = sorted(self.state.solved)
        state["validation_solved"] = sorted(self.state.validation_solved)
        payload = {
            "loop": state,
            "method": self.method.state_dict(),
            "rng": numpy_state(self.rng),
            "rows": self.run_dir.row_counts(),
            "log_lines": self.run_dir.log_lines(),
            "fingerprint": self.fingerprint,
            "device": self.device,
            "step_times": self.step_times.as_dict(),
        }
        written = time.monotonic()
        self.run_dir.save_checkpoint(payload, self.method.save_model)
        self.step_times.checkpoint = time.monotonic() - written

    def resume(self) -> None:
        """Restore the state of the last checkpoint and cut the metrics back to it."""
        path = self.run_dir.checkpoints / "trainer.pt"
        if not path.exists() and not path.is_symlink():
            raise CheckpointError(f"{path}: no trainer checkpoint to resume from")
        payload = self.run_dir.read_trainer_state()
        if not isinstance(payload, dict) or not {"loop", "method", "rng", "rows"} <= payload.keys():
            raise CheckpointError(
                f"{path}: not a readable trainer checkpoint (entries are missing); start the run again with --overwrite"
            )
        self._check_fingerprint(dict(payload.get("fingerprint") or {}))
        try:
            loop = dict(payload["loop"])
            loop.setdefault("started", True)  # checkpoints written before the initial row existed
            loop["solved"] = set(loop["solved"])
            loop["validation_solved"] = set(loop["validation_solved"])
            state = LoopState(**loop)
            self._check_ids(state)
            check_memory(state.remembered, self.domain, self.train)
            if not _all_finite(payload["method"]):
                raise ValueError("the model or optimiser state holds NaN or infinite values")
            self.method.load_state_dict(payload["method"])
            restore_numpy_state(self.rng, payload["rng"])
            step_times = StepTimes.from_dict(payload["step_times"]) if "step_times" in payload else StepTimes()
        except (TypeError, KeyError, ValueError, RuntimeError) as error:
            raise CheckpointError(f"{path}: does not fit this run ({_first_line(error)})") from None
        self.state, self.step_times = state, step_times
        self.last_device = str(payload["device"]) if "device" in payload else None
        self.run_dir.truncate(payload["rows"])
        if "log_lines" in payload:  # checkpoints written before the log was counted keep their log
            self.run_dir.truncate_log(int(payload["log_lines"]))

    def _check_ids(self, state: LoopState) -> None:
        """Problem ids and the pass order of a loaded state must belong to this run's problem sets."""
        train, validation = range(len(self.train)), range(len(self.validation))
        if not state.solved <= set(train) or not state.validation_solved <= set(validation):
            raise ValueError("solved problem ids out of range")
        if state.order and sorted(state.order) != list(train):
            raise ValueError("the pass order is not an order of the training problems")

    def _check_fingerprint(self, saved: dict[str, str]) -> None:
        """Refuse to resume a run whose configuration or problems changed since it was checkpointed."""
        if not saved or not self.fingerprint:
            return  # a checkpoint from before fingerprints, or a caller that does not check
        # A changed setting is named first: a changed seed or validation fraction also splits --problems
        # into other training and validation problems, and the setting is what the user changed.
        settings = changed_settings(saved, self.fingerprint)
        if settings:
            details = ", ".join(f"{key} ({old} -> {new})" for key, old, new in settings)
            raise ConfigError(
                f"{self.run_dir.path / 'config.toml'}: changed since the run started: {details}; "
                "put the old values back, or start a new run (or, if checkpoints/trainer.pt was copied from "
                "another run, put the run's own back)"
            )
        keys = {key for key in saved.keys() | self.fingerprint.keys() if key.startswith("problems.")}
        changed = sorted(key for key in keys if saved.get(key) != self.fingerprint.get(key))
        if changed:
            raise ConfigError(
                f"{self.run_dir.path}: the {' and '.join(k.removeprefix('problems.') for k in changed)} problems "
                "differ from those the run was trained on; resume with the same --problems (and --validation)"
            )


def changed_settings(saved: Mapping[str, str], current: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(key, saved value, current value) of every setting of the checkpoint's fingerprint `saved` that the
    run's `current` fingerprint (`sgps.runs.runner.run_fingerprint`) gives otherwise, "absent" for none.

    A setting `saved` does not name was added to sgps after the run started; its default keeps
    the behaviour the run had, so it is no change. The problem digests are not settings: left out.
    """
    return [(key, saved[key], current.get(key, "absent")) for key in sorted(saved)
            if not key.startswith("problems.") and saved[key] != current.get(key)]  # fmt: skip


def _all_finite(value: Any) -> bool:
    """Whether every floating-point tensor in a nested state (dicts, lists, tensors) is finite."""
    if isinstance(value, torch.Tensor):
        return not value.is_floating_point() or bool(torch.isfinite(value).all())
    if isinstance(value, dict):
        return all(_all_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return all(_all_finite(item) for item in value)
    return True


def _first_line(error: Exception) -> str:
    """The first line of an error's text (library messages can run over many lines)."""
    return (str(error).splitlines() or [type(error).__name__])[0][:200]
