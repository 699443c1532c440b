"""The Bootstrap loop: run directory contents, learning, stopping, and exact resume."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from sgps.domains import get_domain
from sgps.errors import CheckpointError
from sgps.models import FlatNetwork, FlatNetworkConfig
from sgps.runs.rundir import RunDirectory
from sgps.search import make_algorithm
from sgps.training import Bootstrap, BootstrapConfig, FlatLearner, FlatMethod, LearnerConfig
from sgps.training.bootstrap import is_better_validation
from sgps.training.session import Session

CONFIG = BootstrapConfig(seed=3, batch_size=4, initial_budget=60, max_iterations=3, checkpoint_every=2)


def make_run(path, config=CONFIG, *, fresh=True):
    domain = get_domain("tsp")
    train = [domain.generate(seed) for seed in range(12)]
    validation = [domain.generate(seed) for seed in range(500, 506)]
    torch.manual_seed(config.seed)
    network = FlatNetwork(FlatNetworkConfig(domain.observation_shape(train[0]), 4, channels=8, blocks=1))
    learner = FlatLearner(
        network, LearnerConfig(learning_rate=3e-3, epochs=3, minibatch=32), torch.Generator().manual_seed(1)
    )
    run_dir = RunDirectory(path)
    if fresh:
        run_dir.create({"bootstrap": {"seed": config.seed}})
    method = FlatMethod(domain, make_algorithm("phs"), learner)
    return Bootstrap(domain, train, validation, method, config, run_dir)


def without_time(rows):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def test_a_run_writes_its_directory_and_stops(tmp_path):
    bootstrap = make_run(tmp_path / "run")
    state = bootstrap.run()
    run_dir = bootstrap.run_dir
    assert state.finished and state.iteration <= 3
    train = run_dir.read("train")
    assert len(train) == 12 * state.iteration and {row["budget"] for row in train} >= {"60"}
    assert len(run_dir.read("validate")) == 6 * state.iteration
    outstanding = run_dir.read("outstanding")
    assert len(outstanding) == 1 + 3 * state.iteration
    assert [outstanding[0][k] for k in ("batch", "cumulative_expansions", "outstanding")] == ["-1", "0", "12"]
    assert int(outstanding[-1]["outstanding"]) == 12 - len(state.solved)
    seconds = [float(row["seconds"]) for row in outstanding]
    assert seconds == sorted(seconds) and seconds[-1] > 0
    for name in ("latest.safetensors", "best.safetensors", "trainer.pt"):
        assert (run_dir.checkpoints / name).exists()
    assert (run_dir.path / "config.toml").read_text().startswith("[bootstrap]")
    assert "validation" in (run_dir.path / "log.txt").read_text()


def test_resume_after_batch_k_repeats_nothing_and_matches_an_uninterrupted_run(tmp_path):
    whole = make_run(tmp_path / "whole")
    whole.run(max_batches=5)
    interrupted = make_run(tmp_path / "split")
    interrupted.run(max_batches=3)
    interrupted.run_dir.append(
        "train",
        [
            dict.fromkeys(
                ("iteration", "batch", "problem", "solved", "expanded", "generated", "length", "budget", "seconds"), 99
            )
        ],
    )  # a row after the checkpoint
    resumed = make_run(tmp_path / "split", fresh=False)
    resumed.resume()
    resumed.run(max_batches=2)
    for name in ("train", "outstanding", "validate"):
        assert without_time(resumed.run_dir.read(name)) == without_time(whole.run_dir.read(name)), name
    assert resumed.state.train_budget == whole.state.train_budget


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    bootstrap = make_run(tmp_path / "empty")
    with pytest.raises(CheckpointError, match="no trainer checkpoint to resume from"):
        bootstrap.resume()
    (bootstrap.run_dir.checkpoints / "trainer.pt").write_bytes(b"broken")
    with pytest.raises(CheckpointError, match="not a readable trainer checkpoint"):
        bootstrap.resume()


def test_a_run_stops_once_every_training_problem_is_solved(tmp_path):
    config = BootstrapConfig(seed=3, batch_size=4, initial_budget=5000, max_iterations=5)
    bootstrap = make_run(tmp_path / "run", config)
    state = bootstrap.run()
    assert len(state.solved) == 12 and state.iteration == 1  # the first pass solved all, validation not yet 90%
    outstanding = bootstrap.run_dir.read("outstanding")
    assert (outstanding[0]["cumulative_expansions"], outstanding[0]["outstanding"]) == ("0", "12")
    assert outstanding[-1]["outstanding"] == "0"
    assert "every training problem is solved" in (bootstrap.run_dir.path / "log.txt").read_text()
    # The reference's loop runs on until the validation rule instead.
    config = dataclasses.replace(config, stop_when_all_solved=False, max_iterations=2, validation_ratio=1.0)
    assert make_run(tmp_path / "on", config).run().iteration == 2


def test_the_best_model_is_the_one_solving_most_validation_problems_then_the_shortest_total():
    assert is_better_validation(5, 900, best_solved=4, best_length=100)
    assert is_better_validation(5, 90, best_solved=5, best_length=100)
    assert not is_better_validation(5, 100, best_solved=5, best_length=100)
    assert not is_better_validation(4, 10, best_solved=5, best_length=100)
    assert is_better_validation(0, 0, best_solved=-1, best_length=0)  # the first pass always counts


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({"max_expansions": 1}, "expansion limit"),
        ({"max_iterations": 1}, "iteration limit"),
        ({"time_limit_minutes": 1e-9}, "wall-clock limit"),
        ({"max_iterations": 30, "initial_budget": 5000}, "every training problem solved"),
    ],
)
def test_the_loop_records_why_it_stopped(tmp_path, limits, reason):
    bootstrap = make_run(tmp_path / "run", dataclasses.replace(CONFIG, **limits))
    state = bootstrap.run()
    assert state.finished and state.stop_reason == reason
    assert state.stopped_by_limit == (reason in ("expansion limit", "iteration limit", "wall-clock limit"))
    resumed = make_run(tmp_path / "run", dataclasses.replace(CONFIG, **limits), fresh=False)
    resumed.resume()
    assert resumed.state.stop_reason == reason  # kept by the checkpoint


class StepCounter:
    """A session that allows `steps` steps (batches and pass ends) and records what each was predicted to need."""

    def __init__(self, steps):
        self.steps, self.asked = steps, []

    def allows(self, seconds):
        self.asked.append(seconds)
        return len(self.asked) <= self.steps


@pytest.mark.parametrize("steps, where", [(4, (1, 0)), (3, (0, 3))])  # after a pass end; just before one
def test_a_session_pauses_at_a_checkpoint_and_the_resumed_run_is_the_uninterrupted_one(tmp_path, steps, where):
    whole = make_run(tmp_path / "whole")
    whole.run()
    paused = make_run(tmp_path / "split")
    session = StepCounter(steps)  # a pass is 3 batches of 4 problems, then its pass end
    state = paused.run(session=session)
    assert not state.finished and (state.iteration, state.next_batch) == where
    assert session.asked[0] == 0  # a new run's first batch: nothing measured
    assert session.asked[2] > session.asked[1] > 0  # the last batch of a pass brings its pass end
    assert "paused: the session's time is up" in (paused.run_dir.path / "log.txt").read_text()
    times = paused.step_times
    assert len(times.batches) == 3 and min(times.batches) > 0 and times.checkpoint > 0
    assert (times.pass_end > 0) == (steps == 4)
    resumed = make_run(tmp_path / "split", fresh=False)
    resumed.resume()
    kept = resumed.step_times  # kept in the checkpoint: a resumed command predicts from them
    assert (kept.batches, kept.pass_end) == (times.batches, times.pass_end) and kept.checkpoint > 0
    assert (resumed.state.iteration, resumed.state.next_batch) == where  # nothing to search again
    resumed.run()
    for name in ("train", "outstanding", "validate"):
        assert without_time(resumed.run_dir.read(name)) == without_time(whole.run_dir.read(name)), name


def test_a_session_over_before_the_first_batch_trains_nothing(tmp_path):
    bootstrap = make_run(tmp_path / "run")
    state = bootstrap.run(session=Session(deadline=0.0))
    assert state.cumulative_expansions == 0 and not state.finished
    assert bootstrap.run_dir.read("train") == []
    assert (bootstrap.run_dir.checkpoints / "trainer.pt").exists()
