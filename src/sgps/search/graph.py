"""The search graph a best-first search records for learning (spec/algorithms.md 1.5).

Vertices are the generated nodes (ids in generation order, root 0). The search tree
is kept as parent pointers with the action on each tree edge; the graph's other
edges are the undirected "rediscovery" edges found when an expansion generates a
state that was generated before. The subgoal trainer clusters this graph and samples
ancestor/descendant pairs from it, rebuilding the actions between them from the tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SearchGraph:
    """Compact integer arrays over the N generated nodes of one search."""

    states: Sequence[Any]  # state of each node
    parents: np.ndarray  # int32 [N]; -1 for the root
    actions: np.ndarray  # int8 [N]; the action from the parent; -1 for the root
    depths: np.ndarray  # int32 [N]; g of each node
    rediscovered: np.ndarray  # int32 [E, 2]; rediscovery edges (u < v), unique, not tree edges

    @property
    def num_nodes(self) -> int:
        return len(self.parents)

    def edges(self) -> np.ndarray:
        """All undirected edges, tree edges first: int32 [E', 2] with u < v, no duplicates."""
        children = np.nonzero(self.parents >= 0)[0].astype(np.int32)
        tree = np.stack([self.parents[children], children], axis=1)
        tree.sort(axis=1)
        if len(self.rediscovered) == 0:
            return tree
        return np.concatenate([tree, self.rediscovered]).astype(np.int32)

    def is_ancestor(self, ancestor: int, descendant: int) -> bool:
        """Whether `ancestor` lies on the tree path from the root to `descendant` (or is it)."""
        depth = int(self.depths[ancestor])
        node = descendant
        while int(self.depths[node]) > depth:
            node = int(self.parents[node])
        return node == ancestor

    def path(self, ancestor: int, descendant: int) -> tuple[list[Any], list[int]]:
        """States (ancestor ... descendant) and the actions between them, along the tree.

        Raises `ValueError` if `ancestor` is not an ancestor of `descendant`.
        """
        nodes = [descendant]
        while nodes[-1] != ancestor:
            parent = int(self.parents[nodes[-1]])
            if parent < 0 or self.depths[parent] < self.depths[ancestor]:
                raise ValueError(f"node {ancestor} is not an ancestor of node {descendant}")
            nodes.append(parent)
        nodes.reverse()
        return [self.states[n] for n in nodes], [int(self.actions[n]) for n in nodes[1:]]
