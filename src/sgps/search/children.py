"""Pluggable expansion for the best-first engine: a node's outgoing edges, each a run of primitive actions.

The engine's own expansion generates one child per primitive action and asks its
caller for the policy over them. A `ChildGenerator` replaces that step for searches
whose children are not single actions: HIPS-ε (spec/algorithms.md 8.3) generates
subgoal children, reached by rollouts of a low-level policy, beside its primitive
children, and gives each edge its probability itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

S = TypeVar("S")


@dataclass(frozen=True)
class Edge(Generic[S]):
    """One child of an expanded node: the state it reaches, how, and ln of its probability."""

    state: S
    actions: tuple[int, ...]  # the primitive actions from the parent's state to `state` (at least one)
    log_prob: float  # ln π(child | parent), added to the parent's ln π


class ChildGenerator(Protocol[S]):
    """What the engine calls, instead of stepping every action, to expand a state."""

    def expand(self, state: S) -> tuple[list[Edge[S]], int]:
        """The edges out of `state`, in the order they are generated, and the primitive steps spent finding them."""
        ...
