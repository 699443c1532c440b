"""Observations lie channels-last in memory; only speed depends on it, never a result."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sgps.domains import get_domain
from sgps.domains.base import one_hot
from sgps.execution.shared import create_layouts, remove_layouts
from sgps.models import evaluator as evaluator_module
from sgps.models.resnet import network_input, set_channels_last
from sgps.models.vqvae import VQVAE
from sgps.search import search_lockstep
from sgps.training.config import resolve_config
from sgps.training.methods.flat import learner as flat_learner_module
from sgps.training.methods.subgoal import learner as subgoal_learner_module
from sgps.training.setup import build_method

DOMAINS = ("sokoban", "boxworld", "craftworld", "boulderdash", "tsp")


def channels_last_in_memory(observations: np.ndarray) -> bool:
    return observations.transpose(0, 2, 3, 1).flags.c_contiguous


def test_one_hot_sets_each_cells_channel_and_leaves_out_of_range_codes_empty():
    codes = np.random.default_rng(3).integers(0, 7, size=(5, 4, 6)).astype(np.uint8)
    planes = one_hot(codes, 6)  # code 6 is out of range: an empty cell
    expected = np.concatenate([np.eye(6, dtype=np.float32), np.zeros((1, 6), np.float32)])[codes]
    assert planes.shape == (5, 6, 4, 6) and planes.dtype == np.float32
    np.testing.assert_array_equal(planes, expected.transpose(0, 3, 1, 2))
    assert channels_last_in_memory(planes)


@pytest.mark.parametrize("name", DOMAINS)
def test_every_domain_observes_channels_last_and_shared_requests_take_a_batch_as_it_is(name):
    domain = get_domain(name)
    states = [domain.generate(seed) for seed in range(3)]
    observations = domain.observe(states)
    assert observations.shape == (3, *domain.observation_shape(states[0]))
    assert channels_last_in_memory(observations)
    [layout] = create_layouts(1, 4, observations.shape[1:], domain.num_actions)
    try:
        requests, _ = layout.arrays()
        assert requests[:3].strides == observations.strides  # the write is a plain copy
        requests[:3] = observations
        np.testing.assert_array_equal(requests[:3], observations)
    finally:
        remove_layouts([layout])


@pytest.mark.parametrize("device_layout", ["channels-last", "nchw"])
def test_network_input_lays_a_batch_out_as_the_trunks_compute(device_layout):
    observations = one_hot(np.zeros((2, 3, 4), np.uint8), 5)
    previous = set_channels_last(device_layout == "channels-last")
    try:
        tensor = network_input(observations, torch.device("cpu"))
        memory = torch.channels_last if device_layout == "channels-last" else torch.contiguous_format
        assert tensor.is_contiguous(memory_format=memory)
        assert torch.equal(tensor, torch.from_numpy(np.ascontiguousarray(observations)))
    finally:
        set_channels_last(previous)


def _searched_and_learned(domain, overrides):
    levels = [domain.generate(seed) for seed in range(6)]
    method = build_method(domain, levels[0], resolve_config("tiny", overrides=overrides))
    results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=60, record_graph=True)
    report = method.learn(domain, results)
    return results, report, method.model_weights()


def _as_before(observations, device):
    """What reached the networks before observations were laid out channels-last: NCHW tensors."""
    return torch.from_numpy(np.ascontiguousarray(observations)).to(device)


@pytest.mark.parametrize(
    ("algorithm", "settings"),
    [
        ("phs", {}),
        ("phs-sg", {}),
        ("phs-sg", {"subgoal": {"conditioning": "decoded-state"}}),
        ("phs-sg", {"search": {"precision": "bfloat16"}, "learner": {"precision": "bfloat16"}}),
    ],
)
@pytest.mark.parametrize("trunk_layout", ["channels-last", "nchw"])
def test_nchw_observations_search_and_learn_to_the_same_bits(monkeypatch, algorithm, settings, trunk_layout):
    """Observations in NCHW, as every network received them before (and as a user's domain may
    give them), search and learn to exactly the bits of the channels-last layout: every
    convolution outside a trunk (the VQ-VAE's `state_in`) reads one layout whatever it is given."""
    overrides = {"run": {"algorithm": algorithm, "device": "cpu"}, **settings}
    previous = set_channels_last(trunk_layout == "channels-last")
    try:
        domain = get_domain("boulderdash")
        runs = [_searched_and_learned(domain, overrides)]
        observe = domain.observe
        monkeypatch.setattr(domain, "observe", lambda states: np.ascontiguousarray(observe(states)))
        for module in (evaluator_module, flat_learner_module, subgoal_learner_module):
            monkeypatch.setattr(module, "network_input", _as_before)
        runs.append(_searched_and_learned(domain, overrides))
    finally:
        set_channels_last(previous)
    (results, report, weights), (nchw_results, nchw_report, nchw_weights) = runs
    assert [(r.expanded, r.status, r.actions) for r in results] == [
        (r.expanded, r.status, r.actions) for r in nchw_results
    ]
    assert report == nchw_report
    assert weights.keys() == nchw_weights.keys()
    assert all(torch.equal(weights[key], nchw_weights[key]) for key in weights)


def test_the_vqvae_decoder_reads_states_in_one_layout_whatever_it_is_given():
    """`state_in` convolves outside the trunks; on 34 channels its NCHW and channels-last
    kernels differ in the last bits, so it must see one layout (NCHW: that of the first runs)."""
    torch.manual_seed(0)
    vqvae = VQVAE((34, 6, 7), codebook_size=4, code_dim=8, channels=8, blocks=1)
    codes = torch.randint(0, 35, (16, 6, 7))
    states = torch.nn.functional.one_hot(codes, 35)[..., :34].permute(0, 3, 1, 2).float()
    vectors = torch.randn(16, 8)
    with torch.no_grad():
        nchw = vqvae.decode(states.contiguous(), vectors)
        channels_last = vqvae.decode(states.contiguous(memory_format=torch.channels_last), vectors)
    assert torch.equal(nchw, channels_last)
