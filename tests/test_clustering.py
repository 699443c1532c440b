"""Cluster hierarchies of search graphs, pair sampling from failed trees, and path segmentation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sgps.domains import get_domain
from sgps.search import UniformPolicy, make_algorithm, search
from sgps.training.methods.subgoal.clustering import (
    ClusterLevel,
    WeightedGraph,
    aggregate,
    build_hierarchy,
    choose_level,
    louvain_phase,
    star_groups,
)
from sgps.training.methods.subgoal.samples import LengthBuffer, sample_tree_pairs, segment_bounds


def two_cliques(size: int = 6) -> np.ndarray:
    first = list(itertools.combinations(range(size), 2))
    second = list(itertools.combinations(range(size, 2 * size), 2))
    return np.array([*first, *second, (size - 1, size)])


@pytest.mark.parametrize("mode", ["reference", "louvain"])
def test_louvain_separates_two_cliques_joined_by_one_edge(mode):
    edges = two_cliques()
    membership = louvain_phase(WeightedGraph.from_edges(12, edges), 1.0, seed=0)
    assert len(set(membership[:6])) == 1 and len(set(membership[6:])) == 1 and membership[0] != membership[6]
    levels = build_hierarchy(12, edges, budget=4000, mode=mode)
    split = next(level for level in levels if level.num_clusters == 2)
    assert set(split.membership[:6]) != set(split.membership[6:])
    assert [list(n) for n in split.neighbours] in ([[1], [0]], [[0, 1], [0, 1]])


def test_star_groups_take_seeds_in_ascending_order_with_their_free_neighbours():
    path = WeightedGraph.from_edges(5, np.array([(0, 1), (1, 2), (2, 3), (3, 4)]))
    np.testing.assert_array_equal(star_groups(path), [0, 0, 1, 1, 2])  # seeds 0, 2, 4
    merged = aggregate(path, star_groups(path), keep_internal=True)
    edges = {(int(u), int(v)): float(w) for u, v, w in zip(merged.sources, merged.targets, merged.weights, strict=True)}
    assert edges == {(0, 0): 2.0, (0, 1): 1.0, (1, 1): 2.0, (1, 2): 1.0}  # internal edges count twice


def test_the_code_hierarchy_has_the_budget_dependent_star_levels_and_ends_in_one_cluster():
    rng = np.random.default_rng(0)
    parents = [int(rng.integers(i)) for i in range(1, 400)]  # a random tree of 400 nodes
    edges = np.array([(p, i + 1) for i, p in enumerate(parents)])
    for budget, stars in ((4000, 2), (8000, 3), (16000, 4)):
        levels = build_hierarchy(400, edges, budget=budget)
        sizes = [level.num_clusters for level in levels]
        assert sizes[0] == 400 and sizes[-1] == 1
        assert all(a > b for a, b in itertools.pairwise(sizes)), sizes
        assert all(level.neighbours[0].tolist() for level in levels[1 : stars + 1])  # stars keep self-loops
    again = build_hierarchy(400, edges, budget=4000)
    for a, b in zip(levels[:2], again[:2], strict=True):
        np.testing.assert_array_equal(a.membership, b.membership)


def test_level_choice_follows_the_rule_and_never_picks_a_level_without_neighbours():
    levels = build_hierarchy(12, two_cliques(), budget=4000, mode="louvain")  # G0, two clusters
    single = ClusterLevel(np.zeros(12, dtype=np.int64), (np.zeros(0, dtype=np.int64),))  # no self-loop
    levels = [*levels, single, single]
    assert choose_level(levels, 0) == len(levels) // 2 - 1 == 1
    assert choose_level(levels, 1) == 1
    assert not single.can_sample()
    assert choose_level(levels, 3) == choose_level(levels, 99) == 1


@pytest.fixture(scope="module")
def failed_tree():
    domain = get_domain("boxworld")
    level = domain.generate(7)
    result = search(domain, level, make_algorithm("levin"), UniformPolicy(domain), budget=400, record_graph=True)
    assert result.status == "budget"
    return domain, result


@pytest.mark.parametrize("mode", ["reference", "louvain"])
def test_pairs_come_from_neighbouring_clusters_in_ancestor_relation_and_their_paths_replay(failed_tree, mode):
    domain, result = failed_tree
    graph = result.graph
    levels = build_hierarchy(graph.num_nodes, graph.edges(), budget=result.expanded, mode=mode, seed=1)
    rng = np.random.default_rng(0)
    for index in range(min(len(levels) - 1, 4)):
        level = levels[index]
        pairs = sample_tree_pairs(graph, level, 20, rng)
        assert pairs, f"level {index} gave no pairs"
        for ancestor, descendant in pairs:
            assert ancestor != descendant and graph.is_ancestor(ancestor, descendant)
            a, d = level.membership[ancestor], level.membership[descendant]
            assert d in level.neighbours[a] and a in level.neighbours[d]
            states, actions = graph.path(ancestor, descendant)
            assert len(actions) == graph.depths[descendant] - graph.depths[ancestor] >= 1
            state = states[0]
            for action, expected in zip(actions, states[1:], strict=True):
                state = domain.step(state, action)
                assert domain.key(state) == domain.key(expected)
            assert domain.key(state) == domain.key(graph.states[descendant])


def test_pair_distance_grows_with_the_level(failed_tree):
    _, result = failed_tree
    graph = result.graph
    levels = build_hierarchy(graph.num_nodes, graph.edges(), budget=result.expanded, seed=1)
    rng = np.random.default_rng(0)
    means = []
    for level in levels[:4]:
        pairs = sample_tree_pairs(graph, level, 200, rng, max_draws=20_000)
        means.append(np.mean([graph.depths[d] - graph.depths[a] for a, d in pairs]))
    assert means[0] == 1.0 and all(a < b for a, b in itertools.pairwise(means)), means


@pytest.mark.parametrize("mode", ["fixed", "compat"])
def test_segments_cover_the_path_in_order(mode):
    rng = np.random.default_rng(0)
    for length in (1, 2, 7, 30):
        segments = segment_bounds(length, 4.0, 2.0, rng, mode)
        assert segments[0][0] == 0 and segments[-1][1] == length
        assert all(a[1] == b[0] for a, b in itertools.pairwise(segments))
        if mode == "fixed":
            assert all(j > i for i, j in segments)


def test_fixed_segments_follow_the_buffer_statistics_and_compat_keeps_the_reference_quirks():
    rng = np.random.default_rng(1)
    lengths = [j - i for _ in range(300) for i, j in segment_bounds(200, 6.0, 1.0, rng, "fixed")[:-1]]
    assert np.mean(lengths) == pytest.approx(6.0, abs=0.1)
    # compat: mean - 1 then 1 + floor, and std sqrt(sigma); the final boundary can repeat (zero-length segment)
    rng = np.random.default_rng(2)
    zero = [seg for _ in range(200) for seg in segment_bounds(12, 3.0, 0.0, rng, "compat") if seg[0] == seg[1]]
    assert zero and all(seg == (12, 12) for seg in zero)


def test_length_buffer_is_a_ring_with_population_statistics():
    buffer = LengthBuffer(capacity=3)
    assert buffer.statistics() == (5.0, 1.0)
    buffer.push([1, 2, 3, 10])  # 10 replaces 1
    assert sorted(buffer.lengths) == [2, 3, 10]
    mean, std = buffer.statistics()
    assert mean == pytest.approx(5.0) and std == pytest.approx(np.std([2, 3, 10]))
    restored = LengthBuffer(capacity=3)
    restored.load_state_dict(buffer.state_dict())
    restored.push([4])
    buffer.push([4])
    assert restored.lengths == buffer.lengths
