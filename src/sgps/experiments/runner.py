"""The scheduler of a comparison: every run as its own `sgps train` process, then its tests.

Each (algorithm, seed) trains in a process of its own (``python -m sgps train``), so runs
are isolated from one another and can be killed; then ``sgps test`` runs on each test
set. A launcher (`sgps.experiments.launchers`) starts those commands: as child processes
here, or as Ray tasks on a cluster's nodes.
At most `jobs` runs go at once, each with `threads` torch/OpenMP threads: the child
gets ``--threads`` and OMP_NUM_THREADS / MKL_NUM_THREADS, and trains in its own
process (``--workers 1``), so the comparison never asks for more threads than cores
(`concurrency.plan_concurrency`); a run's tests spread its threads over as many search
processes of one thread (``sgps test --workers``), which leaves the records unchanged.

A run steps through: train (fresh, or ``--resume`` after an interruption or when the
comparison's limits were raised above the one that stopped it), then the
test sets whose CSV is missing or was made with other weights than the run's now (the run
was trained further since: `runstate.made_with_other_weights`). A run that is finished is
skipped. Interrupting the
comparison (Ctrl-C, SIGTERM) terminates the children; the next ``sgps compare`` on the
same folder resumes them from their last checkpoint.
"""

from __future__ import annotations

import collections
import contextlib
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.errors import StopRequested
from sgps.experiments.concurrency import Concurrency
from sgps.experiments.launchers import Launched, Launcher, LocalLauncher
from sgps.experiments.plan import ComparePlan, RunSpec, TestSet
from sgps.experiments.problems import ProblemFiles
from sgps.experiments.progress import ProgressDisplay
from sgps.experiments.runstate import (
    journalled_attempts,
    limits_raised,
    made_with_other_weights,
    test_csv,
    training_progress,
)
from sgps.fileio import open_regular
from sgps.runs.run import Run, loop_state, training_finished
from sgps.training.session import Session
from sgps.training.setup import evaluator_place, pick_device

POLL_SECONDS = 0.5
#: What a command of a comparison with `--session-minutes` is expected to take to start (Python, torch,
#: reading the run): its session is that much shorter than the comparison's time left.
STARTUP_MINUTES = 0.5
WAITING, DONE, PAUSED, FAILED = "waiting", "done", "paused", "failed"


@dataclass
class Job:
    """One run of the comparison and what it is doing now."""

    run: RunSpec
    path: Path  # the run directory, DIR/runs/NAME
    config: Path  # its training config, written by the comparison
    log: Path  # the children's output
    train_count: int  # training problems (the progress display's "solved of N")
    status: str = WAITING  # also "training", "testing NAME"
    process: Launched | None = None
    commands: int = 0  # commands started for it in this session (0 at the end: it was already finished)
    trained: bool = False  # a training command ran in this session
    error: str = ""


