"""`sgps fork`: a run carried on from its last checkpoint in a new folder, under other budgets; the parent untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import sgps
from sgps.cli import main
from sgps.errors import ConfigError
from sgps.runs import runner
from sgps.runs.fork import fork_run
from sgps.runs.rundir import RunDirectory
from sgps.runs.trainer_state import encode_trainer_state, read_trainer_state
from sgps.training.config import read_toml
from test_packing import learning_columns, levels, train, without_time


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name != ".lock"}  # fmt: skip


def same_weights(a: Path, b: Path) -> bool:
    left, right = load_file(a), load_file(b)
    return left.keys() == right.keys() and all(torch.equal(left[key], right[key]) for key in left)


def test_a_fork_of_the_same_schedule_goes_on_exactly_as_its_parent_would_and_leaves_it_as_it_was(tmp_path):
    problems = levels(tmp_path / "train.txt")
    whole, parent, fork = tmp_path / "whole", tmp_path / "parent", tmp_path / "fork"
    train(problems, whole)
    train(problems, parent, max_batches=2)
    before = folder_bytes(parent)
    made = fork_run(parent, fork, {"bootstrap": {"checkpoint_every": 3}}, problems=problems)  # changes no result
    assert folder_bytes(parent) == before
    expansions = read_trainer_state(parent / "checkpoints" / "trainer.pt")["loop"]["cumulative_expansions"]
    assert (made.expansions, made.iteration, made.next_batch) == (expansions, 0, 2)
    assert made.changes == ("bootstrap.checkpoint_every 1 -> 3",)
    runner.train(fork / "problems" / "train.txt", fork, resume=True, quiet=True, threads=1)
    columns = learning_columns(whole)
    for name in ("train", "validate", "outstanding", "learning"):
        expected = without_time(RunDirectory(whole, columns).read(name))
        assert without_time(RunDirectory(fork, columns).read(name)) == expected, name
    for name in ("latest.safetensors", "best.safetensors"):
        assert same_weights(whole / "checkpoints" / name, fork / "checkpoints" / name), name
    log = (fork / "log.txt").read_text()
    assert f"forked from {parent.absolute()} at {made.expansions} expansions (iteration 0, batch 2)" in log
    assert log.index("forked from") < log.index("resumed on cpu")


def test_a_fork_searches_the_parents_next_batch_under_its_own_budget_and_goes_on_as_it_says(tmp_path, capsys):
    problems = levels(tmp_path / "train.txt")
    parent, fork = tmp_path / "parent", tmp_path / "fork"
    train(problems, parent, max_batches=2)
    parent_rows = RunDirectory(parent).read("train")
    args = ["fork", str(parent), "--out", str(fork), "--problems", str(problems), "--initial-budget", "400"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "bootstrap.initial_budget 150 -> 400; next training budget 400" in printed
    go_on = printed.split("go on with: ")[1].strip().split()
    assert go_on[:2] == ["sgps", "train"]
    assert main([*go_on[1:], "--quiet", "--threads", "1", "--max-batches", "1"]) == 0
    rows = RunDirectory(fork).read("train")
    assert rows[: len(parent_rows)] == parent_rows
    assert {row["budget"] for row in rows[len(parent_rows) :]} == {"400"}
    assert {row["batch"] for row in rows[len(parent_rows) :]} == {"2"}  # the batch the parent would have run next
    assert read_toml(fork / "config.toml")["bootstrap"]["initial_budget"] == 400
    assert read_toml(parent / "config.toml")["bootstrap"]["initial_budget"] == 150
    assert main(["pack", str(fork), "--out", str(tmp_path / "archive"), "--problems", go_on[3]]) == 0


def test_a_forks_max_budget_caps_the_budget_in_effect_and_a_fork_takes_the_problems_its_parent_holds(tmp_path):
    problems = levels(tmp_path / "train.txt", count=24)
    parent, fork = tmp_path / "parent", tmp_path / "fork"
    train(problems, parent, max_batches=1)
    trainer = parent / "checkpoints" / "trainer.pt"
    state = read_trainer_state(trainer)
    state["loop"].update(train_budget=1000, validation_budget=1000)  # as if the schedule had raised it
    trainer.write_bytes(encode_trainer_state(state))
    assert fork_run(parent, fork, {"bootstrap": {"max_budget": 300}}, problems=problems).budget == 300
    loop = read_trainer_state(fork / "checkpoints" / "trainer.pt")["loop"]
    assert (loop["train_budget"], loop["validation_budget"]) == (300, 300)
    again = sgps.fork(fork, tmp_path / "again", initial_budget=200, time_limit=30)  # problems: fork/problems/train.txt
    assert again.budget == 200 and (tmp_path / "again" / "problems" / "train.txt").read_bytes() == problems.read_bytes()
    assert read_toml(tmp_path / "again" / "config.toml")["bootstrap"]["time_limit_minutes"] == 30
    with pytest.raises(TypeError, match="out must be a folder"):
        sgps.fork(fork, 3)


def test_a_fork_refuses_what_would_change_the_run_and_leaves_nothing_half_made(tmp_path):
    problems = levels(tmp_path / "train.txt", count=24)
    others = levels(tmp_path / "others.txt", count=24, seed=500)
    parent = tmp_path / "parent"
    train(problems, parent, max_batches=1)
    (tmp_path / "taken").mkdir()
    refusals = [
        ({"subgoal": {"codebook_size": 8}}, tmp_path / "fork", problems, "subgoal.codebook_size cannot change"),
        ({"bootstrap": {"initial_budget": 0}}, tmp_path / "fork", problems, "bootstrap.initial_budget"),
        ({}, tmp_path / "taken", problems, "already exists; fork into a new folder"),
        ({}, parent / "inside", problems, "lies inside the RUN input"),
        ({}, tmp_path / "fork", others, "not the train problems"),
        ({}, tmp_path / "fork", None, "give the level file it was trained on"),
    ]
    for changes, out, given, message in refusals:
        with pytest.raises(ConfigError, match=message):
            fork_run(parent, out, changes, problems=given)
    trainer = parent / "checkpoints" / "trainer.pt"
    state = read_trainer_state(trainer)
    state["loop"].update(finished=True, stop_reason="validation rule")
    trainer.write_bytes(encode_trainer_state(state))
    with pytest.raises(ConfigError, match="finished by its validation rule"):
        fork_run(parent, tmp_path / "fork", {"bootstrap": {"initial_budget": 400}}, problems=problems)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["others.txt", "parent", "taken", "train.txt"]
    assert not (parent / "inside").exists()
