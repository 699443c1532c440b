"""The VQ-VAE subgoal generator (paper section 3; spec/algorithms.md 3.2).

The encoder reads a state and a later state of the same trajectory stacked on the
channels, (s, s_target), and maps the pair to a vector z_e. The quantizer snaps
z_e to the nearest of K codebook vectors: the code of the pair, i.e. which *kind*
of subgoal s_target is for s. The decoder maps (s, code vector) back to per-cell
logits over the observation channels, so decoding s with each of the K codes
gives the K subgoals the generator proposes for s.

The codebook is learned with exponential moving averages (Sonnet-style, bias
corrected, Laplace smoothed). It and its statistics are registered buffers updated
*in place*, with their step counter, so a checkpoint holds the codebook that
training used (the reference rebinds them and saves the initial codebook).

With the reference's update alone the codebook collapses to one code. The encoder's
outputs for different pairs lie within about 0.01 of each other (a global average
over boards whose two states differ in a few cells), while the codes sit about 1
apart: the first minibatch sends every pair to the code nearest that tight cloud,
the EMA sets every other code to the zero vector, and they are never chosen again, so
π^SG runs with one subgoal. `CODEBOOKS` names three behaviours:

- ``reference``: the EMA update alone (the collapse above);
- ``restart``: after each EMA step, every code whose average use falls below
  `DEAD_CODE_THRESHOLD` pairs per minibatch is moved onto the encoding of this
  minibatch that the codebook represents worst (the restarts of Dhariwal et al.
  2020, made deterministic). On its own this does not hold: the cloud drifts
  faster than the EMA follows, and the code nearest the drift takes every pair again;
- ``standardised`` (the default): restarts, and the encodings are standardised per
  dimension with the statistics of the batch being quantised (as batch
  normalisation without affine terms) before the nearest code is looked up. The
  cloud then has unit spread around the origin whatever its raw scale and drift, so
  the codes, initialised in (−√3, √3), stay spread among the encodings. Coding a
  single pair falls back on running statistics.

docs/subgoals.md has the measurements behind the default.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from sgps.models.resnet import ResNetTrunk

CODEBOOKS = ("standardised", "restart", "reference")
#: A code used by fewer pairs than this per minibatch (bias-corrected EMA count) is restarted.
DEAD_CODE_THRESHOLD = 1.0
#: Momentum of the running encoding statistics (used only to code a single pair).
RUNNING_MOMENTUM = 0.1


class EMACodebook(nn.Module):
    """K code vectors of dimension D, moved towards the mean of the encodings assigned to each."""

    def __init__(
        self, size: int, dim: int, decay: float = 0.99, smoothing: float = 1e-5, restart: bool = True
    ) -> None:
        super().__init__()
        self.decay = decay
        self.smoothing = smoothing
        self.restart = restart
        bound = math.sqrt(3.0)
        self.register_buffer("vectors", torch.empty(size, dim).uniform_(-bound, bound))
        self.register_buffer("hidden_counts", torch.zeros(size))
        self.register_buffer("hidden_sums", torch.zeros(size, dim))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    @property
    def size(self) -> int:
        return self.vectors.shape[0]

    def nearest(self, encodings: torch.Tensor) -> torch.Tensor:
        """Index of the closest code vector (squared Euclidean distance) for each row of [B, D], in float32."""
        with torch.autocast(encodings.device.type, enabled=False):
            return torch.cdist(encodings.float(), self.vectors).argmin(dim=1)

    @torch.no_grad()
    def update(self, encodings: torch.Tensor, codes: torch.Tensor) -> None:
        """One EMA step with the encodings of a minibatch and their assigned codes (float32, whatever
        the learning step's number format: the codebook's statistics accumulate over the run)."""
        with torch.autocast(encodings.device.type, enabled=False):
            self._update(encodings.float(), codes)

    def _update(self, encodings: torch.Tensor, codes: torch.Tensor) -> None:
        assigned = F.one_hot(codes, self.size).to(encodings.dtype)  # [B, K]
        self.steps += 1
        # The hidden value moves towards the new value by (1 - decay) of the gap.
        self.hidden_counts.sub_((self.hidden_counts - assigned.sum(0)) * (1.0 - self.decay))
        self.hidden_sums.sub_((self.hidden_sums - assigned.T @ encodings) * (1.0 - self.decay))
        correction = 1.0 - self.decay ** self.steps.item()
        counts = self.hidden_counts / correction
        sums = self.hidden_sums / correction
        total = counts.sum()
        smoothed = (counts + self.smoothing) / (total + self.size * self.smoothing) * total
        self.vectors.copy_(sums / smoothed.unsqueeze(1))
        if self.restart:
            self._restart_dead_codes(encodings, counts, correction)

    def _restart_dead_codes(self, encodings: torch.Tensor, counts: torch.Tensor, correction: float) -> None:
        """Move each code used by fewer than `DEAD_CODE_THRESHOLD` pairs onto a poorly represented encoding.

        The encodings farthest from their nearest code are taken in decreasing order of
        that distance, one per dead code, so a restarted code splits the cluster that
        its code summarises worst. Its EMA statistics restart as one pair at that point.
        """
        dead = torch.nonzero(counts < DEAD_CODE_THRESHOLD).flatten()
        if len(dead) == 0:
            return
        errors = torch.cdist(encodings, self.vectors).min(dim=1).values
        farthest = torch.argsort(errors, descending=True, stable=True)[: len(dead)]
        dead = dead[: len(farthest)]
        self.vectors[dead] = encodings[farthest]
        self.hidden_counts[dead] = correction
        self.hidden_sums[dead] = encodings[farthest] * correction

    @torch.no_grad()
    def usage(self, codes: torch.Tensor) -> torch.Tensor:
        """How many of `codes` pick each of the K codes ([K] counts)."""
        return torch.bincount(codes, minlength=self.size)


class Standardiser(nn.Module):
    """Per-dimension standardisation of a batch of encodings with that batch's statistics."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_var", torch.ones(dim))

    def forward(self, encodings: torch.Tensor) -> torch.Tensor:
        if encodings.shape[0] < 2:
            mean, var = self.running_mean, self.running_var
        else:
            mean, var = encodings.mean(dim=0), encodings.var(dim=0, unbiased=False)
            if self.training:
                with torch.no_grad():
                    self.running_mean.lerp_(mean.detach(), RUNNING_MOMENTUM)
                    self.running_var.lerp_(var.detach(), RUNNING_MOMENTUM)
        return (encodings - mean) / torch.sqrt(var + self.eps)