class Scheduler:
    """Runs the jobs of a comparison, `concurrency.jobs` at a time."""

    def __init__(
        self,
        plan: ComparePlan,
        files: ProblemFiles,
        jobs: Sequence[Job],
        concurrency: Concurrency,
        display: ProgressDisplay,
        *,
        max_batches: int | None = None,
        session: Session | None = None,
        plugins: Sequence[str] = (),
        launcher: Launcher | None = None,
        tensorboard: Path | None = None,
    ) -> None:
        """`max_batches`: train each run for at most that many more batches, then leave it to resume.

        `session`: when the comparison's time is up. Each training command gets the minutes left
        (``--session-minutes``) and pauses on its own; no command starts after the deadline, and
        tests still running then are stopped (their journals keep the attempts they finished).

        `launcher`: where the commands run (default: child processes of this machine).
        `tensorboard`: a folder under which each training run logs to TensorBoard (one per run).
        """
        self.plan = plan
        self.files = files
        self.jobs = list(jobs)
        self.concurrency = concurrency
        self.display = display
        self.max_batches = max_batches
        self.session = session
        self.launcher = launcher or LocalLauncher()
        self.tensorboard = tensorboard
        self.prefix = [arg for module in plugins for arg in ("--plugin", module)]

    def run(self) -> None:
        """Run every job to its end (done, paused or failed); children are terminated if interrupted."""
        for job in self.jobs:  # runs finished in an earlier session get their status now: counted done from the start
            if self._next_step(job) is None:
                self._advance(job)
        waiting = collections.deque(job for job in self.jobs if job.status == WAITING)
        running: list[Job] = []
        with _sigterm_as_interrupt():
            try:
                while waiting or running:
                    while waiting and len(running) < self.concurrency.jobs:
                        job = waiting.popleft()
                        if self._advance(job):
                            running.append(job)
                    for job in list(running):
                        if job.process is not None and job.process.poll() is not None and not self._finish_step(job):
                            running.remove(job)
                    if self._out_of_time():  # tests still running are stopped; one that has just ended is collected
                        for job in [job for job in running if job.status.startswith("testing ")
                                    and job.process is not None and job.process.poll() is None]:  # fmt: skip
                            _stop(job)
                            job.process = None
                            self._pause_for_time(job)
                            running.remove(job)
                    self.display.status(self._status_lines(len(waiting)))
                    if running:
                        time.sleep(POLL_SECONDS)
            finally:
                for job in running:
                    _stop(job)
                self.display.close()

    # -- one job ------------------------------------------------------------------------

    def _next_step(self, job: Job) -> tuple[str, list[str]] | None:
        """The job's next command (and its status), or None when nothing is left to do now."""
        config = job.run.config
        finished = training_finished(job.path, offline=config is None)
        if not finished or (config is not None and limits_raised(job.path, config.bootstrap)):
            if job.trained:
                return None
            if config is None:
                return "training", self._offline_train_command(job)
            return "training", self._train_command(job, resume=loop_state(job.path) is not None)
        for test in self.plan.tests:
            if not test_csv(job.path, test.name).exists() or made_with_other_weights(job.path, test.name):
                return f"testing {test.name}", self._test_command(job, test)
        return None

    def _advance(self, job: Job) -> bool:
        """Start the job's next command; False (and a final status) when it has none."""
        step = self._next_step(job)
        if step is None:
            job.status = DONE if training_finished(job.path, offline=job.run.config is None) else PAUSED
            if job.commands:
                self.display.event(f"{job.run.name}: {job.status}")
            return False
        if self._out_of_time():
            self._pause_for_time(job)
            return False
        job.status, command = step
        orphaned = _orphaned_results(job.path) if "--overwrite" in command and job.run.config is not None else []
        if orphaned:  # a fresh start would overwrite them: never without the user
            job.status = FAILED
            job.error = (f"{job.path} holds results ({', '.join(orphaned)}) but no checkpoints/trainer.pt to resume "
                         "from; put trainer.pt back, or delete the run folder to train it again")  # fmt: skip
            self.display.event(f"{job.run.name}: failed ({job.error})")
            return False
        job.commands += 1
        job.trained = job.trained or job.status == "training"
        job.log.parent.mkdir(parents=True, exist_ok=True)
        with open_regular(job.log, "ab") as log:
            log.write(("$ sgps " + " ".join(command) + "\n").encode())
        job.process = self.launcher.start(command, self.concurrency.threads, job.log)
        self.display.event(f"{job.run.name}: {job.status}")
        return True

    def _finish_step(self, job: Job) -> bool:
        """Collect an ended child; True if the job goes on with another command."""
        assert job.process is not None
        code = job.process.poll()
        job.process = None
        if code != 0:
            job.status = FAILED
            job.error = _last_line(job.log).removeprefix("sgps: error: ") or f"exit status {code}"
            self.display.event(f"{job.run.name}: failed ({job.error}); output in {job.log}")
            return False
        return self._advance(job)

    def _train_command(self, job: Job, *, resume: bool) -> list[str]:
        command = [*self.prefix, "train", "--problems", str(self.files.train), "--out", str(job.path),
                   "--threads", str(self.concurrency.threads), "--quiet"]  # fmt: skip
        if self.files.validation is not None:
            command += ["--validation", str(self.files.validation)]
        if resume:  # with the comparison's limits, which may have been raised since the run stopped at one
            assert job.run.config is not None
            limits = job.run.config.bootstrap
            command += ["--resume", "--max-iterations", str(limits.max_iterations),
                        "--time-limit", repr(float(limits.time_limit_minutes)),
                        "--max-expansions", str(limits.max_expansions)]  # fmt: skip
        else:  # no checkpoint yet: whatever an earlier start left behind holds nothing to keep
            command += ["--config", str(job.config), "--preset", self.plan.resolved["compare"]["preset"],
                        "--workers", str(self.concurrency.workers), "--overwrite"]  # fmt: skip
        if self.max_batches is not None:
            command += ["--max-batches", str(self.max_batches)]
        if self.session is not None:  # the command's own clock starts once it has started: leave it that time
            command += ["--session-minutes", repr(self.session.minutes_left() - STARTUP_MINUTES)]
        if self.tensorboard is not None:
            command += ["--tensorboard", str(self.tensorboard / job.run.name)]
        return command

    def _offline_train_command(self, job: Job) -> list[str]:
        """HIPS-ε: solve the training problems (and [problems.hips]), learn from their solutions (from scratch
        each time, except that finished solves are kept in the run's dataset journal)."""
        preset = self.plan.resolved["compare"]["preset"]
        extra = [] if self.files.hips is None else ["--extra-problems", str(self.files.hips)]
        return [*self.prefix, "train", "--algorithm", job.run.algorithm, "--problems", str(self.files.train), *extra,
                "--out", str(job.path), "--config", str(job.config), "--preset", preset,
                "--seed", str(job.run.seed), "--threads", str(self.concurrency.threads), "--overwrite"]  # fmt: skip

    def _test_command(self, job: Job, test: TestSet) -> list[str]:
        """`sgps test` with the job's threads as search processes of one thread each, each with a model
        copy (the record is the one of a test in one process). In one process: HIPS-ε, and a run that
        evaluates in a shared evaluator, whose threads would come on top of the searches'."""
        command = [*self.prefix, "test", str(job.path), "--problems", str(self.files.tests[test.name]),
                   "--budget", str(test.budget), "--rounds", str(test.rounds)]  # fmt: skip
        if job.run.config is not None and self.concurrency.threads > 1 and _tests_with_model_copies(job.path):
            command += ["--workers", str(self.concurrency.threads)]
        return command

    def _out_of_time(self) -> bool:
        """Whether the session's time is up: no command starts now (a training command needs `STARTUP_MINUTES`)."""
        return self.session is not None and self.session.minutes_left() <= STARTUP_MINUTES

    def _pause_for_time(self, job: Job) -> None:
        job.status = PAUSED
        self.display.event(f"{job.run.name}: paused (the session's time is up)")

    # -- display ------------------------------------------------------------------------

    def _status_lines(self, waiting: int) -> list[str]:
        counts = collections.Counter(job.status for job in self.jobs)
        running = [job for job in self.jobs if job.process is not None]
        head = (f"runs: {counts[DONE]} done, {len(running)} running, {waiting} waiting"
                + "".join(f", {counts[s]} {s}" for s in (PAUSED, FAILED) if counts[s]))  # fmt: skip
        return [head, *(f"  {job.run.name}: {self._describe(job)}" for job in running)]

    def _describe(self, job: Job) -> str:
        if job.status.startswith("testing "):
            done = journalled_attempts(job.path, job.status.removeprefix("testing "))
            return f"{job.status}, {done} attempts done" if done else job.status
        if job.status != "training":
            return job.status
        progress = training_progress(job.path)
        if progress is None:
            return "training, starting"
        budget = "-" if progress.budget is None else f"{progress.budget:,}"
        solved = job.train_count - progress.outstanding
        return f"training, pass {progress.iteration + 1}, budget {budget}, solved {solved}/{job.train_count}"


