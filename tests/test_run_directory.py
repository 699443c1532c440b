"""Run directories a user can trust: no silent overwrite, one trainer at a time, plain files, an honest log."""

from __future__ import annotations

import os
import stat

import pytest

from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.fileio import atomic_write_text
from sgps.training.rundir import RunDirectory


@pytest.fixture
def problems(tmp_path):
    domain = get_domain("tsp")
    path = tmp_path / "train.txt"
    write_levels(path, domain, [domain.generate(seed) for seed in range(10)])
    return path


def train(problems, run, *extra):
    return main(["train", "--problems", str(problems), "--out", str(run), "--preset", "tiny", "--quiet",
                 "--device", "cpu", "--max-iterations", "1", *extra])  # fmt: skip


def resume(problems, run, *extra):
    return main(["train", "--problems", str(problems), "--out", str(run), "--resume", "--quiet", *extra])


def test_a_fresh_run_refuses_a_folder_holding_a_run_unless_told_to_overwrite(problems, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(problems, run) == 0
    (run / "checkpoints" / "trainer.pt").unlink()  # even without its trainer state the run's files are kept
    before = (run / "metrics" / "train.csv").read_bytes()
    capsys.readouterr()
    assert train(problems, run, "--seed", "5") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "already holds a run; pass --resume to continue it, --overwrite" in error
    assert (run / "metrics" / "train.csv").read_bytes() == before
    (run / "notes.txt").write_text("mine")
    assert train(problems, run, "--seed", "5", "--overwrite") == 0
    assert 'seed = 5' in (run / "config.toml").read_text() and (run / "notes.txt").read_text() == "mine"
    assert resume(problems, run, "--overwrite") == 2


def test_a_second_trainer_on_a_locked_run_exits_at_once_naming_the_holder(problems, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    rows = len(RunDirectory(run).read("train"))
    capsys.readouterr()
    with RunDirectory(run).lock():
        assert resume(problems, run) == 2
    assert f"is being trained by process {os.getpid()}" in capsys.readouterr().err
    assert len(RunDirectory(run).read("train")) == rows  # nothing written by the refused process
    (run / ".lock").write_text("999999")  # left by a killed process: nobody holds the lock
    assert resume(problems, run) == 0


def test_resume_cuts_the_log_back_with_the_metrics_and_files_are_plain(problems, tmp_path):
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    with open(run / "log.txt", "a") as handle:
        handle.write("a line written after the last checkpoint\n")
    assert resume(problems, run) == 0
    log = (run / "log.txt").read_text()
    assert log.startswith("sgps ") and "after the last checkpoint" not in log
    for csv_file in (run / "metrics").glob("*.csv"):
        assert b"\r" not in csv_file.read_bytes(), csv_file.name  # one line ending everywhere


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_honour_the_umask(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "file.txt", "text")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "file.txt").stat().st_mode) == mode


def test_resume_refuses_changed_settings_and_problems_before_writing_anything(problems, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    before = {path.name: path.read_bytes() for path in (run / "metrics").glob("*.csv")}

    def refused(*extra, problem_file=problems):
        capsys.readouterr()
        assert resume(problem_file, run, *extra) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and "Traceback" not in error
        assert {path.name: path.read_bytes() for path in (run / "metrics").glob("*.csv")} == before
        return error

    assert "bootstrap.seed cannot change when a run is resumed" in refused("--seed", "7")
    assert "run.algorithm, bootstrap.seed cannot change" in refused("--algorithm", "levin", "--seed", "7")
    assert "--preset and --config cannot be given with --resume" in refused("--preset", "paper")
    config = run / "config.toml"
    original = config.read_text()
    config.write_text(original.replace("batch_size = 16", "batch_size = 8"))
    assert "changed since the run started: bootstrap.batch_size (16 -> 8)" in refused()
    config.write_text(original)
    domain = get_domain("tsp")
    other = tmp_path / "other.txt"
    write_levels(other, domain, [domain.generate(seed) for seed in range(100, 110)])
    assert "problems differ from those the run was trained on" in refused(problem_file=other)
    assert resume(problems, run, "--max-iterations", "2", "--time-limit", "30") == 0  # limits may change
    assert "max_iterations = 2" in config.read_text()


def test_a_run_stopped_by_a_limit_goes_on_when_resumed_with_a_higher_one(problems, tmp_path):
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert train(problems, whole, "--max-iterations", "2") == 0
    assert train(problems, split) == 0  # stopped by its limit of one pass
    assert resume(problems, split, "--max-iterations", "2") == 0
    for name in ("train", "validate", "outstanding"):
        rows = [{k: v for k, v in row.items() if k != "seconds"} for row in RunDirectory(split).read(name)]
        expected = [{k: v for k, v in row.items() if k != "seconds"} for row in RunDirectory(whole).read(name)]
        assert rows == expected, name
