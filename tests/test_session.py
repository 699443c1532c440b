"""`--session-minutes`: a command that must be over by a deadline leaves its runs at a checkpoint,
predicts each step from the run's recent ones, starts nothing after the deadline and stops its tests."""

from __future__ import annotations

import io
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

import sgps
from sgps.cli import main
from sgps.errors import ConfigError
from sgps.experiments.concurrency import Concurrency
from sgps.experiments.plan import RunSpec
from sgps.experiments.progress import ProgressDisplay
from sgps.experiments.runner import PAUSED, STARTUP_MINUTES, Job, Scheduler
from sgps.training import session as session_module
from sgps.training.session import RECENT_BATCHES, STALL_FACTOR, Session, StepTimes, check_session_minutes


class Clock:
    """A `time.monotonic` that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(session_module.time, "monotonic", fake)
    return fake


def test_a_step_starts_only_if_it_would_end_by_the_deadline(clock):
    session = Session.lasting(10)  # the deadline is 600 s from now
    clock.now += 500.0
    assert session.allows(100.0) and not session.allows(100.001)
    clock.now += 101.0
    assert not session.allows(0.0)
    assert session.minutes_left() == pytest.approx(-1 / 60)


def test_steps_are_predicted_from_the_slowest_recent_batch_and_the_last_pass_end_per_unit_of_budget():
    times = StepTimes()
    assert times.batch_needs(4000) == 0 and times.pass_end_needs(4000, 3) == 0  # nothing measured: start if time left
    times.batch_took(100.0, 4000)
    times.batch_took(40.0, 4000)  # the slowest of the recent batches counts, not the last
    times.checkpoint = 2.0
    assert times.pass_end_needs(4000, 3) == pytest.approx(302.0)  # no pass end yet: 3 batches' worth of validation
    times.pass_end_took(30.0, 4000)
    assert times.batch_needs(4000) == pytest.approx(102.0)
    assert times.batch_needs(8000) == pytest.approx(202.0)  # a doubled budget doubles the search's share
    assert times.pass_end_needs(8000, 3) == pytest.approx(62.0)
    for _ in range(RECENT_BATCHES):
        times.batch_took(10.0, 4000)
    assert times.batch_needs(4000) == pytest.approx(12.0)  # the slow batch is no longer recent
    assert StepTimes.from_dict(times.as_dict()) == times


def test_one_stalled_batch_does_not_shorten_the_next_sessions_but_a_slow_pace_does():
    times = StepTimes(checkpoint=1.0)
    for seconds in (30.0, 20.0, 25.0, 1500.0, 28.0, 22.0, 26.0, 24.0):  # one batch stopped for 25 minutes
        times.batch_took(seconds, 4000)
    assert times.batch_needs(4000) == pytest.approx(STALL_FACTOR * 30.0 + 1.0)  # twice the second slowest
    assert times.pass_end_needs(4000, 3) == pytest.approx(3 * STALL_FACTOR * 30.0 + 1.0)  # no pass end yet
    times.batch_took(1400.0, 4000)  # a second slow batch among the recent ones is the run's pace, not a stall
    assert times.batch_needs(4000) == pytest.approx(1501.0)
    varied = StepTimes(batches=[10.0, 19.0, 12.0, 11.0])  # within the factor: the slowest counts
    assert varied.batch_needs(1) == pytest.approx(19.0)
    young = StepTimes(batches=[10.0, 100.0])  # two batches cannot tell a stall from a slow start
    assert young.batch_needs(1) == pytest.approx(100.0)


@pytest.mark.parametrize("damage", [{"batches": [-1.0]}, {"pass_end": math.nan}, {"checkpoint": math.inf},
                                    {"batches": "x"}])  # fmt: skip
def test_step_times_that_are_not_seconds_are_refused(damage):
    with pytest.raises(ValueError):
        StepTimes.from_dict({**StepTimes().as_dict(), **damage})


@pytest.mark.parametrize("minutes", [0, -1, 0.0, math.nan, math.inf])
def test_a_session_length_must_be_a_finite_number_of_minutes_above_zero(minutes):
    with pytest.raises(ConfigError, match="--session-minutes must be a number of minutes above 0"):
        check_session_minutes(minutes)
    with pytest.raises(ConfigError, match="session_minutes= must be"):
        sgps.train("missing.txt", "unused", session_minutes=minutes)


@pytest.mark.parametrize("minutes", [True, "5", [5]])
def test_the_api_names_a_session_length_of_the_wrong_type(minutes):
    with pytest.raises(TypeError, match="session_minutes must be a number"):
        sgps.train("missing.txt", "unused", session_minutes=minutes)


@pytest.mark.parametrize("value", ["0", "-2", "nan", "inf"])
def test_the_commands_refuse_a_bad_session_length_in_one_line(tmp_path, capsys, value):
    problems = tmp_path / "train.txt"
    assert main(["generate", "tsp", "--count", "4", "--out", str(problems)]) == 0
    for command in (["train", "--problems", str(problems), "--out", str(tmp_path / "run")],
                    ["compare", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "cmp")]):  # fmt: skip
        capsys.readouterr()
        assert main([*command, "--session-minutes", value]) == 2
        error = capsys.readouterr().err.strip()
        assert error.startswith("sgps: error: --session-minutes must be a number of minutes above 0")
        assert "\n" not in error
    assert not (tmp_path / "run").exists() and not (tmp_path / "cmp").exists()


def test_a_paused_training_says_how_to_go_on_and_resumes_to_the_uninterrupted_run(tmp_path, capsys, monkeypatch):
    problems = tmp_path / "train.txt"
    assert main(["generate", "tsp", "--count", "40", "--out", str(problems)]) == 0
    common = ["train", "--problems", str(problems), "--preset", "tiny", "--quiet", "--threads", "1"]
    assert main([*common, "--out", str(tmp_path / "whole")]) == 0
    capsys.readouterr()
    run, asked = tmp_path / "paused", []
    with monkeypatch.context() as patch:  # the session's time is up after two batches
        patch.setattr(Session, "allows", lambda self, seconds: asked.append(seconds) or len(asked) <= 2)
        assert main([*common, "--out", str(run), "--session-minutes", "60"]) == 0
    printed = capsys.readouterr().out
    assert f"paused; go on with: sgps train --problems {problems} --out {run} --resume" in printed
    assert "paused: the session's time is up" in (run / "log.txt").read_text()
    assert len(rows(run, "train")) == 1 + 2 * 16 and len(asked) == 3  # the tiny preset's batches of 16
    assert main(["train", "--problems", str(problems), "--out", str(run), "--resume", "--quiet", "--threads", "1",
                 "--session-minutes", "60"]) == 0  # fmt: skip
    assert "go on with" not in capsys.readouterr().out
    for name in ("train", "outstanding", "validate"):
        assert rows(run, name) == rows(tmp_path / "whole", name), name


def rows(run: Path, name: str) -> list[list[str]]:
    """A metrics file's rows without its wall-clock column."""
    lines = (run / "metrics" / f"{name}.csv").read_text().splitlines()
    header = lines[0].split(",")
    keep = [i for i, column in enumerate(header) if column != "seconds"]
    return [[line.split(",")[i] for i in keep] for line in lines]


