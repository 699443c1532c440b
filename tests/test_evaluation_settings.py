"""The evaluation settings of searches: precision, evaluation batch and where a pool evaluates."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from sgps.cli import main
from sgps.domains import get_domain
from sgps.domains.levels import read_levels, write_levels
from sgps.errors import ConfigError
from sgps.models.precision import number_format
from sgps.search import search_lockstep
from sgps.training.config import load_run_config, resolve_config
from sgps.training.setup import build_method


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("precision", "float16", "one of float32, tf32, bfloat16"), ("evaluation_batch", -1, "an integer from 0 to 4,096"),
])  # fmt: skip
def test_bad_search_settings_are_refused_naming_the_key(key, value, allowed):
    with pytest.raises(ConfigError, match=f"search.{key}") as error:
        resolve_config("tiny", overrides={"search": {key: value}})
    assert allowed in str(error.value)


def test_a_bad_evaluator_place_is_refused():
    with pytest.raises(ConfigError, match=r"run\.evaluator"):
        resolve_config("tiny", overrides={"run": {"evaluator": "gpu"}})


def test_a_run_written_before_the_evaluation_settings_loads_with_their_old_behaviour(tmp_path):
    config = resolve_config("tiny", overrides={"search": {"precision": "bfloat16", "evaluation_batch": 8}})
    text = "\n".join(f"[{section}]\n" + "\n".join(f"{key} = {value!r}".replace("'", '"').replace("True", "true")
                                                   .replace("False", "false") for key, value in entries.items()
                                                   if key not in ("precision", "evaluation_batch", "evaluator",
                                                                  "tree_rng", "code_objective", "action_weight",
                                                                  "reduce_activation"))
                     for section, entries in config.as_dict().items())  # fmt: skip
    file = tmp_path / "config.toml"
    file.write_text(text + "\n")
    loaded = load_run_config(file)
    assert (loaded.search.precision, loaded.search.evaluation_batch, loaded.run.evaluator) == ("float32", 1, "auto")
    assert (loaded.learner.precision, loaded.subgoal.tree_rng) == ("float32", "batch")
    assert (loaded.subgoal.code_objective, loaded.subgoal.action_weight) == ("reconstruction", 1.0)
    # Its π^SG networks keep the reference's rectified features; a new run's are linear.
    assert (loaded.subgoal.reduce_activation, config.subgoal.reduce_activation) == ("relu", "none")


def test_tf32_is_float32_on_a_cpu_and_bfloat16_stays_close():
    domain = get_domain("tsp")
    levels = [domain.generate(seed) for seed in range(4)]
    answers = {}
    for precision in ("float32", "tf32", "bfloat16"):
        config = resolve_config("tiny", overrides={"run": {"device": "cpu"}, "search": {"precision": precision}})
        evaluator = build_method(domain, levels[0], config).evaluator()
        assert evaluator.precision == precision
        answers[precision] = evaluator(levels)
    np.testing.assert_array_equal(answers["tf32"][0], answers["float32"][0])
    np.testing.assert_allclose(np.exp(answers["bfloat16"][0]), np.exp(answers["float32"][0]), atol=0.05)
    np.testing.assert_allclose(answers["bfloat16"][1], answers["float32"][1], atol=0.1, rtol=0.05)
    with pytest.raises(ValueError, match="precision must be one of"), number_format(torch.device("cpu"), "x"):
        pass


def test_an_evaluation_batch_makes_fewer_larger_calls_and_keeps_the_budget():
    domain = get_domain("tsp")
    levels = [domain.generate(seed) for seed in range(4)]
    method = build_method(domain, levels[0], resolve_config("tiny", overrides={"run": {"device": "cpu"}}))
    calls = {1: [], 16: []}
    for k, sizes in calls.items():

        def counted(states, sizes=sizes):
            sizes.append(len(states))
            return method.evaluator()(states)

        results = search_lockstep(domain, levels, method.algorithm, counted, budget=200, batch_size=k)
        assert all(r.expanded <= 200 for r in results)
    assert len(calls[16]) < len(calls[1]) and max(calls[16]) > max(calls[1])


def _rows(path):
    with open(path, newline="") as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


def test_training_through_a_shared_evaluator_pool_gives_the_in_process_run(tmp_path, capsys):
    domain = get_domain("tsp")
    problems = tmp_path / "train.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(24)])
    runs = {}
    for name, extra in (("local", ["--workers", "1"]), ("shared", ["--workers", "2", "--config", "shared.toml"])):
        (tmp_path / "shared.toml").write_text('[run]\nevaluator = "shared"\n[search]\nevaluation_batch = 4\n')
        (tmp_path / "local.toml").write_text("[search]\nevaluation_batch = 4\n")
        if name == "local":
            extra = [*extra, "--config", str(tmp_path / "local.toml")]
        else:
            extra = [*extra[:2], "--config", str(tmp_path / "shared.toml")]
        runs[name] = tmp_path / name
        argv = ["train", "--problems", str(problems), "--out", str(runs[name]), "--preset", "tiny", "--quiet",
                "--algorithm", "phs-sg", "--device", "cpu", "--max-iterations", "1", *extra]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
    assert load_run_config(runs["shared"] / "config.toml").run.evaluator == "shared"
    for metrics in ("train.csv", "learning.csv", "outstanding.csv"):
        assert _rows(runs["shared"] / "metrics" / metrics) == _rows(runs["local"] / "metrics" / metrics), metrics
    local, shared = (load_file(runs[name] / "checkpoints" / "latest.safetensors") for name in ("local", "shared"))
    assert local.keys() == shared.keys()
    for key, tensor in local.items():
        torch.testing.assert_close(shared[key], tensor, rtol=0, atol=0)


def test_the_evaluation_batch_is_picked_by_device_when_a_run_starts(tmp_path, capsys):
    from sgps.training.setup import default_evaluation_batch

    assert (default_evaluation_batch("cpu"), default_evaluation_batch("cuda")) == (1, 32)
    domain = get_domain("tsp")
    problems = tmp_path / "train.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(8)])
    run = tmp_path / "run"
    argv = ["train", "--problems", str(problems), "--out", str(run), "--preset", "tiny", "--quiet", "--device", "cpu",
            "--max-batches", "1"]  # fmt: skip
    assert resolve_config("tiny").search.evaluation_batch == 0
    assert main(argv) == 0, capsys.readouterr().err
    assert load_run_config(run / "config.toml").search.evaluation_batch == 1  # resolved and written


def test_a_shared_evaluator_with_ray_is_refused_before_anything_is_written(tmp_path):
    from sgps.runs import runner

    domain = get_domain("tsp")
    problems = tmp_path / "train.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(4)])
    with pytest.raises(ConfigError, match="Ray actors evaluate with their own CPU copies"):
        runner.train(problems, tmp_path / "run", preset="tiny", overrides={"run": {"evaluator": "shared"}},
                     executor="ray", quiet=True)  # fmt: skip
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("precision", ["float32", "tf32"])
def test_gpu_tf32_switches_are_set_inside_and_restored_after(precision):
    from sgps.models.precision import _tf32_switches

    switches = _tf32_switches()
    before = [getattr(owner, name) for owner, name, _, _ in switches]
    with number_format(torch.device("cuda"), precision):  # flags only: no GPU needed
        inside = [getattr(owner, name) for owner, name, _, _ in switches]
    assert inside == [on if precision == "tf32" else off for _, _, on, off in switches]
    assert [getattr(owner, name) for owner, name, _, _ in switches] == before


def test_a_run_trained_in_buffered_order_is_tested_in_exact_order(tmp_path, capsys):
    """`sgps test` searched with the run's training order (32 children per evaluation for a run
    trained on a GPU or from the campaign configs) where the test procedure evaluates each node's
    children as it expands it (spec 6.7, b_inf = 1); `--evaluation-batch K` tests in buffered order,
    and each record says which order it was searched in."""
    from sgps.runs.run import Run
    from sgps.runs.testing import run_test

    domain = get_domain("tsp")
    problems, tests = tmp_path / "train.txt", tmp_path / "test.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(8)])
    write_levels(tests, domain, [domain.generate(seed) for seed in range(100, 112)])
    (tmp_path / "buffered.toml").write_text("[search]\nevaluation_batch = 8\n")
    run = tmp_path / "run"
    argv = ["train", "--problems", str(problems), "--out", str(run), "--preset", "tiny", "--quiet", "--device", "cpu",
            "--algorithm", "phs-sg", "--max-batches", "1", "--config", str(tmp_path / "buffered.toml")]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    assert load_run_config(run / "config.toml").search.evaluation_batch == 8
    opened = Run.open(run)
    states = read_levels(tests, "tsp").states()
    trained = opened.searcher(states[0], opened.checkpoint("best"))
    records = {}
    for batch in (1, 8):
        options = [] if batch == 1 else ["--evaluation-batch", str(batch)]
        argv = ["test", str(run), "--problems", str(tests), "--budget", "100", "--rounds", "4", "--quiet", *options]
        assert main(argv) == 0, capsys.readouterr().err
        records[batch] = _rows(run / "metrics" / "test-test.csv")
        assert {row["evaluation_batch"] for row in records[batch]} == {str(batch)}
        expected = tmp_path / f"expected-{batch}.csv"
        run_test(domain, states, trained.algorithm, trained.evaluator, budget=100, rounds=4, epsilon=trained.epsilon,
                 evaluation_batch=batch, csv_path=expected)  # fmt: skip
        searched = [{k: v for k, v in row.items() if k not in ("weights", "levels")} for row in records[batch]]
        assert searched == [{k: v for k, v in row.items() if k not in ("weights", "levels")}
                            for row in _rows(expected)]  # fmt: skip
    exact, buffered = ([(row["round"], row["problem"], row["expanded"]) for row in records[b]] for b in (1, 8))
    assert exact != buffered  # the order changes the expansions here, so the records tell the two apart
    assert main(["test", str(run), "--problems", str(tests), "--evaluation-batch", "0"]) == 2
    assert "--evaluation-batch must be from 1 to 4096, got 0" in capsys.readouterr().err
