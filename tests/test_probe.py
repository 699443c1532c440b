"""The π_low probe: a held-out learning signal from failed trees that leaves training as it was."""

from __future__ import annotations

import csv
import math

import numpy as np
import torch

from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.runs.trainer_state import encode_trainer_state, read_trainer_state
from sgps.search import search_lockstep
from sgps.training.config import resolve_config
from sgps.training.methods.subgoal.probe import PROBE_COLUMNS, evenly_spaced, probe_low_policy
from sgps.training.methods.subgoal.samples import collect_samples
from sgps.training.setup import build_subgoal_method


def tiny_method(domain, example, **subgoal):
    config = resolve_config("tiny", overrides={"run": {"algorithm": "phs-sg", "device": "cpu"}, "subgoal": subgoal})
    torch.manual_seed(0)
    return build_subgoal_method(domain, example, config)


def failed_batch(domain, method, count=8):
    levels = [domain.generate(seed) for seed in range(count)]
    results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=150, record_graph=True)
    assert not any(r.solved for r in results)
    samples = collect_samples(domain, results, method.settings.sampling(), (5.0, 1.0), np.random.default_rng(0))
    return results, samples


def test_evenly_spaced_indices_are_distinct_and_in_range():
    assert evenly_spaced(10, 4).tolist() == [0, 3, 6, 9]
    assert evenly_spaced(3, 16).tolist() == [0, 1, 2]
    assert evenly_spaced(0, 4).tolist() == [] and evenly_spaced(5, 0).tolist() == []


def test_failed_paths_index_the_pairs_and_their_low_rows():
    domain = get_domain("boxworld")
    method = tiny_method(domain, domain.generate(0))
    _, samples = failed_batch(domain, method)
    assert [length for _, _, length in samples.failed_paths] == samples.pair_lengths
    assert len(samples.failed_low) == len(samples.low) == sum(samples.pair_lengths)  # no solution segments here
    for start, subgoal, length in samples.failed_paths:  # the subgoal is `length` steps down the tree path
        assert domain.key(samples.states[start]) != domain.key(samples.states[subgoal]) and length >= 1
        assert np.array_equal(samples.observations[start], domain.observe([samples.states[start]])[0])


def test_the_probe_changes_no_weight_and_no_random_stream():
    domain = get_domain("boxworld")
    reports, weights, draws = {}, {}, {}
    for pairs in (0, 16):
        method = tiny_method(domain, domain.generate(0), probe_pairs=pairs)
        results, samples = failed_batch(domain, method)
        reports[pairs] = method.learner.update(samples, results, domain)
        weights[pairs] = method.model_weights()
        draws[pairs] = torch.randint(1000, (4,), generator=method.learner.generator).tolist()
    assert draws[0] == draws[16]
    assert all(torch.equal(weights[0][name], weights[16][name]) for name in weights[0])
    assert all(reports[0][column] is None for column in PROBE_COLUMNS)
    assert {k: v for k, v in reports[0].items() if k not in PROBE_COLUMNS} == {
        k: v for k, v in reports[16].items() if k not in PROBE_COLUMNS
    }
    probe = reports[16]
    assert 0.0 < probe["probe_low_nll"] < 3 * math.log(domain.num_actions)
    assert 0.0 <= probe["probe_low_accuracy"] <= 1.0 and 0.0 <= probe["probe_reached"] <= 1.0
    assert probe["probe_length"] >= 1.0


def test_the_probe_sees_a_policy_that_learned_its_pairs():
    domain = get_domain("boxworld")
    method = tiny_method(domain, domain.generate(0))
    results, samples = failed_batch(domain, method)
    device = method.learner.device
    before = probe_low_policy(method.model, domain, samples, 40, device)
    for _ in range(15):
        method.learner.update(samples, results, domain)
    after = probe_low_policy(method.model, domain, samples, 40, device)
    assert after["probe_low_nll"] < 0.8 * before["probe_low_nll"], (before, after)
    assert after["probe_low_accuracy"] > before["probe_low_accuracy"]
    assert after["probe_reached"] > before["probe_reached"], (before, after)
    assert after["probe_reached_length"] >= 1.0


def test_a_run_started_before_the_probe_resumes_with_its_own_columns(tmp_path):
    domain = get_domain("boxworld")  # not all solved in the first pass, so the resumed run has a second
    problems = tmp_path / "train.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(8)])
    run = tmp_path / "run"
    common = ["train", "--problems", str(problems), "--out", str(run), "--quiet"]
    assert main([*common, "--algorithm", "phs-sg", "--preset", "tiny", "--device", "cpu", "--max-batches", "1"]) == 0
    learning = run / "metrics" / "learning.csv"
    with open(learning, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][-len(PROBE_COLUMNS) :] == list(PROBE_COLUMNS)
    older = [row[: -len(PROBE_COLUMNS)] for row in rows]  # the files as the version before the probe wrote them
    learning.write_text("".join(",".join(row) + "\n" for row in older))
    config = run / "config.toml"
    config.write_text("".join(line for line in config.read_text().splitlines(keepends=True)
                              if not line.startswith("probe_pairs")))  # fmt: skip
    trainer = run / "checkpoints" / "trainer.pt"
    payload = read_trainer_state(trainer)
    del payload["fingerprint"]["subgoal.probe_pairs"]
    trainer.write_bytes(encode_trainer_state(payload))
    assert main([*common, "--resume", "--max-batches", "1"]) == 0
    with open(learning, newline="") as handle:
        resumed = list(csv.reader(handle))
    assert resumed[0] == older[0] and resumed[1] == older[1] and len(resumed) == 3
    assert all(len(row) == len(older[0]) for row in resumed)
    log = (run / "log.txt").read_text()
    assert "they are not recorded for it" in log and "probe_low_nll" in log
