"""HIPS-ε: its dataset, the engine's child generators, subgoal validation by rollouts, a tiny run end to end."""

from __future__ import annotations

import csv
import math
import os
import signal
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest
import torch

import sgps
from sgps.cli import main
from sgps.domains import get_domain
from sgps.domains.generation import generate_levels
from sgps.domains.levels import read_levels, write_levels
from sgps.domains.solver import solve
from sgps.errors import ConfigError
from sgps.experiments.summary import terminal_summary
from sgps.models.checkpoint import architecture, recorded_architecture, save_checkpoint
from sgps.models.hips import CellClasses, HipsConfig, HipsModel, cell_patterns
from sgps.runs import runner
from sgps.runs.run import Run
from sgps.search import Edge, hips_cost, make_algorithm, search_lockstep
from sgps.search.engine import BestFirstSearch
from sgps.search.evaluators import DomainHeuristic
from sgps.training.methods.hips import dataset as dataset_module
from sgps.training.methods.hips import run as hips_run
from sgps.training.methods.hips.dataset import Dataset, Trajectory, build_dataset, read_dataset, write_dataset
from sgps.training.methods.hips.run import resolve_settings
from sgps.training.methods.hips.search import HybridChildren

SMALL_TSP = {"size": 6, "cities": 2, "walls": True}


@pytest.fixture(scope="module")
def tsp():
    return get_domain("tsp")


def small_levels(domain, seed: int, count: int) -> list[Any]:
    return generate_levels(domain, SMALL_TSP, seed, count)


def level_file(tmp_path, domain, name: str, seed: int, count: int):
    path = tmp_path / name
    write_levels(path, domain, small_levels(domain, seed, count), variant="standard", seed=seed, params=SMALL_TSP)
    return path


# -- the dataset ---------------------------------------------------------------------------


def test_dataset_round_trip_replays_every_trajectory_to_a_goal(tmp_path, tsp):
    levels = read_levels(level_file(tmp_path, tsp, "train.txt", 0, 6)).levels
    built = build_dataset(tsp, levels)
    assert not built.skipped and len(built.dataset.trajectories) == 6
    write_dataset(tmp_path / "data.npz", built.dataset)
    again = read_dataset(tmp_path / "data.npz", "tsp")
    assert [t.actions for t in again.trajectories] == [t.actions for t in built.dataset.trajectories]
    assert [t.name for t in again.trajectories] == [level.name for level in levels]
    for trajectory, level in zip(again.trajectories, levels, strict=True):
        assert tsp.key(trajectory.states[0]) == tsp.key(level.state)
        assert tsp.is_goal(trajectory.states[-1])
        assert len(trajectory.states) == len(trajectory.actions) + 1


def test_dataset_skips_levels_the_solver_cannot_finish(tmp_path, tsp):
    levels = read_levels(level_file(tmp_path, tsp, "train.txt", 0, 3)).levels
    built = build_dataset(tsp, levels, max_states=2)
    assert not built.dataset.trajectories
    assert [name for name, _ in built.skipped] == [level.name for level in levels]
    assert all("state cap" in reason for _, reason in built.skipped)


def test_a_dataset_whose_actions_miss_the_goal_is_refused(tmp_path, tsp):
    level = small_levels(tsp, 0, 1)[0]
    solved = build_dataset(tsp, read_levels(level_file(tmp_path, tsp, "one.txt", 0, 1)).levels).dataset
    short = Trajectory("cut", solved.trajectories[0].states[:-1], solved.trajectories[0].actions[:-1])
    write_dataset(tmp_path / "bad.npz", Dataset(tsp, (short,)))
    with pytest.raises(ConfigError, match=r"bad.npz: trajectory 0 \(cut\): its actions do not reach a goal"):
        read_dataset(tmp_path / "bad.npz")
    assert tsp.key(short.states[0]) == tsp.key(level)
    with pytest.raises(ConfigError, match="a tsp dataset, but this run is on sokoban"):
        read_dataset(tmp_path / "bad.npz", "sokoban")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match=r"junk\.npz: not a dataset written by `sgps dataset`"):
        read_dataset(tmp_path / "junk.npz")


# -- the engine with a child generator -------------------------------------------------------


