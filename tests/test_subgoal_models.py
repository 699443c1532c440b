"""The π^SG networks: EMA codebook, mixtures (paper eq. 4), both conditioning variants, checkpoints."""

from __future__ import annotations

import pytest
import torch

from sgps.errors import CheckpointError
from sgps.models import (
    VQVAE,
    EMACodebook,
    FlatNetwork,
    FlatNetworkConfig,
    SubgoalModel,
    SubgoalModelConfig,
    load_checkpoint,
    mix,
    save_checkpoint,
)
from sgps.models.checkpoint import recorded_architecture
from sgps.models.resnet import set_channels_last

SHAPE = (3, 5, 6)


def tiny_config(conditioning: str = "code-vector", **changes) -> SubgoalModelConfig:
    sizes = dict(code_dim=8, vq_channels=8, vq_blocks=1, channels=8, blocks=1, hidden=16,
                 unconditional_channels=8, unconditional_blocks=1)  # fmt: skip
    return SubgoalModelConfig(SHAPE, 4, conditioning=conditioning, **{**sizes, **changes})


def one_hot_states(count: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    cells = torch.randint(0, SHAPE[0], (count, SHAPE[1], SHAPE[2]), generator=generator)
    return torch.nn.functional.one_hot(cells, SHAPE[0]).permute(0, 3, 1, 2).float()


def test_ema_step_matches_the_bias_corrected_smoothed_average():
    codebook = EMACodebook(2, 3, decay=0.9)
    encodings = torch.tensor([[1.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    codebook.update(encodings, torch.tensor([0, 0, 1]))
    # After one step the bias-corrected averages equal this minibatch's counts and sums.
    counts, total, eps = torch.tensor([2.0, 1.0]), 3.0, 1e-5
    smoothed = (counts + eps) / (total + 2 * eps) * total
    expected = torch.stack([torch.tensor([4.0, 0.0, 0.0]) / smoothed[0], torch.tensor([0.0, 2.0, 0.0]) / smoothed[1]])
    torch.testing.assert_close(codebook.vectors, expected)
    assert codebook.steps.item() == 1


def test_codebook_changes_in_training_not_in_eval_and_survives_a_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = SubgoalModel(tiny_config())
    vqvae: VQVAE = model.vqvae
    initial = vqvae.codebook.vectors.clone()
    states, targets = one_hot_states(16, 1), one_hot_states(16, 2)
    vqvae.eval()
    vqvae.loss(states, targets)
    torch.testing.assert_close(vqvae.codebook.vectors, initial)  # no EMA step outside training
    optimizer = torch.optim.Adam(vqvae.parameters(), lr=1e-3)
    vqvae.train()
    for _ in range(3):
        optimizer.zero_grad()
        vqvae.loss(states, targets).backward()
        optimizer.step()
    assert not torch.allclose(vqvae.codebook.vectors, initial)
    assert "vqvae.codebook.vectors" in dict(model.named_buffers())  # a buffer, updated in place

    save_checkpoint(tmp_path / "sg.safetensors", model)
    torch.manual_seed(99)
    reloaded = SubgoalModel(tiny_config())
    load_checkpoint(tmp_path / "sg.safetensors", reloaded)
    for name in ("vectors", "hidden_counts", "hidden_sums", "steps"):
        torch.testing.assert_close(getattr(reloaded.vqvae.codebook, name), getattr(vqvae.codebook, name))
    model.eval()
    reloaded.eval()
    with torch.no_grad():
        for a, b in zip(model(states, 0.25), reloaded(states, 0.25), strict=True):
            torch.testing.assert_close(a, b)


def test_a_checkpoint_of_another_model_or_variant_is_refused(tmp_path):
    flat = FlatNetwork(FlatNetworkConfig(SHAPE, 4, channels=8, blocks=1))
    save_checkpoint(tmp_path / "flat.safetensors", flat)
    with pytest.raises(CheckpointError, match="another architecture"):
        load_checkpoint(tmp_path / "flat.safetensors", SubgoalModel(tiny_config()))
    save_checkpoint(tmp_path / "code.safetensors", SubgoalModel(tiny_config("code-vector")))
    with pytest.raises(CheckpointError, match="conditioning: file 'code-vector', network 'decoded-state'"):
        load_checkpoint(tmp_path / "code.safetensors", SubgoalModel(tiny_config("decoded-state")))


def random_components(batch: int = 5, k: int = 3, actions: int = 4, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    log_high = torch.log_softmax(torch.randn(batch, k, generator=generator), 1)
    log_low = torch.log_softmax(torch.randn(batch, k, actions, generator=generator) * 2, 2)
    log_unconditional = torch.log_softmax(torch.randn(batch, actions, generator=generator), 1)
    return log_high, log_low, log_unconditional


@pytest.mark.parametrize("mixture", ["geometric", "arithmetic"])
@pytest.mark.parametrize("alpha", [0.0, 0.25, 0.5, 1.0])
def test_the_mixture_is_a_distribution_and_alpha_one_is_the_unconditional_policy(mixture, alpha):
    log_high, log_low, log_unconditional = random_components()
    mixed = mix(log_high, log_low, log_unconditional, alpha, mixture)
    assert mixed.shape == log_unconditional.shape
    torch.testing.assert_close(mixed.exp().sum(1), torch.ones(5, dtype=mixed.dtype))
    if alpha == 1.0:
        expected = log_unconditional
        if mixture == "geometric":  # the reference's 1e-8 floor, renormalised
            expected = torch.log_softmax(torch.log(log_unconditional.exp() + 1e-8), 1)
        torch.testing.assert_close(mixed, expected)


def test_arithmetic_mixture_with_alpha_zero_is_equation_4_by_hand():
    log_high, log_low, log_unconditional = random_components(batch=2, k=2, actions=3)
    high, low = log_high.exp(), log_low.exp()
    mixed = mix(log_high, log_low, log_unconditional, 0.0, "arithmetic").exp()
    for b in range(2):
        numerators = [sum(high[b, k] * low[b, k, a] for k in range(2)) for a in range(3)]
        total = sum(numerators)
        for a in range(3):
            assert mixed[b, a].item() == pytest.approx((numerators[a] / total).item(), rel=1e-6)


def test_geometric_mixture_is_the_normalised_weighted_product_by_hand():
    log_high, log_low, log_unconditional = random_components(batch=1, k=2, actions=3)
    alpha = 0.25
    weights = [(1 - alpha) * log_high[0, 0].exp(), (1 - alpha) * log_high[0, 1].exp(), torch.tensor(alpha)]
    policies = [log_low[0, 0].exp(), log_low[0, 1].exp(), log_unconditional[0].exp()]
    product = torch.ones(3)
    for weight, policy in zip(weights, policies, strict=True):
        product = product * (policy + 1e-8) ** weight
    expected = product / product.sum()
    torch.testing.assert_close(mix(log_high, log_low, log_unconditional, alpha, "geometric").exp()[0], expected)


def test_mixture_rejects_bad_arguments():
    log_high, log_low, log_unconditional = random_components()
    with pytest.raises(ValueError, match="alpha"):
        mix(log_high, log_low, log_unconditional, 1.5, "geometric")
    with pytest.raises(ValueError, match="mixture must be one of"):
        mix(log_high, log_low, log_unconditional, 0.5, "harmonic")


@pytest.mark.parametrize("conditioning", ["code-vector", "decoded-state"])
def test_both_variants_give_one_policy_per_code_consistent_with_single_code_conditioning(conditioning):
    torch.manual_seed(0)
    model = SubgoalModel(tiny_config(conditioning)).eval()
    states = one_hot_states(3, 5)
    with torch.no_grad():
        log_high, log_low, log_unconditional, heuristic = model.components(states)
        assert log_high.shape == (3, 4) and log_low.shape == (3, 4, 4)
        assert log_unconditional.shape == (3, 4) and heuristic.shape == (3,)
        for k in range(4):
            codes = torch.full((3,), k)
            single = torch.log_softmax(model.conditioned_on_codes(model.low, states, codes), 1)
            torch.testing.assert_close(single, log_low[:, k], atol=1e-5, rtol=1e-5)
        log_policy, _ = model(states, 0.25)
    torch.testing.assert_close(log_policy.exp().sum(1), torch.ones(3))


@pytest.mark.parametrize("mixture", ["geometric", "arithmetic"])
@pytest.mark.parametrize("conditioning", ["code-vector", "decoded-state"])
def test_the_evaluation_path_equals_one_module_call_per_state_and_code(conditioning, mixture):
    """The search's batched evaluation (shared features, split first MLP layer, K codes at once,
    channels-last trunks) against the plain path: π_hi and π_low called on every (state, code)
    pair separately, trunks in PyTorch's default NCHW layout."""
    torch.manual_seed(3)
    model = SubgoalModel(tiny_config(conditioning, codebook_size=5)).eval()
    states = one_hot_states(7, 11)
    with torch.no_grad():
        for parameter in model.parameters():  # random weights on every scale, biases included
            parameter.copy_(torch.randn_like(parameter) * 0.3)
        model.vqvae.codebook.vectors.copy_(torch.randn_like(model.vqvae.codebook.vectors))
        set_channels_last(True)
        log_policy, heuristic = model(states, 0.5, mixture)
        set_channels_last(False)
        high, low = [], []
        for k in range(5):
            codes = torch.full((7,), k)
            high.append(model.conditioned_on_codes(model.high, states, codes).squeeze(1))
            low.append(torch.log_softmax(model.conditioned_on_codes(model.low, states, codes), 1))
        logits, plain_heuristic = model.unconditional(states)
        plain = mix(torch.log_softmax(torch.stack(high, 1), 1), torch.stack(low, 1),
                    torch.log_softmax(logits, 1), 0.5, mixture)  # fmt: skip
    torch.testing.assert_close(log_policy, plain, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(heuristic, plain_heuristic, atol=1e-5, rtol=1e-5)


@pytest.fixture(autouse=True)
def default_layout():
    """Each test leaves the trunk layout as it found it."""
    previous = set_channels_last(False)
    yield
    set_channels_last(previous)


@pytest.mark.parametrize("batch_norm", [False, True])
def test_channels_last_trunks_give_the_nchw_outputs_of_a_flat_network(batch_norm):
    """The layout option of `sgps.models.resnet` changes nothing but float rounding."""
    torch.manual_seed(5)
    network = FlatNetwork(FlatNetworkConfig(SHAPE, 4, channels=16, blocks=2, batch_norm=batch_norm)).eval()
    states = one_hot_states(9, 2)
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.copy_(torch.randn_like(parameter) * 0.3)
        set_channels_last(True)
        fast = network(states)
        set_channels_last(False)
        plain = network(states)
    for a, b in zip(fast, plain, strict=True):  # the kernels of each layout round differently (AVX2: up to 6e-5)
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert next(network.parameters()).is_contiguous()  # the weights keep their layout (checkpoints unchanged)


def pushed_below_zero(model: SubgoalModel) -> SubgoalModel:
    """`model` with π_low's 1x1 reduction biased far below zero: every pre-activation negative on every state."""
    with torch.no_grad():
        model.low.reduce.bias.fill_(-100.0)
    return model


@pytest.mark.parametrize("activation", ["relu", "none"])
def test_rectified_features_that_died_stop_learning_and_linear_ones_cannot_die(activation):
    """The failure seen on hard CraftWorld (docs/subgoals.md, "Dead features"): once the two rectified
    channels are negative everywhere, π_low is the same for every state and its trunk gets no gradient."""
    torch.manual_seed(0)
    model = pushed_below_zero(SubgoalModel(tiny_config(reduce_activation=activation)))
    states, codes = one_hot_states(6, 1), torch.zeros(6, dtype=torch.long)
    logits = model.conditioned_on_codes(model.low, states, codes)
    torch.nn.functional.cross_entropy(logits, torch.arange(6) % 4).backward()
    trunk_gradient = sum(float(p.grad.abs().sum()) for p in model.low.trunk.parameters())
    same_for_every_state = bool(torch.allclose(logits, logits[:1].expand_as(logits)))
    if activation == "relu":
        assert trunk_gradient == 0.0 and same_for_every_state
    else:
        assert trunk_gradient > 0.0 and not same_for_every_state


def test_the_reduce_activation_is_part_of_the_architecture_and_older_checkpoints_are_rectified(tmp_path):
    save_checkpoint(tmp_path / "linear.safetensors", SubgoalModel(tiny_config(reduce_activation="none")))
    with pytest.raises(CheckpointError, match="reduce_activation"):
        load_checkpoint(tmp_path / "linear.safetensors", SubgoalModel(tiny_config()))
    rectified = SubgoalModel(tiny_config())
    save_checkpoint(tmp_path / "rectified.safetensors", rectified)
    # The reference's ReLU is left out of the recorded architecture, as in checkpoints written before the option.
    assert "reduce_activation" not in recorded_architecture(tmp_path / "rectified.safetensors")
    load_checkpoint(tmp_path / "rectified.safetensors", SubgoalModel(tiny_config(reduce_activation="relu")))
    with pytest.raises(ValueError, match="reduce_activation must be one of relu, none, not 'gelu'"):
        tiny_config(reduce_activation="gelu")
