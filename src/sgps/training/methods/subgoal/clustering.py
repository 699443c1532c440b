"""The cluster hierarchy of a failed search's graph (paper section 3; spec/algorithms.md 4.2).

A search that ran out of budget leaves a graph G_0 (vertices: generated nodes;
undirected unit edges: tree edges and rediscoveries). Clustering it at increasing
granularity gives a list of levels; pairs of states drawn from neighbouring
clusters of one level are "subgoal distance" apart, and that distance grows with
the level. Two hierarchies:

- ``reference`` (default; the hierarchy of the reference implementation, whose levels the
  published cluster-level settings were tuned for): G_0, then S "star" levels with
  S = ⌊log2(B / 4000)⌋ + 2 for budget B (stopping early below 10 nodes; a star is a
  seed node, in ascending id order, with all its still-free neighbours; a group with
  internal edges gets a self-loop), then one level per Louvain phase until a single
  node remains. Each phase is python-igraph's first multilevel level at resolution
  2ρ (the reference counts internal edges once, which is modularity at 2ρ); its
  aggregated graph drops internal weight, as the reference does; a phase that merges
  nothing is replaced by a star level. The reference's other Louvain deviations
  (stale candidate clusters, a 3-sweep cap) are not reproduced.
- ``louvain``: standard Louvain (python-igraph's multilevel, resolution ρ) on G_0; level
  k is the k-th aggregation.

Every level is reproducible: seeds in ascending order, igraph driven by a seeded
generator.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import igraph

HIERARCHIES = ("reference", "louvain")
#: The budget at which the reference hierarchy has two star levels.
STAR_BUDGET_UNIT = 4000
#: Star levels stop once a level has fewer nodes than this.
STAR_MIN_NODES = 10
#: A bound on the number of levels (a safety net; real hierarchies are far shorter).
MAX_LEVELS = 64


@dataclass(frozen=True)
class WeightedGraph:
    """An undirected weighted graph as unique edges (u <= v); u == v is a self-loop."""

    num_nodes: int
    sources: np.ndarray  # int64 [E]
    targets: np.ndarray  # int64 [E]
    weights: np.ndarray  # float64 [E]

    @classmethod
    def from_edges(cls, num_nodes: int, edges: np.ndarray) -> WeightedGraph:
        """Unit weights over int [E, 2] edges (duplicates merged by summing)."""
        edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        return _merged(num_nodes, edges[:, 0], edges[:, 1], np.ones(len(edges)))

    def neighbour_lists(self) -> tuple[np.ndarray, ...]:
        """Sorted neighbours of every node; a node with a self-loop lists itself."""
        sources = np.concatenate([self.sources, self.targets[self.sources != self.targets]])
        targets = np.concatenate([self.targets, self.sources[self.sources != self.targets]])
        order = np.lexsort((targets, sources))
        sources, targets = sources[order], targets[order]
        bounds = np.searchsorted(sources, np.arange(self.num_nodes + 1))
        return tuple(targets[bounds[i] : bounds[i + 1]] for i in range(self.num_nodes))

    def has_self_loop(self) -> bool:
        return bool(np.any(self.sources == self.targets))


def _merged(num_nodes: int, sources: np.ndarray, targets: np.ndarray, weights: np.ndarray) -> WeightedGraph:
    low, high = np.minimum(sources, targets), np.maximum(sources, targets)
    keys, inverse = np.unique(low * num_nodes + high, return_inverse=True)
    summed = np.bincount(inverse.ravel(), weights=weights, minlength=len(keys)).astype(np.float64)
    return WeightedGraph(num_nodes, keys // num_nodes, keys % num_nodes, summed)


@dataclass(frozen=True)
class ClusterLevel:
    """One level: the cluster of every G_0 node and the neighbouring clusters of every cluster."""

    membership: np.ndarray  # int64 [N0]: cluster of each G_0 node
    neighbours: tuple[np.ndarray, ...]  # per cluster, sorted; a cluster with a self-loop lists itself

    @property
    def num_clusters(self) -> int:
        return len(self.neighbours)

    def members(self) -> tuple[np.ndarray, ...]:
        """The G_0 nodes of every cluster, ascending."""
        order = np.argsort(self.membership, kind="stable")
        bounds = np.searchsorted(self.membership[order], np.arange(self.num_clusters + 1))
        return tuple(order[bounds[i] : bounds[i + 1]] for i in range(self.num_clusters))

    def can_sample(self) -> bool:
        """Whether some cluster has a neighbour to pair with."""
        return any(len(n) for n in self.neighbours)


def build_hierarchy(
    num_nodes: int, edges: np.ndarray, *, budget: int, mode: str = "reference", resolution: float = 1.0, seed: int = 0
) -> list[ClusterLevel]:
    """The cluster levels of a search graph with `num_nodes` nodes and undirected `edges` [E, 2]."""
    if mode not in HIERARCHIES:
        raise ValueError(f"hierarchy must be one of {', '.join(HIERARCHIES)}, not {mode!r}")
    graph = WeightedGraph.from_edges(num_nodes, edges)
    base = ClusterLevel(np.arange(num_nodes, dtype=np.int64), graph.neighbour_lists())
    if mode == "louvain":
        return [base, *_louvain_levels(graph, resolution, seed)]
    return [base, *_reference_levels(graph, budget, resolution, seed)]


def _reference_levels(graph: WeightedGraph, budget: int, resolution: float, seed: int) -> list[ClusterLevel]:
    levels: list[ClusterLevel] = []
    membership = np.arange(graph.num_nodes, dtype=np.int64)
    stars = max(0, math.floor(math.log2(max(budget, 1) / STAR_BUDGET_UNIT)) + 2)
    for _ in range(stars):
        if graph.num_nodes < STAR_MIN_NODES:
            break
        groups = star_groups(graph)
        graph = aggregate(graph, groups, keep_internal=True)
        membership = groups[membership]
        levels.append(ClusterLevel(membership, graph.neighbour_lists()))
    while graph.num_nodes > 1 and len(levels) < MAX_LEVELS:
        groups = louvain_phase(graph, 2.0 * resolution, seed)
        if groups.max() + 1 == graph.num_nodes:  # nothing merged
            groups, keep_internal = star_groups(graph), True
        else:
            keep_internal = False
        graph = aggregate(graph, groups, keep_internal=keep_internal)
        membership = groups[membership]
        levels.append(ClusterLevel(membership, graph.neighbour_lists()))
    return levels


def _louvain_levels(graph: WeightedGraph, resolution: float, seed: int) -> list[ClusterLevel]:
    levels = []
    for clustering in _multilevel(graph, resolution, seed):
        membership = np.asarray(clustering.membership, dtype=np.int64)
        crossing = membership[graph.sources] != membership[graph.targets]
        clusters = _merged(
            int(membership.max()) + 1,
            membership[graph.sources[crossing]],
            membership[graph.targets[crossing]],
            graph.weights[crossing],
        )
        levels.append(ClusterLevel(membership, clusters.neighbour_lists()))
    return levels


def star_groups(graph: WeightedGraph) -> np.ndarray:
    """Group of every node: seeds in ascending id, each with its neighbours not yet grouped."""
    neighbours = graph.neighbour_lists()
    groups = np.full(graph.num_nodes, -1, dtype=np.int64)
    count = 0
    for node in range(graph.num_nodes):
        if groups[node] >= 0:
            continue
        around = neighbours[node]
        groups[around[groups[around] < 0]] = count
        groups[node] = count
        count += 1
    return groups


def louvain_phase(graph: WeightedGraph, resolution: float, seed: int) -> np.ndarray:
    """The clusters of one Louvain local-moving phase (igraph's first multilevel level)."""
    levels = _multilevel(graph, resolution, seed)
    if not levels:
        return np.arange(graph.num_nodes, dtype=np.int64)
    return np.asarray(levels[0].membership, dtype=np.int64)


def _multilevel(graph: WeightedGraph, resolution: float, seed: int) -> list[igraph.VertexClustering]:
    import igraph  # here, not at the top: igraph (and the matplotlib it loads) would add a second to every start-up

    g = igraph.Graph(n=graph.num_nodes, edges=np.stack([graph.sources, graph.targets], 1).tolist())
    igraph.set_random_number_generator(random.Random(seed))
    try:
        return g.community_multilevel(weights=graph.weights.tolist(), return_levels=True, resolution=resolution)
    finally:
        igraph.set_random_number_generator(random)


def aggregate(graph: WeightedGraph, groups: np.ndarray, *, keep_internal: bool) -> WeightedGraph:
    """One node per group; crossing weights summed; internal weight as a self-loop or dropped.

    A kept self-loop counts each internal edge between distinct members twice, and a
    member's own self-loop once (it already counts its internal edges twice).
    """
    sources, targets = groups[graph.sources], groups[graph.targets]
    weights = graph.weights.copy()
    internal = sources == targets
    if keep_internal:
        weights[internal & (graph.sources != graph.targets)] *= 2.0
    else:
        sources, targets, weights = sources[~internal], targets[~internal], weights[~internal]
    return _merged(int(groups.max()) + 1, sources, targets, weights)


def choose_level(levels: list[ClusterLevel], cluster_level: int) -> int:
    """ℓ* = `cluster_level` if >= 1, else ⌊L/2⌋ - 1; clamped; lowered past levels with no neighbours."""
    chosen = cluster_level if cluster_level >= 1 else len(levels) // 2 - 1
    chosen = min(max(chosen, 0), len(levels) - 1)
    while chosen > 0 and not levels[chosen].can_sample():
        chosen -= 1
    return chosen