class MacroChildren:
    """Edges of the optimal solution as one two-action macro edge plus the primitive actions."""

    def __init__(self, domain, plan: tuple[int, ...]) -> None:
        self.domain, self.plan = domain, plan

    def expand(self, state):
        edges = []
        start = self.domain.step(self.domain.step(state, self.plan[0]), self.plan[1])
        edges.append(Edge(start, self.plan[:2], math.log(0.9)))
        for action in range(self.domain.num_actions):
            edges.append(Edge(self.domain.step(state, action), (action,), math.log(0.1 / self.domain.num_actions)))
        return edges, 2 + self.domain.num_actions


def test_the_engine_follows_generated_edges_and_returns_primitive_actions(tsp):
    level = small_levels(tsp, 3, 1)[0]
    actions = solve(tsp, level).actions
    assert actions is not None and len(actions) >= 3
    engine = BestFirstSearch(tsp, level, make_algorithm("hips"), children=MacroChildren(tsp, actions))
    while states := engine.advance():
        engine.receive(None, np.zeros(len(states)))
    result = engine.result
    assert result.solved
    assert result.expanded >= 1 and result.domain_steps == result.expanded * (2 + tsp.num_actions)
    state = level
    for action, recorded in zip(result.actions, result.states[1:], strict=True):
        state = tsp.step(state, action)
        assert tsp.key(state) == tsp.key(recorded)
    assert tsp.is_goal(state)
    assert result.actions[:2] == actions[:2]  # the macro edge, flattened into its primitive actions


def test_hips_cost_uses_the_low_level_distance():
    assert hips_cost(0, 0.0, 5.0, 0) == 0.0
    # m = 1 + 6/3 = 3: ln(2 * 3) - 3 ln π
    assert hips_cost(2, math.log(0.5), 6.0, 3) == pytest.approx(math.log(6) - 3 * math.log(0.5))
    assert hips_cost(2, math.log(0.5), -4.0, 3) == pytest.approx(math.log(2) - math.log(0.5))  # h clamped at 0
    # the same g and π, a longer low-level distance travelled: a smaller m, a cheaper node
    assert hips_cost(2, math.log(0.5), 6.0, 12) < hips_cost(2, math.log(0.5), 6.0, 3)


def test_flat_searches_count_their_domain_steps(tsp):
    level = small_levels(tsp, 1, 1)[0]
    [result] = search_lockstep(tsp, [level], make_algorithm("wastar"), DomainHeuristic(tsp))
    assert result.solved
    assert (result.expanded - 1) * tsp.num_actions < result.domain_steps <= result.expanded * tsp.num_actions


# -- subgoal validation by rollouts ----------------------------------------------------------