class VQVAE(nn.Module):
    """Encoder on (s, s_target), EMA quantizer, decoder from (s, code vector) to per-cell logits."""

    def __init__(
        self,
        observation_shape: tuple[int, int, int],
        codebook_size: int = 4,
        code_dim: int = 128,
        channels: int = 128,
        blocks: int = 4,
        commitment: float = 0.25,
        codebook: str = "standardised",
    ) -> None:
        super().__init__()
        if codebook not in CODEBOOKS:
            raise ValueError(f"codebook must be one of {', '.join(CODEBOOKS)}, not {codebook!r}")
        c, h, w = observation_shape
        self.shape = observation_shape
        self.commitment = commitment
        self.encoder = ResNetTrunk(2 * c, channels, blocks)
        self.to_code = nn.Linear(channels, code_dim)
        self.standardise = Standardiser(code_dim) if codebook == "standardised" else None
        self.codebook = EMACodebook(codebook_size, code_dim, restart=codebook != "reference")
        self.state_in = nn.Conv2d(c, c, 3, padding=1)
        self.code_in = nn.Linear(code_dim, h * w)
        self.decoder = ResNetTrunk(c + 1, channels, blocks)
        self.decoder_out = nn.Conv2d(channels, c, 3, padding=1)

    def encode(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """z_e [B, D] of each (state, target) pair (standardised over the batch with the ``standardised`` codebook)."""
        features = self.encoder(torch.cat([states, targets], dim=1))
        with torch.autocast(features.device.type, enabled=False):  # codes are picked in float32
            encodings = self.to_code(features.float().mean(dim=(2, 3)))
            return encodings if self.standardise is None else self.standardise(encodings)

    def decode(self, states: torch.Tensor, code_vectors: torch.Tensor) -> torch.Tensor:
        """Per-cell channel logits [B, C, H, W] of the subgoal that `code_vectors` [B, D] name for `states`."""
        _, h, w = self.shape
        plane = self.code_in(code_vectors).view(-1, 1, h, w)
        # `state_in` lies outside the trunks, which pick their own layout; it convolves in NCHW
        # whatever layout the observations come in, so its results never depend on it.
        state = self.state_in(states.contiguous())
        return self.decoder_out(self.decoder(torch.cat([state, plane], dim=1)))

    def quantise(self, encodings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The nearest code of each encoding z_e, its code vector e (a copy, taken before any codebook
        step) and the straight-through vector: e forward, z_e's gradient backward (the estimator of
        van den Oord et al. 2017, through which L_VQ's reconstruction, and the "joint" objective's
        action term, reach the encoder)."""
        codes = self.codebook.nearest(encodings.detach())
        quantized = self.codebook.vectors[codes]
        return codes, quantized, encodings + (quantized - encodings).detach()

    @torch.no_grad()
    def code(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The code index of each pair, without gradient and without touching the codebook."""
        return self.codebook.nearest(self.encode(states, targets))

    def subgoal_logits(self, states: torch.Tensor) -> torch.Tensor:
        """Decoder logits [B, K, C, H, W] of the K subgoals of each state."""
        batch, k = states.shape[0], self.codebook.size
        repeated = states.repeat_interleave(k, dim=0)
        vectors = self.codebook.vectors.repeat(batch, 1)
        return self.decode(repeated, vectors).view(batch, k, *self.shape)

    def loss(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """L_VQ = reconstruction + β · commitment; in train mode also one EMA codebook step.

        The reconstruction term is the per-cell cross-entropy between the decoder's
        channel distribution and the target's channel vector, averaged over batch and
        cells (for one-hot cells this is the softmax cross-entropy of spec 3.2).
        """
        encodings = self.encode(states, targets)
        codes, quantized, straight_through = self.quantise(encodings)
        commitment = F.mse_loss(encodings, quantized)
        if self.training:
            self.codebook.update(encodings.detach(), codes)
        log_probs = torch.log_softmax(self.decode(states, straight_through), dim=1)
        reconstruction = -(targets * log_probs).sum(dim=1).mean()
        return reconstruction + self.commitment * commitment
