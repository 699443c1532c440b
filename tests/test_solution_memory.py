"""The solution memory (`bootstrap.solution_memory`): earlier solutions learnt again, across resumes and forks."""

from __future__ import annotations

import re

import pytest
import torch
from safetensors.torch import load_file

from sgps.domains import get_domain, read_levels
from sgps.runs import runner
from sgps.runs.fork import fork_run
from sgps.runs.rundir import RunDirectory
from sgps.runs.trainer_state import read_trainer_state
from sgps.search.costs import make_algorithm
from sgps.search.drivers import search
from sgps.search.engine import SearchResult
from sgps.search.evaluators import UniformPolicy
from sgps.training.config import load_run_config
from sgps.training.setup import training_and_validation
from sgps.training.solution_memory import recall, remember
from test_packing import SETTINGS, learning_columns, levels, without_time

#: The packing tests' tiny π^SG run (budget 150 on 40 TSP levels solves some in every pass), with a memory.
MEMORY = 4


def train(problems, out, memory: int, **options) -> None:
    overrides = {**SETTINGS, "bootstrap": {**SETTINGS["bootstrap"], "solution_memory": memory}}
    runner.train(problems, out, preset="tiny", overrides=overrides, quiet=True, threads=1, **options)


def solved(actions: tuple[int, ...], expanded: int = 10) -> SearchResult:
    return SearchResult("solved", None, actions, expanded, 0, 0.0, -1.5)


def failed() -> SearchResult:
    return SearchResult("budget", None, None, 10, 0, 0.0, None)


def test_the_memory_keeps_the_latest_solution_of_each_problem_and_drops_the_oldest_first():
    memory = remember([], [3, 5, 7], [solved((0,)), failed(), solved((1, 2), 20)], capacity=3)
    assert memory == [[3, [0], 10, -1.5], [7, [1, 2], 20, -1.5]]
    memory = remember(memory, [9, 3], [solved((2,)), solved((3, 3), 30)], capacity=3)
    assert memory == [[7, [1, 2], 20, -1.5], [9, [2], 10, -1.5], [3, [3, 3], 30, -1.5]]  # 3's new solution, last
    assert remember(memory, [11], [solved((0,))], capacity=2) == [[3, [3, 3], 30, -1.5], [11, [0], 10, -1.5]]
    assert remember(memory, [11], [solved((0,))], capacity=0) == []


def test_a_remembered_solution_is_replayed_from_its_level_and_must_still_reach_its_goal():
    domain = get_domain("tsp")
    level = domain.generate(0)
    found = search(domain, level, make_algorithm("levin"), UniformPolicy(domain), budget=100_000)
    assert found.solved
    memory = remember([], [0], [found], capacity=1)
    (again,) = recall(domain, [level], memory, exclude=set())
    assert again.solved and again.actions == found.actions and again.expanded == found.expanded
    assert [domain.key(state) for state in again.states] == [domain.key(state) for state in found.states]
    assert recall(domain, [level], memory, exclude={0}) == []  # solved in this batch: learnt from its own search
    with pytest.raises(ValueError, match="training problem 0 no longer reaches its goal"):
        recall(domain, [level], [[0, list(found.actions[:-1]), 5, None]], exclude=set())


def recalled_counts(run) -> list[int]:
    log = (run / "log.txt").read_text()
    return [int(count) for count in re.findall(r"learnt (\d+) remembered solutions again", log)]


def test_a_run_with_a_memory_learns_its_earlier_solutions_again_and_resumes_as_if_never_stopped(tmp_path):
    problems = levels(tmp_path / "train.txt")
    whole, stopped, plain = tmp_path / "whole", tmp_path / "stopped", tmp_path / "plain"
    train(problems, whole, MEMORY)
    counts = recalled_counts(whole)
    assert counts and max(counts) > 0 and max(counts) <= MEMORY  # the memory was used, within its capacity
    remembered = read_trainer_state(whole / "checkpoints" / "trainer.pt")["loop"]["remembered"]
    assert 0 < len(remembered) <= MEMORY
    config = load_run_config(whole / "config.toml")
    train_levels, _ = training_and_validation(problems, read_levels(problems), None, config)  # the run's split
    assert len(recall(get_domain("tsp"), train_levels, remembered, exclude=set())) == len(remembered)

    train(problems, plain, 0)  # the same run without a memory learns otherwise once something is recalled
    assert recalled_counts(plain) == []
    first_recall = next(batch for batch, count in enumerate(counts) if count)
    plain_learning = RunDirectory(plain, learning_columns(plain)).read("learning")
    whole_learning = RunDirectory(whole, learning_columns(whole)).read("learning")
    assert plain_learning[:first_recall] == whole_learning[:first_recall]
    assert plain_learning != whole_learning

    train(problems, stopped, MEMORY, max_batches=3)
    runner.train(problems, stopped, resume=True, quiet=True, threads=1)
    columns = learning_columns(whole)
    for name in ("train", "validate", "outstanding", "learning"):
        expected = without_time(RunDirectory(whole, columns).read(name))
        assert without_time(RunDirectory(stopped, columns).read(name)) == expected, name
    left = load_file(whole / "checkpoints" / "latest.safetensors")
    right = load_file(stopped / "checkpoints" / "latest.safetensors")
    assert left.keys() == right.keys() and all(torch.equal(left[key], right[key]) for key in left)
    assert recalled_counts(stopped) == counts


def test_a_fork_turns_the_memory_on_or_off_keeping_at_most_what_its_parent_remembered(tmp_path):
    problems = levels(tmp_path / "train.txt")
    without, with_memory = tmp_path / "without", tmp_path / "with"
    train(problems, without, 0, max_batches=2)
    train(problems, with_memory, MEMORY, max_batches=2)
    made = fork_run(without, tmp_path / "on", {"bootstrap": {"solution_memory": 8}}, problems=problems)
    assert made.changes == ("bootstrap.solution_memory 0 -> 8",)
    assert read_trainer_state(tmp_path / "on" / "checkpoints" / "trainer.pt")["loop"]["remembered"] == []
    parent = read_trainer_state(with_memory / "checkpoints" / "trainer.pt")["loop"]["remembered"]
    assert parent
    fork_run(with_memory, tmp_path / "one", {"bootstrap": {"solution_memory": 1}}, problems=problems)
    assert read_trainer_state(tmp_path / "one" / "checkpoints" / "trainer.pt")["loop"]["remembered"] == parent[-1:]
    fork_run(with_memory, tmp_path / "off", {"bootstrap": {"solution_memory": 0}}, problems=problems)
    assert read_trainer_state(tmp_path / "off" / "checkpoints" / "trainer.pt")["loop"]["remembered"] == []
    runner.train(tmp_path / "on" / "problems" / "train.txt", tmp_path / "on", resume=True, quiet=True, threads=1,
                 max_batches=1)  # fmt: skip
    assert len(recalled_counts(tmp_path / "on")) == 1