class ScriptedModel:
    """Stands in for `HipsModel`: decodes given observations, π_low always picks one action."""

    def __init__(self, subgoals: list[np.ndarray], action: int, num_actions: int) -> None:
        self.subgoals, self.action, self.num_actions = subgoals, action, num_actions
        self.cells = CellClasses(subgoals[0].shape[0])
        self.generator = self
        self.prior = self._prior

    def _prior(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(len(observations), len(self.subgoals)), torch.zeros(len(observations), self.num_actions)

    def subgoal_logits(self, observations: torch.Tensor) -> torch.Tensor:
        stacked = torch.from_numpy(np.stack(self.subgoals)).float()
        return (10.0 * self.cells.encode(stacked)).unsqueeze(0)

    def low_logits(self, states: torch.Tensor, subgoals: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(len(states), self.num_actions)
        logits[:, self.action] = 1.0
        return logits


def one_step_away(domain, level) -> tuple[int, Any]:
    for action in range(domain.num_actions):
        child = domain.step(level, action)
        if domain.key(child) != domain.key(level) and not domain.is_goal(child):
            return action, child
    raise AssertionError("no move from this level")


def test_a_subgoal_is_kept_only_when_a_rollout_reaches_it_exactly(tsp):
    level = small_levels(tsp, 2, 1)[0]
    action, near = one_step_away(tsp, level)
    reachable = tsp.observe([near])[0]
    unreachable = np.zeros_like(reachable)  # an empty board: no TSP state looks like it
    own = tsp.observe([level])[0]
    model = ScriptedModel([reachable, unreachable, own, reachable], action, tsp.num_actions)
    children = HybridChildren(tsp, model, epsilon=1e-3, rollout_steps=5, device=torch.device("cpu"))
    edges, steps = children.expand(level)
    subgoal_edges = edges[: len(edges) - tsp.num_actions]
    assert [(tsp.key(e.state), e.actions) for e in subgoal_edges] == [(tsp.key(near), (action,))]
    # codes 0 and 3 decode to the same subgoal: merged, (1 - ε) of the probability between them
    assert math.exp(subgoal_edges[0].log_prob) == pytest.approx(1 - 1e-3)
    primitive = edges[-tsp.num_actions :]
    assert [e.actions for e in primitive] == [(a,) for a in range(tsp.num_actions)]
    assert sum(math.exp(e.log_prob) for e in primitive) == pytest.approx(1e-3)
    # one step to the reached subgoal, one per primitive child; the empty board (no agent)
    # is ruled out by TSP's invariants, so it gets no rollout ...
    assert steps == 1 + tsp.num_actions
    # ... which it would have had, for nothing, without them: the same edges, more steps
    unpruned = HybridChildren(tsp, model, epsilon=1e-3, rollout_steps=5, device=torch.device("cpu"), prune=False)
    edges_unpruned, steps_unpruned = unpruned.expand(level)
    assert [(tsp.key(e.state), e.actions, e.log_prob) for e in edges_unpruned] == [
        (tsp.key(e.state), e.actions, e.log_prob) for e in edges
    ]
    assert 1 + tsp.num_actions < steps_unpruned <= 1 + 5 + tsp.num_actions


def test_a_rollout_stops_once_its_subgoal_is_out_of_reach(tsp):
    # . . . . .
    # o . @ . o    the subgoal: the agent one cell up; π_low walks left into a city, which
    # . . . . .    the subgoal shows unvisited: no rollout can reach it from there
    level = tsp.parse([3, 5, 0, 0, 0, 0, 0, 3, 0, 1, 0, 3, 0, 0, 0, 0, 0])
    up, left = 0, 3
    subgoal = tsp.observe([tsp.step(level, up)])[0]
    model = ScriptedModel([subgoal], left, tsp.num_actions)
    steps = {}
    for prune in (True, False):
        children = HybridChildren(tsp, model, epsilon=1e-3, rollout_steps=5, device=torch.device("cpu"), prune=prune)
        edges, steps[prune] = children.expand(level)
        assert len(edges) == tsp.num_actions  # the subgoal is not reached either way
    # pruned: stopped on entering the city (2 steps); else it bumps into the edge and stops on a repeat (3)
    assert steps == {True: 2 + tsp.num_actions, False: 3 + tsp.num_actions}


def test_with_every_subgoal_invalid_the_search_still_solves_through_primitive_actions(tsp):
    levels = small_levels(tsp, 10, 3)
    own = tsp.observe([levels[0]])[0]
    model = ScriptedModel([np.zeros_like(own)], 0, tsp.num_actions)  # an all-empty board: never reached
    children = HybridChildren(tsp, model, epsilon=1e-3, rollout_steps=3, device=torch.device("cpu"))
    results = search_lockstep(tsp, levels, make_algorithm("hips"), DomainHeuristic(tsp), children=children)
    for level, result in zip(levels, results, strict=True):
        assert result.solved
        state = level
        for action in result.actions:
            state = tsp.step(state, action)
        assert tsp.is_goal(state)


def test_decoding_inverts_the_cell_classes_of_one_hot_or_empty_cells():
    observations = torch.zeros(2, 3, 2, 2)
    observations[0, 1, 0, 0] = observations[1, 2, 1, 1] = observations[1, 0, 0, 1] = 1
    cells = CellClasses(3)
    encoded = cells.encode(observations)
    assert encoded.shape == (2, 4, 2, 2) and torch.equal(encoded.sum(dim=1), torch.ones(2, 2, 2))
    assert torch.equal(cells.decode(5.0 * encoded), observations)


def sokoban_trajectory_observations() -> np.ndarray:
    """Compact Sokoban observations along a solution: boxes end on goals (box and goal channels in one cell)."""
    sokoban = get_domain("sokoban")
    level = sokoban.generate(3, size=7, boxes=2)
    states = [level]
    for action in solve(sokoban, level).actions:
        states.append(sokoban.step(states[-1], action))
    return sokoban.observe(states)


def test_multi_channel_cells_are_classes_of_their_own_and_decode_exactly():
    observations = sokoban_trajectory_observations()
    patterns = cell_patterns([observations])
    assert (2, 3) in patterns and set(patterns) <= {(0, 3), (2, 3)}  # box on goal (and agent on goal)
    cells = CellClasses(4, patterns)
    encoded = cells.encode(torch.from_numpy(observations))
    assert encoded.shape[1] == 4 + 1 + len(patterns)
    assert torch.equal(encoded.sum(dim=1), torch.ones(encoded.shape[0], *encoded.shape[2:]))  # one class per cell
    # the final state (every box on a goal) is a subgoal the decoder can propose
    assert torch.equal(cells.decode(3.0 * encoded), torch.from_numpy(observations))
    # without the patterns (the first runs) it is not: a box on a goal decodes to one channel
    assert not torch.equal(CellClasses(4).decode(CellClasses(4).encode(torch.from_numpy(observations))),
                           torch.from_numpy(observations))  # fmt: skip


def test_cell_patterns_are_in_the_checkpoint_and_absent_from_older_ones(tmp_path):
    base = {"channels": 4, "blocks": 1, "codebook_size": 3, "code_dim": 8, "vq_channels": 4, "vq_blocks": 1}
    plain = HipsModel(HipsConfig((4, 5, 5), 4, **base))
    assert "cell_patterns" not in architecture(plain)  # a run trained before the patterns still loads
    patterned = HipsModel(HipsConfig((4, 5, 5), 4, **base, cell_patterns=((0, 3), (2, 3))))
    assert patterned.generator.shape == (7, 5, 5)
    save_checkpoint(tmp_path / "model.safetensors", patterned)
    assert recorded_architecture(tmp_path / "model.safetensors")["cell_patterns"] == [[0, 3], [2, 3]]
    with pytest.raises(ValueError, match="cell pattern"):
        HipsConfig((4, 5, 5), 4, **base, cell_patterns=((3, 0),))


def test_model_shapes():
    model = HipsModel(HipsConfig((3, 5, 4), 4, channels=4, blocks=1, codebook_size=6, code_dim=8, vq_channels=4,
                                 vq_blocks=1, horizon=3))  # fmt: skip
    states = torch.rand(2, 4, 5, 4)
    logits, values = model.detector(states, torch.rand(2, 3, 4, 5, 4))
    assert logits.shape == (2, 3) and values.shape == (2,)
    codes, actions = model.prior(states)
    assert codes.shape == (2, 6) and actions.shape == (2, 4)
    assert model.low_logits(states, states).shape == (2, 4) and model.remaining(states).shape == (2,)
    assert model.generator.subgoal_logits(states).shape == (2, 6, 4, 5, 4)


# -- a tiny run end to end -------------------------------------------------------------------


def learning_rows(run) -> list[dict[str, str]]:
    with open(run / "metrics" / "learning.csv", newline="") as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


def test_a_tiny_seeded_run_trains_every_component_and_solves_small_levels(tmp_path, tsp, capsys):
    train = level_file(tmp_path, tsp, "train.txt", 0, 24)
    test = level_file(tmp_path, tsp, "test.txt", 5000, 4)
    data = tmp_path / "data.npz"
    assert main(["dataset", "tsp", "--problems", str(train), "--out", str(data)]) == 0
    assert "wrote 24 trajectories" in capsys.readouterr().out
    runs = []
    for name in ("a", "b"):
        run = tmp_path / name
        argv = ["train", "--algorithm", "hips-eps", "--dataset", str(data), "--out", str(run), "--preset", "tiny",
                "--seed", "3", "--threads", "1"]  # fmt: skip
        assert main(argv) == 0
        runs.append(run)
    rows = learning_rows(runs[0])
    assert {row["phase"] for row in rows} == {"warm start", "segmentation", "vq-vae", "prior", "distance"}
    assert rows == learning_rows(runs[1])  # same dataset, settings and seed: the same training
    assert (runs[0] / "checkpoints" / "latest.safetensors").is_file()
    capsys.readouterr()
    assert main(["test", str(runs[0]), "--problems", str(test), "--budget", "300", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    assert "solved 4/4" in out and "low-level steps" in out
    with open(runs[0] / "metrics" / "test-test.csv", newline="") as handle:
        attempts = list(csv.DictReader(handle))
    assert all(int(row["steps"]) >= int(row["expanded"]) for row in attempts)
    searcher = sgps.load(runs[0])  # HIPS-ε's runs load like the others: its hybrid search, as `sgps test` runs it
    first_round = {int(row["problem"]): row for row in attempts if row["round"] == "1"}
    for index, row in first_round.items():
        outcome = searcher.solve(test, index=index, budget=300)
        assert (outcome.solved, outcome.expansions) == (row["solved"] == "1", int(row["expanded"])), index
        if outcome.solved:
            assert " ".join(map(str, outcome.actions)) == row["actions"]
    together = searcher.solve_many(test, budget=300)
    assert [o.expansions for o in together] == [int(first_round[k]["expanded"]) for k in range(4)]
    with pytest.raises(ConfigError, match=r"a hips-eps run searches with its hybrid search \(hips\) only, not phs"):
        searcher.solve(test, algorithm="phs")
    told: list[tuple[str, int, int]] = []
    runner.test(runs[0], test, budget=300, rounds=2, restart_rounds=True,
                progress=lambda stage, finished, *, total: told.append((stage, finished, total)))  # fmt: skip
    assert told[0] == ("round 1 (budget 300)", 0, 4) and told[-1][1] == told[-1][2]  # HIPS-ε's test shows its progress
    with open(runs[0] / "metrics" / "test-test.csv", newline="") as handle:
        afresh = [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]
    runner.test(runs[0], test, budget=300, rounds=2)  # its rounds continued: the same record
    with open(runs[0] / "metrics" / "test-test.csv", newline="") as handle:
        assert [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)] == afresh


def test_cli_errors_name_the_problem(tmp_path, tsp, capsys):
    train = level_file(tmp_path, tsp, "train.txt", 0, 2)
    assert main(["train", "--algorithm", "hips-eps", "--out", str(tmp_path / "r")]) == 2
    assert "give --dataset (written by `sgps dataset`) or --problems" in capsys.readouterr().err
    assert main(["train", "--algorithm", "hips-eps", "--dataset", str(tmp_path / "missing.npz"),
                 "--out", str(tmp_path / "r")]) == 2  # fmt: skip
    assert "missing.npz: no such dataset file" in capsys.readouterr().err
    assert main(["train", "--dataset", str(train), "--out", str(tmp_path / "r")]) == 2
    assert "--dataset is for --algorithm hips-eps" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    with pytest.raises(ConfigError, match=r"unknown key hips\.codebook"):
        resolve_settings("tiny", None, {"codebook": 3})
    with pytest.raises(ConfigError, match=r"command line: hips\.epsilon must be in \(0, 1\), got 0\.0"):
        resolve_settings("tiny", None, {"epsilon": 0.0})


# -- in a comparison -------------------------------------------------------------------------


def test_a_comparison_runs_hips_from_the_training_problems_and_reports_it(tmp_path, capsys):
    config = tmp_path / "hips.toml"
    config.write_text(
        '[compare]\ndomain = "tsp"\nalgorithms = ["hips-eps"]\nseeds = [0]\npreset = "tiny"\n'
        '[problems.train]\nvariant = "standard"\nseed = 0\ncount = 16\nparams = { size = 6 }\n'
        '[problems.hips]\nvariant = "standard"\nseed = 100\ncount = 8\nparams = { size = 6 }\n'
        '[tests.test]\nvariant = "standard"\nseed = 9000\ncount = 3\nparams = { size = 6 }\nbudget = 300\n'
        "[hips]\nrollout_steps = 8\n"
    )
    out = tmp_path / "compare"
    assert main(["compare", str(config), "--out", str(out), "--jobs", "1", "--threads", "1"]) == 0
    run = out / "runs" / "hips-eps-s0"
    assert (run / "dataset.npz").is_file() and (run / "metrics" / "test-test.csv").is_file()
    names = [trajectory.name for trajectory in read_dataset(run / "dataset.npz").trajectories]
    assert names == [f"train:{k}" for k in range(16)] + [f"hips:{k}" for k in range(8)]  # training + extra levels
    assert not (run / "dataset.npz.journal").exists()
    assert "rollout_steps = 8" in (out / "configs" / "hips-eps-s0.toml").read_text()
    trained = (run / "checkpoints" / "latest.safetensors").stat().st_mtime_ns
    assert main(["compare", str(config), "--out", str(out), "--jobs", "1", "--threads", "1"]) == 0
    assert (run / "checkpoints" / "latest.safetensors").stat().st_mtime_ns == trained  # finished: not retrained
    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "low-level steps" in report
    [test_row] = [line for line in report.splitlines() if line.startswith("| HIPS-ε | 1 | 3 |")]
    [train_row] = [line for line in report.splitlines() if "offline (solver trajectories)" in line]
    assert train_row.startswith("| HIPS-ε | 1 | offline") and test_row
    [summary_row] = terminal_summary(out).splitlines()[1:]  # the terminal's table: no training curve to count
    assert summary_row.split()[:4] == ["HIPS-ε", "1", "offline", "-"]  # seeds, training solved and expansions


@pytest.mark.parametrize(
    ("algorithms", "seed", "message"),
    [
        ('["phs"]', 100, "problems.hips: levels for hips-eps, which compare.algorithms does not list"),
        ('["phs", "hips-eps"]', 4, "problems.hips: its generator seeds overlap those of problems.train"),
        ('["phs", "hips-eps"]', 9001, "problems.hips: its generator seeds overlap those of tests.test"),
    ],
)
def test_extra_hips_levels_are_for_hips_and_never_the_other_sets(tmp_path, capsys, algorithms, seed, message):
    config = tmp_path / "bad.toml"
    config.write_text(
        f'[compare]\ndomain = "tsp"\nalgorithms = {algorithms}\n[problems.train]\ncount = 8\n'
        f'[problems.hips]\nseed = {seed}\ncount = 50\n[tests.test]\nseed = 9000\ncount = 2\n'
    )
    assert main(["compare", str(config), "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_hips_section_needs_hips_in_the_comparison(tmp_path, capsys):
    config = tmp_path / "bad.toml"
    config.write_text(
        '[compare]\ndomain = "tsp"\nalgorithms = ["phs"]\n[problems.train]\ncount = 8\n'
        '[tests.test]\nseed = 9000\ncount = 2\n[hips]\nepsilon = 0.5\n'
    )
    assert main(["compare", str(config), "--out", str(tmp_path / "out")]) == 2
    assert "hips: settings of hips-eps, which compare.algorithms does not list" in capsys.readouterr().err
    config.write_text(config.read_text().replace('["phs"]', '["phs", "hips-eps"]').replace("0.5", "2.0"))
    assert main(["compare", str(config), "--out", str(tmp_path / "out")]) == 2
    assert "hips.epsilon must be in (0, 1), got 2.0" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_interrupted_dataset_build_goes_on_where_it_stopped(tmp_path, tsp, monkeypatch):
    levels = read_levels(level_file(tmp_path, tsp, "train.txt", 0, 8)).levels
    write_dataset(tmp_path / "whole.npz", build_dataset(tsp, levels).dataset)
    journal = tmp_path / "data.npz.journal"
    solved: list[Any] = []
    solve_level = dataset_module.solve_level

    def interrupted_at_the_fifth(domain, state, max_states):
        solved.append(domain.key(state))
        if len(solved) == 5:
            raise KeyboardInterrupt
        return solve_level(domain, state, max_states)

    monkeypatch.setattr(dataset_module, "solve_level", interrupted_at_the_fifth)
    with pytest.raises(KeyboardInterrupt):
        build_dataset(tsp, levels, journal=journal)
    assert len(journal.read_text().splitlines()) == 1 + 4  # the header and four finished levels
    with open(journal, "a") as handle:
        handle.write('{"index":4,"acti')  # a line the interruption cut
    solved.clear()
    resumed = build_dataset(tsp, levels, journal=journal)
    assert solved == [tsp.key(level.state) for level in levels[4:]]  # no finished level solved again
    write_dataset(tmp_path / "resumed.npz", resumed.dataset)
    assert (tmp_path / "resumed.npz").read_bytes() == (tmp_path / "whole.npz").read_bytes()
    with pytest.raises(ConfigError, match=r"data\.npz\.journal: the journal of a dataset of other levels"):
        build_dataset(tsp, levels[:6], journal=journal)


def test_sgps_dataset_killed_and_run_again_writes_the_file_of_an_uninterrupted_run(tmp_path, capsys):
    problems = tmp_path / "train.txt"
    assert main(["generate", "sokoban", "--count", "12", "--out", str(problems)]) == 0
    assert main(["dataset", "sokoban", "--problems", str(problems), "--out", str(tmp_path / "whole.npz"),
                 "--workers", "1"]) == 0  # fmt: skip
    out = tmp_path / "data.npz"
    journal = tmp_path / "data.npz.journal"
    command = [sys.executable, "-m", "sgps", "dataset", "sokoban", "--problems", str(problems), "--out", str(out),
               "--workers", "2"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    while process.poll() is None and (not journal.exists() or len(journal.read_text().splitlines()) < 4):
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the command and its solver processes, as a machine going down would
    process.wait()
    if not out.exists():  # killed mid-way (a very fast machine may finish first)
        assert journal.exists() and not out.exists()
    capsys.readouterr()
    assert main(["dataset", "sokoban", "--problems", str(problems), "--out", str(out), "--workers", "2"]) == 0
    assert out.read_bytes() == (tmp_path / "whole.npz").read_bytes()
    assert not journal.exists()
    assert main(["train", "--algorithm", "hips-eps", "--dataset", str(out), "--domain", "tsp", "--out",
                 str(tmp_path / "run")]) == 2  # fmt: skip
    assert f"{out}: a sokoban dataset, but this run is on tsp" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_journal_cut_inside_its_header_starts_the_build_afresh(tmp_path, tsp):
    levels = read_levels(level_file(tmp_path, tsp, "train.txt", 0, 3)).levels
    journal = tmp_path / "data.npz.journal"
    journal.write_text('{"format":"sgps-hips-dat')  # killed while writing the header
    built = build_dataset(tsp, levels, journal=journal)
    assert len(built.dataset.trajectories) == 3 and len(journal.read_text().splitlines()) == 1 + 3
    journal.write_text(journal.read_text().replace('"actions":[', '"actions":[99,', 1))  # an edited journal
    with pytest.raises(ConfigError, match=r"data\.npz\.journal:2: not a finished level"):
        build_dataset(tsp, levels, journal=journal)


def test_a_sokoban_run_learns_its_cell_patterns_and_its_test_loads_them(tmp_path):
    sokoban = get_domain("sokoban")
    params = {"size": 7, "boxes": 2}
    levels = generate_levels(sokoban, params, 0, 6)
    write_levels(tmp_path / "train.txt", sokoban, levels, variant="standard", seed=0, params=params)
    hips_run.train(None, tmp_path / "run", problems=tmp_path / "train.txt", preset="tiny", seed=0, threads=1)
    checkpoint = tmp_path / "run" / "checkpoints" / "latest.safetensors"
    model = Run.open(tmp_path / "run").searcher(levels[0], checkpoint).evaluator.model
    assert model.config.cell_patterns == ((0, 3), (2, 3))  # the agent on a goal, a box on a goal
    assert model.generator.shape[0] == 4 + 1 + 2


def test_a_dataset_into_new_folders_creates_them_and_a_refusal_removes_them(tmp_path, capsys):
    problems = tmp_path / "train.txt"
    assert main(["generate", "tsp", "--count", "3", "--out", str(problems)]) == 0
    out = tmp_path / "n" / "e" / "w.npz"
    assert main(["dataset", "tsp", "--problems", str(problems), "--out", str(out), "--workers", "1"]) == 0
    assert out.is_file()
    refused = tmp_path / "m" / "w.npz"
    assert main(["dataset", "tsp", "--problems", str(problems), "--out", str(refused), "--workers", "1",
                 "--max-states", "1"]) == 2  # fmt: skip
    assert "the solver finished none" in capsys.readouterr().err and not (tmp_path / "m").exists()
