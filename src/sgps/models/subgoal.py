"""The subgoal-guided policy π^SG (paper section 3, eq. 4; spec/algorithms.md 3.3-3.6).

`SubgoalModel` holds four networks:

- the VQ-VAE subgoal generator (`sgps.models.vqvae`);
- the high-level policy π_hi(k | s) over the K codes;
- the conditional low-level policy π_low(a | s, k);
- the unconditional low-level policy π_unc(a | s) with the heuristic h(s).

Two ways to condition on subgoal k (`conditioning`):

- ``code-vector`` (the reference's default, variant F): one trunk pass per state
  gives features f(s); an MLP reads (f(s), e_k) for each code vector e_k;
- ``decoded-state`` (the paper's text, variant D): decode the subgoal ŝ_k (softmax
  per cell) and run a trunk on (s, ŝ_k), K times per state.

`mix` combines them into one policy: ``geometric`` (the reference: log-linear pooling
of the K conditional policies weighted (1 - α)·π_hi(k|s) and π_unc weighted α) or
``arithmetic`` (eq. 4 of the paper, extended with the α-weighted π_unc; α = 0 gives
eq. 4 exactly). The search engine adds the ε-uniform noise afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from sgps.models.flat import FlatNetwork, FlatNetworkConfig
from sgps.models.resnet import ResNetTrunk
from sgps.models.vqvae import VQVAE

CONDITIONINGS = ("code-vector", "decoded-state")
MIXTURES = ("geometric", "arithmetic")
#: After variant F's 1x1 reduction: the reference's ReLU, or nothing (`CodeConditioned`).
REDUCE_ACTIVATIONS = ("relu", "none")
#: Added to probabilities before the logarithm in the geometric mixture (as the reference).
LOG_FLOOR = 1e-8


@dataclass(frozen=True)
class SubgoalModelConfig:
    """Architecture of the π^SG networks (defaults: the reference's sizes, spec section 7)."""

    observation_shape: tuple[int, int, int]  # (C, H, W)
    num_actions: int
    conditioning: str = "code-vector"
    codebook_size: int = 4
    codebook: str = "standardised"  # how the codebook is kept in use (`sgps.models.vqvae.CODEBOOKS`)
    code_dim: int = 128
    vq_channels: int = 128
    vq_blocks: int = 4
    channels: int = 128  # high-level and conditional low-level trunks
    blocks: int = 4
    hidden: int = 512  # the two hidden layers of their MLP heads
    unconditional_channels: int = 64
    unconditional_blocks: int = 4
    #: What follows variant F's 1x1 reduction (`REDUCE_ACTIVATIONS`); added after checkpoints were
    #: written, all with the reference's ReLU, which is therefore the default here.
    reduce_activation: str = field(default="relu", metadata={"omit_when_default": True})

    def __post_init__(self) -> None:
        if self.conditioning not in CONDITIONINGS:
            raise ValueError(f"conditioning must be one of {', '.join(CONDITIONINGS)}, not {self.conditioning!r}")
        if self.reduce_activation not in REDUCE_ACTIVATIONS:
            raise ValueError(f"reduce_activation must be one of {', '.join(REDUCE_ACTIVATIONS)}, "
                             f"not {self.reduce_activation!r}")  # fmt: skip
        if self.codebook_size < 1:
            raise ValueError("codebook_size must be at least 1")


class CodeConditioned(nn.Module):
    """Variant F: features f(s) once per state (trunk, 1x1 reduce to 2, `reduce_activation`), then an
    MLP on (f(s), e).

    The reference applies a ReLU after the reduction (spec Q17). With only two channels it can
    die: once every pre-activation is negative on every state, f(s) is zero, no gradient reaches
    the trunk or the reduction again, and the network reads its code alone for the rest of the
    run (docs/subgoals.md, "Dead features"). ``none`` leaves the reduction linear; the MLP's
    first layer is followed by a ReLU either way.
    """

    def __init__(self, config: SubgoalModelConfig, out: int) -> None:
        super().__init__()
        c, h, w = config.observation_shape
        self.trunk = ResNetTrunk(c, config.channels, config.blocks)
        self.reduce = nn.Conv2d(config.channels, 2, 1)
        self.mlp = _mlp(2 * h * w + config.code_dim, config.hidden, out)
        self.rectified = config.reduce_activation == "relu"

    def features(self, states: torch.Tensor) -> torch.Tensor:
        reduced = self.reduce(self.trunk(states))
        return torch.flatten(reduced.relu_() if self.rectified else reduced, 1)

    def forward(self, states: torch.Tensor, code_vectors: torch.Tensor) -> torch.Tensor:
        """Outputs [B, out] for one code vector per state ([B, D])."""
        return self.mlp(torch.cat([self.features(states), code_vectors], dim=1))

    def for_every_code(self, states: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
        """Outputs [B, K, out] for every code vector of `codebook` [K, D], one trunk pass per state.

        Equal to `forward` on every (state, code) pair, but the MLP's first layer is split:
        W·[f; e] + b = W_f·f + (W_e·e + b), so the large feature part runs once per state
        and the code part once per code, instead of once per pair (K times less work there).
        """
        features = self.features(states)
        first = self.mlp[0]
        width = features.shape[1]
        per_state = features @ first.weight[:, :width].T  # [B, H]
        per_code = torch.addmm(first.bias, codebook, first.weight[:, width:].T)  # [K, H]
        return self.mlp[1:](per_state.unsqueeze(1) + per_code.unsqueeze(0))


class StateConditioned(nn.Module):
    """Variant D: a trunk on (s, ŝ) stacked on channels, 1x1 reduce to 2 (no ReLU), then an MLP."""

    def __init__(self, config: SubgoalModelConfig, out: int) -> None:
        super().__init__()
        c, h, w = config.observation_shape
        self.trunk = ResNetTrunk(2 * c, config.channels, config.blocks)
        self.reduce = nn.Conv2d(config.channels, 2, 1)
        self.mlp = _mlp(2 * h * w, config.hidden, out)

    def forward(self, states: torch.Tensor, subgoals: torch.Tensor) -> torch.Tensor:
        """Outputs [B, out] for one (soft) subgoal per state."""
        return self.mlp(torch.flatten(self.reduce(self.trunk(torch.cat([states, subgoals], dim=1))), 1))


def _mlp(size: int, hidden: int, out: int) -> nn.Sequential:
    layers = [nn.Linear(size, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
              nn.Linear(hidden, out)]
    return nn.Sequential(*layers)


class SubgoalModel(nn.Module):
    """The four networks of π^SG and how they combine into one policy."""

    def __init__(self, config: SubgoalModelConfig) -> None:
        super().__init__()
        self.config = config
        conditioned = CodeConditioned if config.conditioning == "code-vector" else StateConditioned
        self.vqvae = VQVAE(config.observation_shape, config.codebook_size, config.code_dim,
                           config.vq_channels, config.vq_blocks, codebook=config.codebook)  # fmt: skip
        self.high = conditioned(config, 1)
        self.low = conditioned(config, config.num_actions)
        self.unconditional = FlatNetwork(
            FlatNetworkConfig(
                observation_shape=config.observation_shape,
                num_actions=config.num_actions,
                channels=config.unconditional_channels,
                blocks=config.unconditional_blocks,
            )
        )

    # -- conditioning -----------------------------------------------------------------

    def soft_subgoals(self, states: torch.Tensor, code_vectors: torch.Tensor) -> torch.Tensor:
        """Decoded subgoals [B, C, H, W]: the per-cell channel softmax of the decoder (variant D)."""
        return torch.softmax(self.vqvae.decode(states, code_vectors), dim=1)

    def conditioned_on_vectors(self, network: nn.Module, states: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """`network`'s outputs [B, out] with each state conditioned on a code vector ([B, D]), with
        gradient into the vectors (through the decoder under state conditioning)."""
        if self.config.conditioning == "code-vector":
            return network(states, vectors)
        return network(states, self.soft_subgoals(states, vectors))

    def conditioned_on_codes(self, network: nn.Module, states: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """`network`'s outputs [B, out] with each state conditioned on its code index ([B])."""
        vectors = self.vqvae.codebook.vectors[codes]
        if self.config.conditioning == "code-vector":
            return network(states, vectors)
        with torch.no_grad():
            subgoals = self.soft_subgoals(states, vectors)
        return network(states, subgoals)

    def for_every_code(
        self, network: nn.Module, states: torch.Tensor, decoded: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """`network`'s outputs [B, K, out] for every code of the codebook.

        `decoded`: the `decoded_subgoals` of `states` when already computed (state conditioning).
        """
        if self.config.conditioning == "code-vector":
            return network.for_every_code(states, self.vqvae.codebook.vectors)
        repeated, subgoals = decoded if decoded is not None else self.decoded_subgoals(states)
        return network(repeated, subgoals).view(states.shape[0], self.config.codebook_size, -1)

    def decoded_subgoals(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(each state repeated K times [B*K, C, H, W], its K soft subgoals [B*K, C, H, W])."""
        codebook = self.vqvae.codebook.vectors
        repeated = states.repeat_interleave(codebook.shape[0], dim=0)
        with torch.no_grad():  # the generator learns from its own loss only
            return repeated, self.soft_subgoals(repeated, codebook.repeat(states.shape[0], 1))

    # -- inference --------------------------------------------------------------------

    def components(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log π_hi [B, K], log π_low [B, K, |A|], log π_unc [B, |A|], h [B]) for a batch of states."""
        decoded = self.decoded_subgoals(states) if self.config.conditioning == "decoded-state" else None
        log_high = torch.log_softmax(self.for_every_code(self.high, states, decoded).squeeze(2), dim=1)
        log_low = torch.log_softmax(self.for_every_code(self.low, states, decoded), dim=2)
        logits, heuristic = self.unconditional(states)
        return log_high, log_low, torch.log_softmax(logits, dim=1), heuristic

    def forward(
        self, states: torch.Tensor, alpha: float, mixture: str = "geometric"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(log π^SG [B, |A|], h [B])."""
        log_high, log_low, log_unconditional, heuristic = self.components(states)
        return mix(log_high, log_low, log_unconditional, alpha, mixture), heuristic


def mix(
    log_high: torch.Tensor, log_low: torch.Tensor, log_unconditional: torch.Tensor, alpha: float, mixture: str
) -> torch.Tensor:
    """log π^SG [B, |A|] from log π_hi [B, K], log π_low [B, K, |A|] and log π_unc [B, |A|].

    Weights: w_k = (1 - α)·π_hi(k|s) for the K conditional policies, α for π_unc.

    - geometric: ln π(a) = Σ_j w_j ln(π_j(a) + 1e-8) - ln Z (the reference);
    - arithmetic: π(a) = Σ_j w_j π_j(a), already normalised (paper eq. 4 when α = 0).
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"the unconditional weight alpha must be in [0, 1], got {alpha}")
    weights = torch.cat([(1.0 - alpha) * log_high.exp(), torch.full_like(log_high[:, :1], alpha)], dim=1)
    components = torch.cat([log_low, log_unconditional.unsqueeze(1)], dim=1)  # [B, K + 1, |A|]
    if mixture == "geometric":
        pooled = (weights.unsqueeze(2) * torch.log(components.exp() + LOG_FLOOR)).sum(dim=1)
        return torch.log_softmax(pooled, dim=1)
    if mixture == "arithmetic":
        return torch.logsumexp(components + torch.log(weights).unsqueeze(2), dim=1)
    raise ValueError(f"mixture must be one of {', '.join(MIXTURES)}, not {mixture!r}")
