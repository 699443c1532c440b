"""A learning signal from failed trees alone: does π_low reach subgoals it has not trained on?

Before anything is solved, PHS*(π^SG) learns only from the pairs it draws from failed
trees (spec/algorithms.md 4.3): the VQ-VAE names the pair's subgoal and π_low learns the
actions of the tree path that leads to it. The losses the learner reports are training
losses on those very samples, so they fall whether or not π_low generalises. The probe
measures π_low on each batch's pairs *before* the update that learns from them: the
pairs come from trees of problems and budgets the networks have not trained on, so the
figures are held-out ones, and they cost no extra search.

- ``probe_low_nll`` / ``probe_low_accuracy``: mean negative log-likelihood of the path's
  action under π_low conditioned on the code of (state, subgoal), and how often it is π_low's
  first choice (a uniform policy scores ln |A| and 1 / |A|).
- ``probe_reached``: the share of probed pairs whose subgoal state π_low reaches from the
  pair's start when it follows its first choice, re-coding (current state, subgoal) at
  every step, within twice the tree path's length (a policy that is learning reaches more).
- ``probe_length``: the mean tree-path length of the probed pairs, and
  ``probe_reached_length`` that of the reached ones (how far the subgoals it reaches lie).

The probe draws no random numbers and runs without gradient in evaluation mode, so it
leaves training exactly as it would be without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sgps.domains.base import Domain
from sgps.models.subgoal import SubgoalModel
from sgps.training.methods.subgoal.samples import SubgoalSamples

#: Columns of metrics/learning.csv the probe fills (None in a batch without failed-tree pairs).
PROBE_COLUMNS = ("probe_low_nll", "probe_low_accuracy", "probe_reached", "probe_length", "probe_reached_length")
#: π_low rows scored per batch (evenly spaced over the batch's failed-tree rows).
MAX_SCORED_ROWS = 1024


def evenly_spaced(count: int, wanted: int) -> np.ndarray:
    """Up to `wanted` distinct indices in [0, count), spread evenly (deterministic, no draws)."""
    if count <= 0 or wanted <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.linspace(0, count - 1, min(count, wanted)).round().astype(np.int64))


@torch.no_grad()
def probe_low_policy(
    model: SubgoalModel, domain: Domain[Any], samples: SubgoalSamples, pairs: int, device: torch.device
) -> dict[str, float | None]:
    """The probe figures of one batch (module docstring), measured with the networks as they are now."""
    report: dict[str, float | None] = dict.fromkeys(PROBE_COLUMNS)
    if pairs < 1 or not samples.failed_paths:
        return report
    model.eval()
    report.update(_scored_rows(model, samples, device))
    chosen = [samples.failed_paths[i] for i in evenly_spaced(len(samples.failed_paths), pairs)]
    starts = [samples.states[start] for start, _, _ in chosen]
    subgoals = [samples.states[subgoal] for _, subgoal, _ in chosen]
    lengths = [length for _, _, length in chosen]
    reached = _greedy_reach(model, domain, starts, subgoals, [2 * max(1, n) for n in lengths], device)
    report["probe_reached"] = float(np.mean(reached))
    report["probe_length"] = float(np.mean(lengths))
    hits = [n for n, hit in zip(lengths, reached, strict=True) if hit]
    report["probe_reached_length"] = float(np.mean(hits)) if hits else None
    return report


def _scored_rows(model: SubgoalModel, samples: SubgoalSamples, device: torch.device) -> dict[str, float]:
    rows = samples.failed_low[evenly_spaced(len(samples.failed_low), MAX_SCORED_ROWS)]
    low = samples.low
    observations = torch.from_numpy(samples.observations)
    states = observations[torch.from_numpy(low.states[rows])].to(device)
    targets = observations[torch.from_numpy(low.targets[rows])].to(device)
    actions = torch.from_numpy(low.actions[rows]).to(device)
    log_low = torch.log_softmax(model.conditioned_on_codes(model.low, states, model.vqvae.code(states, targets)), 1)
    chosen = log_low.gather(1, actions[:, None]).squeeze(1)
    return {
        "probe_low_nll": float(-chosen.mean()),
        "probe_low_accuracy": float((log_low.argmax(dim=1) == actions).double().mean()),
    }


def _greedy_reach(
    model: SubgoalModel,
    domain: Domain[Any],
    starts: Sequence[Any],
    subgoals: Sequence[Any],
    horizons: Sequence[int],
    device: torch.device,
) -> list[bool]:
    """Whether following π_low's first choice from each start reaches its subgoal state within its horizon."""
    goal_keys = [domain.key(subgoal) for subgoal in subgoals]
    goal_observations = torch.from_numpy(domain.observe(subgoals)).to(device)
    current = list(starts)
    reached = [False] * len(starts)
    for step in range(max(horizons)):
        active = [i for i in range(len(current)) if not reached[i] and step < horizons[i]
                  and not domain.is_dead(current[i])]  # fmt: skip
        if not active:
            break
        states = torch.from_numpy(domain.observe([current[i] for i in active])).to(device)
        codes = model.vqvae.code(states, goal_observations[active])
        actions = model.conditioned_on_codes(model.low, states, codes).argmax(dim=1).tolist()
        for i, action in zip(active, actions, strict=True):
            current[i] = domain.step(current[i], action)
            reached[i] = domain.key(current[i]) == goal_keys[i]
    return reached
