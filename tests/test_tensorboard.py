"""`sgps train --tensorboard`: event files TensorBoard's own reader accepts, across a resume."""

from __future__ import annotations

import shutil
import sys

import pytest

from sgps.cli import main
from sgps.domains import get_domain, write_levels

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def read_events(folder):
    reader = event_accumulator.EventAccumulator(str(folder), size_guidance={event_accumulator.SCALARS: 0})
    reader.Reload()
    return reader


def steps(reader, tag):
    return [event.step for event in reader.Scalars(tag)]


@pytest.fixture
def problems(tmp_path):
    domain = get_domain("boxworld")  # not all solved at once, so the run has several passes
    path = tmp_path / "train.txt"
    write_levels(path, domain, [domain.generate(seed) for seed in range(10)])
    return path


def train(problems, run, *extra):
    args = ["train", "--problems", str(problems), "--out", str(run), "--quiet", "--max-batches", "1", *extra]
    assert main(args) == 0


def test_a_run_and_its_resume_write_one_series_without_repeated_steps(tmp_path, problems):
    run, board = tmp_path / "run", tmp_path / "tb"
    small = tmp_path / "small.toml"  # a quarter of the tiny preset's budget: the same passes, a quarter of the search
    small.write_text("[bootstrap]\ninitial_budget = 125\n")
    train(problems, run, "--algorithm", "phs-sg", "--preset", "tiny", "--device", "cpu", "--tensorboard", str(board),
          "--config", str(small))  # fmt: skip
    first = read_events(board)
    tags = set(first.Tags()["scalars"])
    expected = {"train/outstanding", "train/solved_in_batch", "train/solved_in_pass", "train/budget", "train/pass",
                "train/expansions_per_second", "validation/solved", "validation/solved_ever",
                "learning/loss_vqvae", "learning/loss_low", "learning/codes_used", "learning/code_perplexity",
                "learning/probe_low_nll"}  # fmt: skip
    assert expected <= tags, expected - tags
    assert "config/text_summary" in first.Tags()["tensors"]  # the resolved config, as text
    train(problems, run, "--resume")  # the next batch, logged in the same folder
    saved = run / "checkpoints" / "trainer.pt"
    kept = tmp_path / "trainer-after-2.pt"
    shutil.copy(saved, kept)
    train(problems, run, "--resume")  # batch 3 is logged, then the run "crashes" back to batch 2's checkpoint
    shutil.copy(kept, saved)
    train(problems, run, "--resume")  # batch 3 again, logged again
    reader = read_events(board)
    for tag in ("train/outstanding", "learning/loss_vqvae"):
        logged = steps(reader, tag)
        assert len(logged) == 3 and logged == sorted(set(logged)) and logged[0] > 0, (tag, logged)
    outstanding = [int(row.split(",")[2]) for row in (run / "metrics" / "outstanding.csv").read_text().split()[2:]]
    assert steps(reader, "train/outstanding") == outstanding  # the step is the cumulative expansions
    times = [event.wall_time for event in reader.Scalars("train/outstanding")]
    assert times == sorted(times) and times[-1] < 3600  # the loop's own clock, not the calendar


def test_without_the_package_the_option_is_one_clear_line_and_nothing_is_written(tmp_path, problems, monkeypatch,
                                                                                 capsys):  # fmt: skip
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # what an absent package looks like
    run = tmp_path / "run"
    code = main(["train", "--problems", str(problems), "--out", str(run), "--quiet", "--preset", "tiny",
                 "--tensorboard", str(tmp_path / "tb")])  # fmt: skip
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "pip install" in error and "tensorboard" in error
    assert not run.exists() and not (tmp_path / "tb").exists()
