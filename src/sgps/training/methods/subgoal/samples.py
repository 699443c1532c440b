"""What the subgoal method learns from a batch of searches (spec/algorithms.md 4.3-4.4, 5).

From a failed search (status "budget"; with `exhausted_trees`, also "no_solution",
whose graph holds every reachable state): cluster its graph (`sgps.training.methods.subgoal.clustering`),
draw pairs of states from neighbouring clusters of the chosen level whose tree
relation is ancestor/descendant, and rebuild the actions between them from the
parent pointers. Each pair gives one VQ-VAE pair and one conditional-low sample per
step of its path, weighted by the search's expansions; its length goes into the
length buffer.

From a solved search: cut the solution into segments whose lengths are drawn from a
Normal fitted to the length buffer; each segment (i, j) gives one VQ-VAE pair
(s_i, s_j) and, for every m in [i, j), a conditional-low sample (s_m, s_j, a_m) and a
high-level sample whose label is the code of (s_m, s_j) (per state, the reference) or
of (s_i, s_j) (per segment, the paper). The unconditional policy and the heuristic
learn from the whole path, as the flat baselines (`sgps.training.methods.flat.samples`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sgps.domains.base import Domain
from sgps.search.engine import SearchResult
from sgps.search.graph import SearchGraph
from sgps.training.methods.subgoal.clustering import ClusterLevel, build_hierarchy, choose_level

SEGMENTATIONS = ("fixed", "compat")
SUBGOAL_TARGETS = ("state", "segment")
#: Path-length statistics used while the buffer is empty.
DEFAULT_LENGTH_MEAN, DEFAULT_LENGTH_STD = 5.0, 1.0


class LengthBuffer:
    """Ring buffer of the path lengths of the pairs drawn from failed trees (spec 4.4)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self.lengths: list[int] = []
        self.position = 0

    def push(self, lengths: Sequence[int]) -> None:
        for length in lengths:
            if len(self.lengths) < self.capacity:
                self.lengths.append(int(length))
            else:
                self.lengths[self.position] = int(length)
            self.position = (self.position + 1) % self.capacity

    def statistics(self) -> tuple[float, float]:
        """(mean, population standard deviation); (5, 1) when empty."""
        if not self.lengths:
            return DEFAULT_LENGTH_MEAN, DEFAULT_LENGTH_STD
        values = np.asarray(self.lengths, dtype=np.float64)
        return float(values.mean()), float(values.std())

    def state_dict(self) -> dict[str, Any]:
        return {"lengths": list(self.lengths), "position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lengths = [int(n) for n in state["lengths"]]
        self.position = int(state["position"])


def sample_tree_pairs(
    graph: SearchGraph,
    level: ClusterLevel,
    count: int,
    rng: np.random.Generator,
    max_draws: int = 1000,
) -> list[tuple[int, int]]:
    """Up to `count` (ancestor, descendant) node pairs from neighbouring clusters of `level`.

    A draw picks a cluster with neighbours uniformly, one of its neighbours uniformly,
    then a member of each uniformly; it succeeds if one node is a strict tree ancestor
    of the other. Gives up after `max_draws` draws (the caller falls back a level).
    """
    pairs: list[tuple[int, int]] = []
    members = level.members()
    candidates = [c for c in range(level.num_clusters) if len(level.neighbours[c])]
    if not candidates:
        return pairs
    for _ in range(max_draws):
        if len(pairs) == count:
            break
        cluster = candidates[rng.integers(len(candidates))]
        around = level.neighbours[cluster]
        neighbour = int(around[rng.integers(len(around))])
        x = int(members[cluster][rng.integers(len(members[cluster]))])
        y = int(members[neighbour][rng.integers(len(members[neighbour]))])
        if x == y:
            continue
        if graph.is_ancestor(x, y):
            pairs.append((x, y))
        elif graph.is_ancestor(y, x):
            pairs.append((y, x))
    return pairs


def segment_bounds(length: int, mean: float, std: float, rng: np.random.Generator, mode: str) -> list[tuple[int, int]]:
    """Segments (i, j) of a path of `length` actions, each length drawn afresh (spec 5.2).

    - fixed: t' = max(1, round(X)), X ~ Normal(mean, std); no empty segments;
    - compat: the reference's t' = 1 + ⌊max(0, X)⌋, X ~ Normal(mean - 1, √std), with its
      countdown and the final boundary appended even when repeated.
    """
    if mode == "fixed":
        bounds, start = [], 0
        while start < length:
            step = max(1, round(rng.normal(mean, max(std, 0.0))))
            bounds.append((start, min(start + step, length)))
            start += step
        return bounds
    if mode != "compat":
        raise ValueError(f"segmentation must be one of {', '.join(SEGMENTATIONS)}, not {mode!r}")

    def draw() -> int:
        return 1 + math.floor(max(0.0, rng.normal(mean - 1.0, math.sqrt(max(std, 0.0)))))

    boundaries, countdown = [0], draw()
    for i in range(1, length + 1):
        countdown -= 1
        if countdown == 0:
            boundaries.append(i)
            countdown = draw()
    boundaries.append(length)
    return list(itertools.pairwise(boundaries))


@dataclass(frozen=True)
class PairRows:
    """VQ-VAE samples: (state, target) pairs, as row indices into `SubgoalSamples.observations`."""

    states: np.ndarray  # int64 [P]
    targets: np.ndarray  # int64 [P]

    def __len__(self) -> int:
        return len(self.states)


@dataclass(frozen=True)
class LowRows:
    """Conditional low-level samples: in `states[i]`, heading for `targets[i]`, take `actions[i]`."""

    states: np.ndarray  # int64 [L]
    targets: np.ndarray  # int64 [L]
    actions: np.ndarray  # int64 [L]
    weights: np.ndarray  # float32 [L]: expansions of the search the sample came from

    def __len__(self) -> int:
        return len(self.states)


@dataclass(frozen=True)
class HighRows:
    """High-level samples: in `states[i]`, the label is the code of the pair (`label_states[i]`, `targets[i]`).

    `label_states[i]` is `states[i]` itself (per-state labels, the reference) or the
    segment's first state (per-segment labels, the paper).
    """

    states: np.ndarray  # int64 [Q]
    targets: np.ndarray  # int64 [Q]
    label_states: np.ndarray  # int64 [Q]
    weights: np.ndarray  # float32 [Q]

    def __len__(self) -> int:
        return len(self.states)


@dataclass
class SubgoalSamples:
    """What one batch teaches each π^SG network; every table indexes rows of `observations`."""

    observations: np.ndarray  # float32 [M, C, H, W], one row per collected state
    vq: PairRows
    low: LowRows
    high: HighRows
    failed_trees: int = 0
    pair_lengths: list[int] = field(default_factory=list)  # of the failed-tree pairs
    levels_used: list[int] = field(default_factory=list)  # the cluster level each failed-tree pair came from
    pair_trees: list[int] = field(default_factory=list)  # the failed tree (0, 1, ... in the batch) of each pair
    chosen_levels: list[int] = field(default_factory=list)  # the level chosen for each failed tree
    cluster_counts: list[int] = field(default_factory=list)  # clusters at that level, per failed tree
    segments: int = 0
    states: list[Any] = field(default_factory=list)  # the domain state of each row of `observations`
    failed_paths: list[tuple[int, int, int]] = field(default_factory=list)  # (start row, subgoal row, length)
    failed_low: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # their rows of `low`


@dataclass(frozen=True)
class SamplingSettings:
    """How samples are drawn (defaults: the reference's, with the spec's fixes)."""

    failed_trees: bool = True
    exhausted_trees: bool = False  # also learn from searches that ran out of states
    hierarchy: str = "reference"
    cluster_level: int = 0  # 0: the rule ⌊L/2⌋ - 1
    resolution: float = 1.0
    pairs_per_tree: int = 5
    max_draws: int = 1000
    segmentation: str = "fixed"
    subgoal_target: str = "state"


class _Collector:
    """Accumulates states and sample rows while walking the searches of one batch."""

    def __init__(self) -> None:
        self.states: list[Any] = []
        self.vq: list[tuple[int, int]] = []
        self.low: list[tuple[int, int, int, float]] = []  # state, target, action, weight
        self.high: list[tuple[int, int, int, float]] = []  # state, target, label state, weight
        self.failed_trees = 0
        self.pair_lengths: list[int] = []
        self.levels_used: list[int] = []
        self.pair_trees: list[int] = []
        self.chosen_levels: list[int] = []
        self.cluster_counts: list[int] = []
        self.segments = 0
        self.failed_paths: list[tuple[int, int, int]] = []
        self.failed_low: list[int] = []

    def add_states(self, states: Sequence[Any]) -> list[int]:
        first = len(self.states)
        self.states.extend(states)
        return list(range(first, first + len(states)))

    def add_path(self, ids: list[int], actions: Sequence[int], weight: float, high_labels: str | None) -> None:
        """A VQ pair (first, last) and a conditional-low row for every step of the path.

        `high_labels`: None (no high-level rows: failed-tree paths), ``state`` (each
        step's label is the code of (that state, last)) or ``segment`` (the code of
        (first, last) for every step).
        """
        target = ids[-1]
        self.vq.append((ids[0], target))
        if high_labels is None:
            self.failed_paths.append((ids[0], target, len(actions)))
            self.failed_low.extend(range(len(self.low), len(self.low) + len(actions)))
        for m, action in enumerate(actions):
            self.low.append((ids[m], target, int(action), weight))
            if high_labels is not None:
                self.high.append((ids[m], target, ids[m] if high_labels == "state" else ids[0], weight))

    def tables(self) -> tuple[PairRows, LowRows, HighRows]:
        vq = np.asarray(self.vq, dtype=np.int64).reshape(-1, 2)
        low = np.asarray(self.low, dtype=np.float64).reshape(-1, 4)
        high = np.asarray(self.high, dtype=np.float64).reshape(-1, 4)

        def ints(column: np.ndarray) -> np.ndarray:
            return column.astype(np.int64)

        return (
            PairRows(vq[:, 0].copy(), vq[:, 1].copy()),
            LowRows(ints(low[:, 0]), ints(low[:, 1]), ints(low[:, 2]), low[:, 3].astype(np.float32)),
            HighRows(ints(high[:, 0]), ints(high[:, 1]), ints(high[:, 2]), high[:, 3].astype(np.float32)),
        )


@dataclass(frozen=True)
class TreeDraw:
    """What one failed search's graph gives: the path of each drawn (ancestor, descendant) pair."""

    paths: tuple[tuple[tuple[Any, ...], tuple[int, ...]], ...]  # (states, actions) of each pair
    levels_used: tuple[int, ...]  # the cluster level each pair came from
    chosen_level: int
    cluster_count: int  # clusters at the chosen level


def failed_statuses(settings: SamplingSettings) -> tuple[str, ...]:
    """The statuses of searches whose graphs are learned from."""
    return ("budget", "no_solution") if settings.exhausted_trees else ("budget",)


def draw_from_tree(graph: SearchGraph, expanded: int, settings: SamplingSettings, rng: np.random.Generator) -> TreeDraw:
    """Cluster a failed search's graph and draw `pairs_per_tree` pairs from neighbouring clusters
    of the chosen level, falling back a level at a time while too few are found (spec 4.3)."""
    levels = build_hierarchy(
        graph.num_nodes,
        graph.edges(),
        budget=expanded,
        mode=settings.hierarchy,
        resolution=settings.resolution,
        seed=int(rng.integers(2**31)),
    )
    chosen = level = choose_level(levels, settings.cluster_level)
    pairs: list[tuple[int, int]] = []
    levels_used: list[int] = []
    while level >= 0 and len(pairs) < settings.pairs_per_tree:
        drawn = sample_tree_pairs(graph, levels[level], settings.pairs_per_tree - len(pairs), rng, settings.max_draws)
        pairs += drawn
        levels_used += [level] * len(drawn)
        level -= 1
    paths = tuple((tuple(states), tuple(actions)) for states, actions in (graph.path(*pair) for pair in pairs))
    return TreeDraw(paths, tuple(levels_used), chosen, levels[chosen].num_clusters)


def collect_samples(
    domain: Domain[Any],
    results: Sequence[SearchResult],
    settings: SamplingSettings,
    length_statistics: tuple[float, float],
    rng: np.random.Generator,
) -> SubgoalSamples | None:
    """The samples of one Bootstrap batch; None when it gives nothing to learn."""
    collector = _Collector()
    failed = failed_statuses(settings)
    for result in results:
        if result.solved and result.actions:
            _from_solution(collector, result, settings, length_statistics, rng)
        elif settings.failed_trees and result.status in failed:
            if isinstance(result.draw, TreeDraw):  # drawn where the search ran (`TreeDrawer`)
                _from_tree_draw(collector, result.draw, float(result.expanded))
            elif result.graph is not None:
                draw = draw_from_tree(result.graph, result.expanded, settings, rng)
                _from_tree_draw(collector, draw, float(result.expanded))
    if not collector.states:
        return None
    vq, low, high = collector.tables()
    return SubgoalSamples(
        observations=domain.observe(collector.states),
        vq=vq,
        low=low,
        high=high,
        failed_trees=collector.failed_trees,
        pair_lengths=collector.pair_lengths,
        levels_used=collector.levels_used,
        pair_trees=collector.pair_trees,
        chosen_levels=collector.chosen_levels,
        cluster_counts=collector.cluster_counts,
        segments=collector.segments,
        states=collector.states,
        failed_paths=collector.failed_paths,
        failed_low=np.asarray(collector.failed_low, dtype=np.int64),
    )


def _from_solution(
    collector: _Collector,
    result: SearchResult,
    settings: SamplingSettings,
    length_statistics: tuple[float, float],
    rng: np.random.Generator,
) -> None:
    ids = collector.add_states(result.states)
    mean, std = length_statistics
    for start, end in segment_bounds(len(result.actions), mean, std, rng, settings.segmentation):
        collector.add_path(ids[start : end + 1], result.actions[start:end], float(result.expanded),
                           settings.subgoal_target)  # fmt: skip
        collector.segments += 1


def _from_tree_draw(collector: _Collector, draw: TreeDraw, weight: float) -> None:
    collector.chosen_levels.append(draw.chosen_level)
    collector.cluster_counts.append(draw.cluster_count)
    collector.levels_used += draw.levels_used
    collector.pair_trees += [collector.failed_trees] * len(draw.paths)
    collector.failed_trees += 1
    for states, actions in draw.paths:
        collector.add_path(collector.add_states(states), actions, weight, high_labels=None)
        collector.pair_lengths.append(len(actions))
