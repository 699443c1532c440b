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
    assert train(problems, run, "--resume", "--overwrite") == 2


def test_a_second_trainer_on_a_locked_run_exits_at_once_naming_the_holder(problems, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    rows = len(RunDirectory(run).read("train"))
    capsys.readouterr()
    with RunDirectory(run).lock():
        assert train(problems, run, "--resume") == 2
    assert f"is being trained by process {os.getpid()}" in capsys.readouterr().err
    assert len(RunDirectory(run).read("train")) == rows  # nothing written by the refused process
    (run / ".lock").write_text("999999")  # left by a killed process: nobody holds the lock
    assert train(problems, run, "--resume") == 0


def test_resume_cuts_the_log_back_with_the_metrics_and_files_are_plain(problems, tmp_path):
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    with open(run / "log.txt", "a") as handle:
        handle.write("a line written after the last checkpoint\n")
    assert train(problems, run, "--resume") == 0
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
