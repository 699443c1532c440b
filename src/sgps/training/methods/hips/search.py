"""HIPS-ε's hybrid complete search (spec/algorithms.md 8.3) on the project's best-first engine.

`HybridChildren` is the engine's `ChildGenerator` for HIPS-ε. Expanding a state s:

1. decode (s, e_k) for the K codes and take each cell's most likely class
   (`CellClasses`): a concrete observation; drop candidates equal to s and merge
   identical ones;
2. run π_low greedily from s towards each candidate, in the true domain, for at most
   `rollout_steps` steps; a candidate is valid only when a rollout reaches it exactly
   (same observation), and its edge is the rollout's actions. Candidates the domain's
   invariants rule out (`Domain.may_reach`) get no rollout, and a rollout stops once
   its candidate is out of reach: the same candidates are valid, for fewer steps;
3. add every primitive action as a child of its own.

Child probabilities: a valid subgoal gets (1 − ε) times the prior's softmax over the
valid codes (codes merged into one candidate add up); a primitive action gets ε times
the prior's softmax over the actions. The engine orders nodes by `hips_cost` (m = 1 +
max(ĥ, 0)/dist, cost ln(g m) − m ln π), with ĥ from `HipsHeuristic`. Rollout steps and
primitive steps are free for the budget, which counts expansions only, as in the paper;
the engine's `domain_steps` counts them, so search effort can be compared honestly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sgps.domains.base import Domain
from sgps.models.hips import HipsModel
from sgps.search.children import Edge


def encode_observations(model: HipsModel, observations: np.ndarray, device: torch.device) -> torch.Tensor:
    """The networks' input: domain observations [B, C, H, W] as one-hot cell classes [B, V, H, W]."""
    return model.cells.encode(torch.from_numpy(observations).to(device, torch.float32))


class HybridChildren:
    """Subgoal children validated by π_low rollouts, then the primitive children (spec 8.3)."""

    def __init__(
        self,
        domain: Domain[Any],
        model: HipsModel,
        *,
        epsilon: float,
        rollout_steps: int,
        device: torch.device,
        prune: bool = True,
    ) -> None:
        if not 0.0 < epsilon < 1.0:
            raise ValueError(f"HIPS-ε's epsilon must be strictly between 0 and 1, got {epsilon}")
        self.domain = domain
        self.model = model
        self.epsilon = epsilon
        self.rollout_steps = rollout_steps
        self.device = device
        self.prune = prune

    @torch.inference_mode()
    def expand(self, state: Any) -> tuple[list[Edge[Any]], int]:
        own = self.domain.observe([state])[0]
        observation = encode_observations(self.model, own[None], self.device)
        code_logits, action_logits = self.model.prior(observation)
        decoded = self.model.cells.decode(self.model.generator.subgoal_logits(observation))[0]  # [K, C, H, W]
        candidates = self.candidates(own, decoded.to(torch.uint8).cpu().numpy())
        reached, steps = self.validate(state, own, candidates)
        edges: list[Edge[Any]] = []
        if reached:
            valid_codes = [k for key in reached for k in candidates[key]]
            shares = torch.softmax(code_logits[0, valid_codes], dim=0).tolist()
            share_of = dict(zip(valid_codes, shares, strict=True))
            for key, (end_state, actions) in reached.items():
                probability = (1.0 - self.epsilon) * sum(share_of[k] for k in candidates[key])
                edges.append(Edge(end_state, actions, math.log(max(probability, 1e-30))))
        action_shares = torch.softmax(action_logits[0], dim=0).tolist()
        for action in range(self.domain.num_actions):
            child = self.domain.step(state, action)
            edges.append(Edge(child, (action,), math.log(max(self.epsilon * action_shares[action], 1e-30))))
        return edges, steps + self.domain.num_actions

    def candidates(self, own: np.ndarray, decoded: np.ndarray) -> dict[bytes, list[int]]:
        """Distinct decoded subgoals other than the state observed as `own` (bytes -> the codes decoding to it)."""
        own_key = own.astype(np.uint8).tobytes()
        merged: dict[bytes, list[int]] = {}
        for code, subgoal in enumerate(decoded):
            key = subgoal.tobytes()
            if key != own_key:
                merged.setdefault(key, []).append(code)
        return merged

    def validate(
        self, state: Any, start: np.ndarray, candidates: dict[bytes, list[int]]
    ) -> tuple[dict[bytes, tuple[Any, tuple[int, ...]]], int]:
        """Greedy π_low rollouts from `state` (observed as `start`) towards every candidate at once;
        those reached exactly, and the steps taken.

        A rollout ends when it reaches its candidate, reaches a terminal state (dead or
        goal) that is not its candidate, returns to a state it visited (greedy π_low is
        deterministic, so it would loop for ever), or after `rollout_steps` steps. With
        `prune`, a candidate the domain's invariants rule out (`Domain.may_reach`) gets
        no rollout, and a rollout stops as soon as its candidate becomes unreachable
        (e.g. it used up an item the candidate still shows): neither could have reached
        it, so the same candidates are valid, for fewer low-level steps.
        """
        keys = list(candidates)
        if not keys:
            return {}, 0
        goals = np.stack([np.frombuffer(key, dtype=np.uint8).reshape(start.shape) for key in keys])
        observed = np.repeat(start[None], len(keys), axis=0)
        if self.prune:
            possible = self.domain.may_reach(observed, goals)
            keys, goals, observed = [k for k, ok in zip(keys, possible, strict=True) if ok], goals[possible], \
                observed[possible]  # fmt: skip
            if not keys:
                return {}, 0
        targets = encode_observations(self.model, goals, self.device)
        current = [state] * len(keys)
        paths: list[list[int]] = [[] for _ in keys]
        visited: list[set[Any]] = [{self.domain.key(state)} for _ in keys]
        active = list(range(len(keys)))
        reached: dict[bytes, tuple[Any, tuple[int, ...]]] = {}
        steps = 0
        for _ in range(self.rollout_steps):
            inputs = encode_observations(self.model, observed[active], self.device)
            actions = self.model.low_logits(inputs, targets[active]).argmax(dim=1).tolist()
            for i, action in zip(active, actions, strict=True):
                current[i] = self.domain.step(current[i], action)
                paths[i].append(action)
            steps += len(active)
            observed[active] = self.domain.observe([current[i] for i in active])
            hopeful = self.domain.may_reach(observed[active], goals[active]) if self.prune else [True] * len(active)
            still = []
            for i, may_reach in zip(active, hopeful, strict=True):
                key = self.domain.key(current[i])
                if observed[i].astype(np.uint8).tobytes() == keys[i]:
                    reached[keys[i]] = (current[i], tuple(paths[i]))
                elif may_reach and not (key in visited[i] or self.domain.is_dead(current[i])
                                        or self.domain.is_goal(current[i])):  # fmt: skip
                    visited[i].add(key)
                    still.append(i)
            active = still
            if not active:
                break
        return reached, steps


class HipsHeuristic:
    """The search's evaluator: the distance network's ĥ (no policy: edges carry their probabilities)."""

    def __init__(self, domain: Domain[Any], model: HipsModel, device: torch.device) -> None:
        self.domain = domain
        self.model = model
        self.device = device

    @torch.inference_mode()
    def __call__(self, states: Sequence[Any]) -> tuple[None, np.ndarray]:
        observations = encode_observations(self.model, self.domain.observe(list(states)), self.device)
        return None, self.model.remaining(observations).float().cpu().numpy()
