"""Training π^SG: learning from failed trees alone, the per-batch report, exact resume, train/test/subgoals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.models.losses import levin_loss
from sgps.runs import runner
from sgps.runs.rundir import RunDirectory
from sgps.search import search_lockstep
from sgps.training import Bootstrap, BootstrapConfig
from sgps.training.config import resolve_config
from sgps.training.methods.subgoal.samples import collect_samples
from sgps.training.setup import build_subgoal_method


def tiny_method(domain, example, **subgoal):
    config = resolve_config("tiny", overrides={"run": {"algorithm": "phs-sg", "device": "cpu"}, "subgoal": subgoal})
    return build_subgoal_method(domain, example, config)


def low_policy_loss(method, samples) -> float:
    """The conditional low policy's Levin loss on every sampled (state, target, action) row."""
    learner, model = method.learner, method.model
    observations = torch.from_numpy(samples.observations)
    low = samples.low
    states, targets = torch.from_numpy(low.states), torch.from_numpy(low.targets)
    codes = learner.codes(observations, states, targets)
    with torch.no_grad():
        logits = model.conditioned_on_codes(model.low, observations[states], codes)
        return levin_loss(logits, torch.from_numpy(low.actions), torch.from_numpy(low.weights)).item()


def test_failed_trees_alone_teach_the_conditional_low_policy():
    domain = get_domain("boxworld")
    levels = [domain.generate(seed) for seed in range(8)]
    method = tiny_method(domain, levels[0])
    results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=150, record_graph=True)
    assert not any(r.solved for r in results)
    samples = collect_samples(domain, results, method.settings.sampling(), (5.0, 1.0), np.random.default_rng(0))
    assert samples.failed_trees == 8 and len(samples.pair_lengths) == 8 * 5 and samples.segments == 0
    assert len(samples.high) == 0 and len(samples.low) == sum(samples.pair_lengths)
    before = low_policy_loss(method, samples)
    for _ in range(10):
        losses = method.learner.update(samples, results, domain)
        assert losses["loss_high"] is None and losses["loss_unconditional"] is None  # failed trees train neither
    after = low_policy_loss(method, samples)
    assert after < 0.8 * before, (before, after)


def test_normalised_low_weights_take_the_budget_out_of_the_loss_scale():
    domain = get_domain("boxworld")
    levels = [domain.generate(seed) for seed in range(4)]
    losses = {}
    for normalise in (False, True):
        method = tiny_method(domain, levels[0], normalise_low_weights=normalise)
        results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=150, record_graph=True)
        samples = collect_samples(domain, results, method.settings.sampling(), (5.0, 1.0), np.random.default_rng(0))
        losses[normalise] = method.learner.update(samples, results, domain)["loss_low"]
    uniform = math.log(domain.num_actions)  # every weight is 150: normalised, the loss is a plain cross-entropy
    assert 0.5 * uniform < losses[True] < 2 * uniform and losses[False] > 50 * uniform


def failed_samples(method, domain, count=6):
    levels = [domain.generate(seed) for seed in range(count)]
    results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=150, record_graph=True)
    return collect_samples(domain, results, method.settings.sampling(), (5.0, 1.0), np.random.default_rng(0))


