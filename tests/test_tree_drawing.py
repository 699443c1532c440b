"""`subgoal.tree_rng = "per-search"`: failed trees drawn where they were searched, with the same results anywhere."""

from __future__ import annotations

import csv

import pytest
import torch
from safetensors.torch import load_file

from sgps.cli import main
from sgps.domains import get_domain
from sgps.domains.levels import write_levels
from sgps.errors import ConfigError
from sgps.execution.pool import SharedEvaluatorPool, request_rows
from sgps.search import search_lockstep
from sgps.training.config import load_run_config, resolve_config
from sgps.training.methods.subgoal.drawing import TreeDrawer, search_seeds
from sgps.training.methods.subgoal.samples import TreeDraw
from sgps.training.setup import build_method


def _rows(path):
    with open(path, newline="") as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


def test_seeds_differ_by_place_batch_pass_and_run():
    seeds = search_seeds(0, 0, 0, 32)
    assert len(set(seeds)) == 32 and all(0 <= seed < 2**64 for seed in seeds)
    assert seeds == search_seeds(0, 0, 0, 32)
    others = {search_seeds(1, 0, 0, 32)[0], search_seeds(0, 1, 0, 32)[0], search_seeds(0, 0, 1, 32)[0]}
    assert seeds[0] not in others and len(others) == 3


def test_a_pool_sends_back_the_draws_made_here_and_no_graphs():
    domain = get_domain("tsp")
    levels = [domain.generate(seed) for seed in range(6)]
    overrides = {"run": {"algorithm": "phs-sg", "device": "cpu"}, "subgoal": {"tree_rng": "per-search"}}
    method = build_method(domain, levels[0], resolve_config("tiny", overrides=overrides))
    drawer = method.result_drawer(0, 3, len(levels))
    assert isinstance(drawer, TreeDrawer)
    options = {"budget": 60, "epsilon": 0.01, "record_graph": True}
    here = drawer(search_lockstep(domain, levels, method.algorithm, method.evaluator(), **options))
    rows = request_rows(3, 1, domain.num_actions)
    with SharedEvaluatorPool(2, domain, levels[0], method.algorithm, rows) as pool:
        pooled = pool.search(method, levels, drawer=drawer, **options)
    draws = [result.draw for result in here]
    assert sum(isinstance(draw, TreeDraw) for draw in draws) >= 4  # most of the six fail at this budget
    assert [result.draw for result in pooled] == draws
    assert all(result.graph is None for result in [*here, *pooled])
    assert all(len(draw.paths) == len(draw.levels_used) for draw in draws if draw is not None)


def test_training_gives_the_same_run_in_process_and_in_either_pool(tmp_path, capsys):
    domain = get_domain("tsp")
    problems = tmp_path / "train.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(24)])
    runs = {}
    for name, evaluator, workers in (("local", "auto", "1"), ("copies", "per-process", "2"), ("shared", "shared", "2")):
        config = tmp_path / f"{name}.toml"
        config.write_text(f'[run]\nevaluator = "{evaluator}"\n[subgoal]\ntree_rng = "per-search"\n'
                          "[bootstrap]\ninitial_budget = 40\n")  # most searches fail: trees to draw from
        runs[name] = tmp_path / name
        argv = ["train", "--problems", str(problems), "--out", str(runs[name]), "--preset", "tiny", "--quiet",
                "--algorithm", "phs-sg", "--device", "cpu", "--max-iterations", "1", "--workers", workers,
                "--config", str(config)]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
    assert load_run_config(runs["shared"] / "config.toml").subgoal.tree_rng == "per-search"
    learning = _rows(runs["local"] / "metrics" / "learning.csv")
    assert sum(int(row["failed_trees"]) for row in learning) > 0
    local = load_file(runs["local"] / "checkpoints" / "latest.safetensors")
    for name in ("copies", "shared"):
        for metrics in ("train.csv", "learning.csv", "outstanding.csv"):
            pooled_rows = _rows(runs[name] / "metrics" / metrics)
            assert pooled_rows == _rows(runs["local"] / "metrics" / metrics), (name, metrics)
        pooled = load_file(runs[name] / "checkpoints" / "latest.safetensors")
        assert pooled.keys() == local.keys()
        for key, tensor in local.items():
            torch.testing.assert_close(pooled[key], tensor, rtol=0, atol=0)


def test_the_tree_stream_is_checked_and_only_per_search_subgoal_runs_draw_in_the_searches():
    with pytest.raises(ConfigError, match=r"subgoal\.tree_rng"):
        resolve_config("tiny", overrides={"subgoal": {"tree_rng": "per-tree"}})
    assert resolve_config("tiny").subgoal.tree_rng == "batch"
    domain = get_domain("tsp")
    for algorithm, tree_rng, drawn in (("phs-sg", "per-search", True), ("phs-sg", "batch", False),
                                         ("phs", "batch", False)):  # fmt: skip
        config = resolve_config("tiny", overrides={"run": {"algorithm": algorithm}, "subgoal": {"tree_rng": tree_rng}})
        method = build_method(domain, domain.generate(0), config)
        assert (method.result_drawer(0, 0, 4) is not None) == drawn, (algorithm, tree_rng)
