"""Flat networks, their losses, and the evaluator that plugs them into the search engine."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sgps.domains import domain_names, get_domain
from sgps.models import FlatNetwork, FlatNetworkConfig, NetworkEvaluator, levin_loss, policy_heuristic_loss
from sgps.models.precision import bf16_casts
from sgps.models.resnet import ResNetTrunk, trunk_format
from sgps.models.subgoal import CodeConditioned, SubgoalModelConfig
from sgps.search import make_algorithm, search


def tiny_network(domain, state, **options) -> FlatNetwork:
    torch.manual_seed(0)
    config = FlatNetworkConfig(domain.observation_shape(state), domain.num_actions, channels=8, blocks=1, **options)
    return FlatNetwork(config)


@pytest.mark.parametrize("name", domain_names())
def test_heads_have_the_right_shapes_on_every_domain(name):
    domain = get_domain(name)
    states = [domain.generate(seed) for seed in range(3)]
    network = tiny_network(domain, states[0])
    logits, heuristic = network(torch.from_numpy(domain.observe(states)))
    assert logits.shape == (3, domain.num_actions) and heuristic.shape == (3,)
    policy_only = tiny_network(domain, states[0], heuristic=False)
    assert policy_only(torch.from_numpy(domain.observe(states)))[1] is None
    with pytest.raises(ValueError, match="needs a policy head"):
        FlatNetworkConfig((1, 2, 2), 4, policy=False, heuristic=False)


def test_levin_loss_equals_the_hand_computed_value_on_two_samples():
    logits = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, -1.0]])
    actions = torch.tensor([0, 3])
    weights = torch.tensor([10.0, 200.0])
    ce0 = -(2.0 - math.log(math.exp(2.0) + 3.0))
    ce1 = -(-1.0 - math.log(1.0 + math.e + 1.0 + math.exp(-1.0)))
    expected = (10.0 * ce0 + 200.0 * ce1) / 2
    assert levin_loss(logits, actions, weights).item() == pytest.approx(expected, rel=1e-6)
    heuristic, targets = torch.tensor([3.0, 1.0]), torch.tensor([5.0, 1.0])
    combined = policy_heuristic_loss(logits, heuristic, actions, weights, targets)
    assert combined.item() == pytest.approx(expected + (4.0 + 0.0) / 2, rel=1e-6)
    normalised = (10.0 / 105.0 * ce0 + 200.0 / 105.0 * ce1) / 2  # weights over their mean, 105
    assert levin_loss(logits, actions, weights, normalise=True).item() == pytest.approx(normalised, rel=1e-6)
    scaled = levin_loss(logits, actions, 1000.0 * weights, normalise=True)  # the budget's scale is gone
    assert scaled.item() == pytest.approx(normalised, rel=1e-6)


def test_evaluator_gives_log_distributions_and_drives_a_search():
    domain = get_domain("tsp")
    level = domain.generate(0)
    network = tiny_network(domain, level)
    network.train()
    evaluator = NetworkEvaluator(domain, network)
    log_policy, heuristic = evaluator([level, domain.step(level, 1)])
    assert log_policy.shape == (2, 4) and heuristic.shape == (2,)
    np.testing.assert_allclose(np.exp(log_policy).sum(axis=1), 1.0, rtol=1e-6)
    assert not network.training  # evaluation runs in eval mode
    result = search(domain, level, make_algorithm("phs"), evaluator, budget=20_000)
    assert result.solved


def test_the_evaluator_sends_observations_where_the_network_is():
    """Without a device named, the evaluator follows the network's weights: a flat network
    on a GPU once received CPU observations (PHS*(π) failed at its first search on CUDA)."""
    domain = get_domain("tsp")
    level = domain.generate(0)
    network = tiny_network(domain, level).to("meta")
    assert NetworkEvaluator(domain, network).device.type == "meta"
    assert NetworkEvaluator(domain, network, device="cpu").device.type == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_flat_network_on_cuda_drives_a_search():
    domain = get_domain("tsp")
    level = domain.generate(0)
    evaluator = NetworkEvaluator(domain, tiny_network(domain, level).to("cuda"))
    assert search(domain, level, make_algorithm("phs"), evaluator, budget=20_000).solved


def test_a_few_levin_updates_fit_a_solution_path():
    """Gradient steps on one solution raise the probability of its actions."""
    domain = get_domain("tsp")
    level = domain.generate(1)
    solution = search(domain, level, make_algorithm("bfs"), lambda states: (None, None))
    network = tiny_network(domain, level)
    observations = torch.from_numpy(domain.observe(solution.states[:-1]))
    actions = torch.tensor(solution.actions)
    weights = torch.full((len(actions),), 1.0)
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-2, weight_decay=1e-4)
    before = levin_loss(network(observations)[0], actions, weights).item()
    for _ in range(80):
        optimizer.zero_grad()
        loss = levin_loss(network(observations)[0], actions, weights)
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.5 * before


def _plain_trunk(trunk: ResNetTrunk, x: torch.Tensor) -> torch.Tensor:
    """The trunk written with out-of-place ReLUs and sums."""
    x = torch.relu(trunk.stem_norm(trunk.stem(x.contiguous(memory_format=trunk_format(x.device)))))
    for block in trunk.blocks:
        y = torch.relu(block.norm1(block.conv1(x)))
        x = torch.relu(x + block.norm2(block.conv2(y)))
    return x


def _plain_code_conditioned(network: CodeConditioned, states: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """`CodeConditioned.forward` with out-of-place ReLUs."""
    x = torch.cat([torch.flatten(torch.relu(network.reduce(_plain_trunk(network.trunk, states))), 1), vectors], 1)
    for layer in network.mlp:
        x = torch.relu(x) if isinstance(layer, torch.nn.ReLU) else layer(x)
    return x


def _outputs_and_gradients(module: torch.nn.Module, forward, precision: str) -> tuple[torch.Tensor, list]:
    module.zero_grad()
    with bf16_casts(torch.device("cpu"), precision):
        out = forward()
    (out.float() * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    return out.detach(), [p.grad.clone() for p in module.parameters()]


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
@pytest.mark.parametrize("batch_norm", [False, True])
def test_in_place_activations_give_the_values_and_gradients_of_the_plain_expressions(batch_norm, precision):
    """The trunk's ReLUs and residual sums work in place; a training step must see exactly
    what relu(conv) and relu(x + conv) compute, forward and backward, and the input stays as it was."""
    torch.manual_seed(3)
    trunk = ResNetTrunk(5, 8, 2, batch_norm=batch_norm).train()
    inputs = torch.rand(6, 5, 7, 7)
    kept = inputs.clone()
    out, grads = _outputs_and_gradients(trunk, lambda: trunk(inputs), precision)
    plain_out, plain_grads = _outputs_and_gradients(trunk, lambda: _plain_trunk(trunk, inputs), precision)
    assert torch.equal(out, plain_out) and torch.equal(inputs, kept)
    assert all(torch.equal(a, b) for a, b in zip(grads, plain_grads, strict=True))


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_in_place_relus_of_the_code_conditioned_networks_change_no_value_or_gradient(precision):
    torch.manual_seed(4)
    config = SubgoalModelConfig((5, 6, 7), 4, code_dim=8, channels=8, blocks=1, hidden=16)
    network = CodeConditioned(config, 4).train()
    states, vectors = torch.rand(6, 5, 6, 7), torch.randn(6, 8)
    out, grads = _outputs_and_gradients(network, lambda: network(states, vectors), precision)
    plain_out, plain_grads = _outputs_and_gradients(
        network, lambda: _plain_code_conditioned(network, states, vectors), precision
    )
    assert torch.equal(out, plain_out)
    assert all(torch.equal(a, b) for a, b in zip(grads, plain_grads, strict=True))


@pytest.mark.parametrize("heads", ["both", "policy only", "subgoal"])
def test_a_cpu_evaluation_in_chunks_answers_as_one_call_in_the_batchs_order(heads, monkeypatch):
    """A large CPU call goes through the networks in chunks (`CPU_CHUNK_BYTES`): the answers are those of one
    call, state by state in the batch's order, with a head that answers None answering None (LevinTS has no
    heuristic), also where the last chunk is shorter."""
    from sgps.models import evaluator as evaluators
    from sgps.training.config import resolve_config
    from sgps.training.setup import build_subgoal_method

    domain = get_domain("boxworld")
    states = [domain.generate(seed) for seed in range(10)]
    if heads == "subgoal":
        config = resolve_config("tiny", overrides={"run": {"algorithm": "phs-sg", "device": "cpu"}})
        evaluator = build_subgoal_method(domain, states[0], config).evaluator()
    else:
        evaluator = NetworkEvaluator(domain, tiny_network(domain, states[0], heuristic=heads == "both"))
    whole = evaluator(states)
    calls = []
    answers = evaluator._answers
    monkeypatch.setattr(evaluator, "_answers", lambda tensor: calls.append(len(tensor)) or answers(tensor))
    per_state = domain.observe(states[:1]).nbytes
    monkeypatch.setattr(evaluators, "CPU_CHUNK_BYTES", 3 * per_state + per_state // 2)  # three states a chunk
    chunked = evaluator(states)
    assert calls == [3, 3, 3, 1]
    for one, other, missing in zip(whole, chunked, [False, heads == "policy only"], strict=True):
        assert (one is None, other is None) == (missing, missing)
        if one is not None:
            np.testing.assert_allclose(other, one, rtol=1e-5, atol=1e-6)
    calls.clear()
    assert evaluator(states[:3])[0].shape[0] == 3 and calls == [3]  # a batch within one chunk: one call


def test_a_chunk_holds_at_least_one_state_and_80_craftworld_states():
    from sgps.models.evaluator import CPU_CHUNK_BYTES, chunk_states

    assert chunk_states(torch.zeros(5, 27, 22, 22)) == CPU_CHUNK_BYTES // (27 * 22 * 22 * 4) == 80
    assert chunk_states(torch.zeros(2, 3, 2048, 2048)) == 1
    assert chunk_states(torch.zeros(4, 2, 2, 2, dtype=torch.float64), chunk_bytes=128) == 2