def test_the_joint_code_objective_moves_the_encoder_with_pi_low_s_loss_and_leaves_pi_low_to_its_own_step():
    domain = get_domain("boxworld")
    method = tiny_method(domain, domain.generate(0), code_objective="joint", action_weight=2.0)
    samples = failed_samples(method, domain)
    learner, model = method.learner, method.model
    observations = torch.from_numpy(samples.observations)
    assert tiny_method(domain, domain.generate(0)).learner.action_loss(observations, samples.low) is None  # paper's
    term = learner.action_loss(observations, samples.low)
    model.vqvae.train()
    state = learner.generator.get_state()
    value = term(16)
    value.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.vqvae.encoder.parameters())
    # The value is λ times π_low's normalised Levin loss on the drawn rows' own codes.
    learner.generator.set_state(state)
    rows = torch.randint(len(samples.low), (16,), generator=learner.generator)
    low = samples.low
    states, targets = torch.from_numpy(low.states)[rows], torch.from_numpy(low.targets)[rows]
    codes = model.vqvae.codebook.nearest(model.vqvae.encode(observations[states], observations[targets]))
    with torch.no_grad():
        logits = model.conditioned_on_codes(model.low, observations[states], codes)
    expected = 2.0 * levin_loss(logits, torch.from_numpy(low.actions)[rows], torch.from_numpy(low.weights)[rows],
                                normalise=True)  # fmt: skip
    assert value.item() == pytest.approx(expected.item(), rel=1e-5)
    # The VQ-VAE's step moves the encoder, never π_low, which is trainable again afterwards.
    model.zero_grad()
    low_before = [p.detach().clone() for p in model.low.parameters()]
    encoder_before = [p.detach().clone() for p in model.vqvae.encoder.parameters()]
    learner._train_vqvae(observations, samples.vq, term)
    assert all(torch.equal(a, b) for a, b in zip(low_before, model.low.parameters(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(encoder_before, model.vqvae.encoder.parameters(), strict=True))
    assert all(p.requires_grad for p in model.low.parameters())
    report = learner.update(samples, [], domain)
    assert report["loss_low"] is not None
    assert not all(torch.equal(a, b) for a, b in zip(low_before, model.low.parameters(), strict=True))


def best_code_share(method, samples) -> float:
    """The share of π_low's rows whose code is the one under which π_low gives the row's action most probability."""
    model, low = method.model, samples.low
    observations = torch.from_numpy(samples.observations)
    states, targets, actions = (torch.from_numpy(rows) for rows in (low.states, low.targets, low.actions))
    codes = method.learner.codes(observations, states, targets)
    with torch.no_grad():
        log_low = torch.log_softmax(model.for_every_code(model.low, observations[states]), dim=2)  # [B, K, A]
    best = log_low.gather(2, actions[:, None, None].expand(-1, log_low.shape[1], 1)).squeeze(2).argmax(dim=1)
    return (best == codes).double().mean().item()


def test_joint_codes_come_to_name_the_actions_pi_low_takes():
    """With π_low's term weighted far above L_VQ, a few VQ-VAE fits make the encoder pick, for
    about half the rows, the code under which the (fixed) π_low prefers the row's action;
    reconstruction alone leaves that to chance (1 in K)."""
    domain = get_domain("boxworld")
    shares = {}
    for objective in ("reconstruction", "joint"):
        method = tiny_method(domain, domain.generate(0), code_objective=objective, action_weight=100.0)
        samples = failed_samples(method, domain)
        observations = torch.from_numpy(samples.observations)
        term = method.learner.action_loss(observations, samples.low)
        for _ in range(5):
            method.learner._train_vqvae(observations, samples.vq, term)
        shares[objective] = best_code_share(method, samples)
    assert shares["joint"] > shares["reconstruction"] + 0.2, shares


def test_the_solution_only_ablation_draws_no_pairs_and_its_report_says_so():
    domain = get_domain("boxworld")
    levels = [domain.generate(seed) for seed in range(4)]
    method = tiny_method(domain, levels[0], failed_trees=False)
    assert not method.needs_graphs
    results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=150)
    report = method.learn(domain, results)
    assert set(report) == set(method.report_columns)
    assert report["failed_pairs"] == 0 and report["loss_vqvae"] is None


def test_exhausted_trees_give_pairs_only_when_asked():
    domain = get_domain("tsp")
    rows = ["1000020", "0000023", "0000022", "0300000", "0000000"]  # one city sealed off: unsolvable
    level = domain.parse([5, 7, *(int(code) for row in rows for code in row)])
    method = tiny_method(domain, level, exhausted_trees=True)
    (result,) = search_lockstep(domain, [level], method.algorithm, method.evaluator(), budget=5000, record_graph=True)
    assert result.status == "no_solution" and result.expanded > 50
    default = collect_samples(domain, [result], tiny_method(domain, level).settings.sampling(), (5.0, 1.0),
                              np.random.default_rng(0))  # fmt: skip
    assert default is None  # the reference learns nothing from an exhausted search
    samples = collect_samples(domain, [result], method.settings.sampling(), (5.0, 1.0), np.random.default_rng(0))
    assert samples.failed_trees == 1 and len(samples.pair_lengths) == 5
    assert len(samples.low) == sum(samples.pair_lengths) and (samples.low.weights == result.expanded).all()


def make_run(path, *, fresh=True):
    domain = get_domain("boxworld")
    train = [domain.generate(seed) for seed in range(12)]
    validation = [domain.generate(seed) for seed in range(500, 504)]
    method = tiny_method(domain, train[0])
    run_dir = RunDirectory(path, method.report_columns)
    if fresh:
        run_dir.create({"bootstrap": {"seed": 3}})
    config = BootstrapConfig(seed=3, batch_size=4, initial_budget=200, max_iterations=2, checkpoint_every=1)
    return Bootstrap(domain, train, validation, method, config, run_dir)


def without_time(rows):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def test_resume_reproduces_the_learning_rows_of_an_uninterrupted_run(tmp_path):
    whole = make_run(tmp_path / "whole")
    whole.run(max_batches=3)
    split = make_run(tmp_path / "split")
    split.run(max_batches=2)
    resumed = make_run(tmp_path / "split", fresh=False)
    resumed.resume()
    resumed.run(max_batches=1)
    learning = whole.run_dir.read("learning")
    assert sum(int(row["failed_pairs"]) for row in learning) > 0  # the run did learn from failed trees
    for name in ("train", "outstanding", "learning"):
        assert without_time(resumed.run_dir.read(name)) == without_time(whole.run_dir.read(name)), name
    assert resumed.method.lengths.lengths == whole.method.lengths.lengths


def test_train_test_and_draw_subgoals_from_the_command_line(tmp_path, capsys):
    domain = get_domain("tsp")
    problems, tests = tmp_path / "train.txt", tmp_path / "test.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(20)])
    write_levels(tests, domain, [domain.generate(seed) for seed in range(900, 904)])
    run = tmp_path / "run"
    common = ["train", "--problems", str(problems), "--out", str(run), "--algorithm", "phs-sg", "--preset", "tiny",
              "--quiet", "--device", "cpu", "--codebook-size", "2", "--cluster-level", "2"]  # fmt: skip
    assert main([*common, "--max-iterations", "1"]) == 0
    config = resolve_config("paper", run / "config.toml")
    assert config.subgoal.codebook_size == 2 and config.subgoal.cluster_level == 2
    assert (run / "checkpoints" / "latest.safetensors").exists()
    assert main(["train", "--problems", str(problems), "--out", str(run), "--resume", "--quiet"]) == 0
    summary = runner.test(run, tests, budget=2000)
    assert summary.problems == 4 and summary.solved >= 1
    png = tmp_path / "subgoals.png"
    capsys.readouterr()
    assert main(["subgoals", str(run), "--problems", str(tests), "--index", "1", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.read_bytes().startswith(b"\x89PNG") and "code 0: p=" in out
    assert "pairs per code in the last training batch: code 0: " in out  # the codebook's use is shown


def test_subgoals_of_a_flat_run_is_a_clear_error(tmp_path, capsys):
    domain = get_domain("tsp")
    problems = tmp_path / "train.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(6)])
    run = tmp_path / "flat"
    assert main(["train", "--problems", str(problems), "--out", str(run), "--preset", "tiny", "--quiet",
                 "--max-iterations", "1", "--device", "cpu"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["subgoals", str(run), "--problems", str(problems), "--png", str(tmp_path / "x.png")]) == 2
    assert "has no subgoal generator" in capsys.readouterr().err


@pytest.mark.parametrize(("key", "value"), [("conditioning", "film"), ("alpha_test", 2.0), ("codebook_size", 0)])
def test_bad_subgoal_settings_name_the_key(key, value):
    from sgps.errors import ConfigError

    with pytest.raises(ConfigError, match=f"subgoal.{key}"):
        resolve_config("tiny", overrides={"subgoal": {key: value}})
