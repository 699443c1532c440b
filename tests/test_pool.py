"""Searching with worker processes gives exactly the results of lockstep search in this process."""

from __future__ import annotations

import numpy as np

from sgps.domains import get_domain
from sgps.search import search_lockstep
from sgps.training.config import resolve_config
from sgps.training.pool import SearchPool
from sgps.training.setup import build_method


def test_pool_results_equal_in_process_lockstep_results_with_graphs_and_current_weights():
    domain = get_domain("boxworld")
    levels = [domain.generate(seed) for seed in range(5)]
    config = resolve_config("tiny", overrides={"run": {"algorithm": "phs-sg", "device": "cpu"}})
    method = build_method(domain, levels[0], config)
    for parameter in method.model.parameters():  # weights unlike a fresh build: workers must use these
        parameter.data.mul_(1.5)
    expected = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=120, record_graph=True)
    with SearchPool(2, domain, levels[0], config) as pool:
        got = pool.search(method, levels, budget=120, epsilon=0.01, record_graph=True)
        single = pool.search(method, levels[:1], budget=120, epsilon=0.01, record_graph=False)
    assert len(got) == 5 and single[0].expanded == expected[0].expanded
    for a, b in zip(got, expected, strict=True):
        assert (a.status, a.expanded, a.generated, a.actions) == (b.status, b.expanded, b.generated, b.actions)
        np.testing.assert_array_equal(a.graph.parents, b.graph.parents)
        np.testing.assert_array_equal(a.graph.rediscovered, b.graph.rediscovered)
