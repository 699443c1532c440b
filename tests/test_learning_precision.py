"""`learner.precision`: the learning step's arithmetic in bf16, its weights and optimiser in float32."""

from __future__ import annotations

import copy

import pytest
import torch

from sgps.cli import main
from sgps.domains import get_domain
from sgps.domains.levels import write_levels
from sgps.errors import ConfigError
from sgps.models.precision import _tf32_switches, tf32_switches
from sgps.models.vqvae import VQVAE
from sgps.search import search_lockstep
from sgps.training.config import load_run_config, resolve_config
from sgps.training.setup import build_method

#: Mean losses of each step, and those that fall over repeated steps on one batch (π_low's
#: targets move with the VQ-VAE's codes, so its loss need not).
LOSSES = {"phs": ("loss",), "phs-sg": ("loss_vqvae", "loss_low")}
FALLING = {"phs": ("loss",), "phs-sg": ("loss_vqvae",)}


def _learning(algorithm: str, precision: str, budget: int, rounds: int = 4) -> tuple[dict, list[dict]]:
    """A tiny method's weights and reports after `rounds` learning steps on one fixed batch of searches."""
    domain = get_domain("tsp")
    levels = [domain.generate(seed) for seed in range(8)]
    overrides = {"run": {"algorithm": algorithm, "device": "cpu"}, "learner": {"precision": precision}}
    method = build_method(domain, levels[0], resolve_config("tiny", overrides=overrides))
    results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=budget,
                              record_graph=method.needs_graphs)  # fmt: skip
    reports = [method.learn(domain, results) for _ in range(rounds)]
    return method.model_weights(), reports


@pytest.mark.parametrize(("algorithm", "budget"), [("phs", 2000), ("phs-sg", 60)])
def test_bf16_learning_follows_float32_and_keeps_float32_weights(algorithm, budget):
    """Catches a bf16 step that does not learn: autocast held across optimiser steps keeps
    computing with the weights it first cast, so the loss would stay where it started."""
    exact, exact_reports = _learning(algorithm, "float32", budget)
    rounded, rounded_reports = _learning(algorithm, "bfloat16", budget)
    for column in LOSSES[algorithm]:
        losses = [report[column] for report in exact_reports]
        assert None not in losses
        assert column not in FALLING[algorithm] or losses[-1] < 0.9 * losses[0], (column, losses)
        for first, second in zip(losses, (report[column] for report in rounded_reports), strict=True):
            assert second == pytest.approx(first, rel=0.05), column
    assert exact.keys() == rounded.keys()
    for name, tensor in rounded.items():
        assert tensor.dtype == exact[name].dtype, name
        assert not tensor.is_floating_point() or tensor.dtype == torch.float32, name
    assert any(not torch.equal(tensor, exact[name]) for name, tensor in rounded.items())  # bf16 did compute


@pytest.mark.parametrize(("precision", "exact", "expected"), [
    ("float32", False, "untouched"), ("float32", True, "off"), ("tf32", False, "on"), ("bfloat16", False, "untouched"),
])  # fmt: skip
def test_the_tf32_switches_of_a_learning_step(precision, exact, expected):
    """A learning step in float32 runs as PyTorch's defaults say (as it did before the setting);
    only a search's float32 (`exact`) switches TF32 off. Flags only: no GPU needed."""
    switches = _tf32_switches()
    before = [getattr(owner, name) for owner, name, _, _ in switches]
    with tf32_switches(torch.device("cuda"), precision, exact=exact):
        inside = [getattr(owner, name) for owner, name, _, _ in switches]
    assert [getattr(owner, name) for owner, name, _, _ in switches] == before
    wanted = {"untouched": before, "on": [on for _, _, on, _ in switches], "off": [off for _, _, _, off in switches]}
    assert inside == wanted[expected]


def test_the_vq_codebook_picks_and_learns_in_float32_under_bf16_casts():
    torch.manual_seed(0)
    vqvae = VQVAE((5, 4, 4), codebook_size=4, code_dim=8, channels=8, blocks=1)
    states, targets = (torch.rand(16, 5, 4, 4) for _ in range(2))
    outside = copy.deepcopy(vqvae)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        encodings = vqvae.encode(states, targets)
        codes = vqvae.codebook.nearest(encodings)
        vqvae.codebook.update(encodings, codes)
    assert encodings.dtype == torch.float32
    assert torch.equal(codes, outside.codebook.nearest(encodings))
    outside.codebook.update(encodings, codes)
    for name, buffer in vqvae.codebook.state_dict().items():
        assert buffer.dtype == outside.codebook.state_dict()[name].dtype
        assert torch.equal(buffer, outside.codebook.state_dict()[name]), name


def test_a_bad_learning_precision_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"learner\.precision") as error:
        resolve_config("tiny", overrides={"learner": {"precision": "float16"}})
    assert "one of float32, tf32, bfloat16" in str(error.value)


def test_the_learning_precision_flag_reaches_the_run_configuration(tmp_path, capsys):
    domain = get_domain("tsp")
    problems = tmp_path / "train.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(8)])
    run = tmp_path / "run"
    argv = ["train", "--problems", str(problems), "--out", str(run), "--preset", "tiny", "--quiet", "--device", "cpu",
            "--algorithm", "phs-sg", "--learning-precision", "bfloat16", "--max-batches", "1"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    config = load_run_config(run / "config.toml")
    assert (config.learner.precision, config.search.precision) == ("bfloat16", "float32")