def _orphaned_results(run: Path) -> list[str]:
    """What a run folder without a trainer checkpoint holds that only a checkpointed run writes.

    `Bootstrap.checkpoint` writes latest.safetensors just before trainer.pt, and tests
    and best.safetensors come later, so any of them means trainer.pt was lost, not that
    the run never got that far.
    """
    candidates = [run / "checkpoints" / "latest.safetensors", run / "checkpoints" / "best.safetensors",
                  *sorted((run / "metrics").glob("test-*.csv"))]  # fmt: skip
    return [str(path.relative_to(run)) for path in candidates if path.exists()]


def _stop(job: Job) -> None:
    """Terminate a job's command (and wait for it), so that nothing outlives the comparison."""
    if job.process is not None:
        job.process.stop()


def _tests_with_model_copies(run: Path) -> bool:
    """Whether `sgps test --workers` gives this trained run's search processes a model copy each."""
    config = Run.open(run).config
    device = pick_device("auto").type if config.run.device == "auto" else config.run.device
    return evaluator_place(config.run.evaluator, device) == "per-process"


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
        return lines[-1] if lines else ""
    return ""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Stop on SIGTERM as on Ctrl-C while the comparison runs, so that its children are stopped too:
    `StopRequested`, which `sgps` reports as ``sgps: stopped by SIGTERM``, exit status 143."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        for stopping in (signal.SIGTERM, signal.SIGHUP):  # a second one must not interrupt stopping the children
            signal.signal(stopping, signal.SIG_IGN)
        raise StopRequested(signal.Signals(signum).name, 128 + signum)

    previous = {number: signal.signal(number, interrupt) for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