class Forever:
    """A command that runs until it is stopped."""

    def __init__(self) -> None:
        self.stopped = False

    def poll(self) -> int | None:
        return -15 if self.stopped else None

    def stop(self) -> None:
        self.stopped = True


class Launcher:
    def __init__(self) -> None:
        self.started: list[tuple[list[str], Forever]] = []

    def start(self, arguments, threads, log):
        command = Forever()
        self.started.append((list(arguments), command))
        return command


def test_a_comparison_stops_its_tests_at_the_deadline_and_starts_nothing_after_it(tmp_path, clock, monkeypatch):
    jobs = [Job(RunSpec(f"run-{i}", "phs", "phs", i, None), tmp_path / f"run-{i}", tmp_path / "c.toml",
                tmp_path / f"run-{i}.log", 4) for i in range(2)]  # fmt: skip
    launcher, session = Launcher(), Session.lasting(5)
    scheduler = Scheduler(None, None, jobs, Concurrency(jobs=1, threads=1), ProgressDisplay(io.StringIO()),  # type: ignore[arg-type]
                          session=session, launcher=launcher)  # fmt: skip
    monkeypatch.setattr(scheduler, "_next_step", lambda job: ("testing test", ["test", str(job.path)]))
    monkeypatch.setattr("sgps.experiments.runner.time.sleep", lambda seconds: setattr(clock, "now", clock.now + 60))
    scheduler.run()  # the first job tests for 5 minutes of the fake clock, then the deadline passes
    assert [arguments for arguments, _ in launcher.started] == [["test", str(tmp_path / "run-0")]]
    assert launcher.started[0][1].stopped
    assert [job.status for job in jobs] == [PAUSED, PAUSED]


def test_a_comparisons_training_commands_get_the_minutes_left(tmp_path, clock):
    job = Job(RunSpec("run", "phs", "phs", 0, None), tmp_path / "run", tmp_path / "c.toml", tmp_path / "run.log", 4)
    scheduler = Scheduler(None, None, [job], Concurrency(jobs=1, threads=1), ProgressDisplay(io.StringIO()),  # type: ignore[arg-type]
                          session=Session.lasting(30))  # fmt: skip
    scheduler.plan = SimpleNamespace(resolved={"compare": {"preset": "tiny"}})
    scheduler.files = SimpleNamespace(train=tmp_path / "train.txt", validation=None)
    clock.now += 600.0
    command = scheduler._train_command(job, resume=False)
    assert command[command.index("--session-minutes") + 1] == repr(20.0 - STARTUP_MINUTES)
