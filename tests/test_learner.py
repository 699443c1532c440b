"""Solution samples and the flat learner: alignment, and that learning reduces search effort."""

from __future__ import annotations

import numpy as np
import torch

from sgps.domains import get_domain
from sgps.models import FlatNetwork, FlatNetworkConfig, NetworkEvaluator
from sgps.search import UniformPolicy, make_algorithm, search, search_lockstep
from sgps.training import FlatLearner, LearnerConfig, solution_samples


def test_samples_keep_states_actions_and_targets_aligned():
    domain = get_domain("tsp")
    levels = [domain.generate(seed) for seed in range(3)]
    results = search_lockstep(domain, levels, make_algorithm("levin"), UniformPolicy(domain), budget=2)
    results += [search(domain, level, make_algorithm("levin"), UniformPolicy(domain)) for level in levels]
    samples = solution_samples(domain, results)
    solved = [r for r in results if r.solved]
    assert len(samples) == sum(r.length for r in solved)
    offset = 0
    for result in solved:
        for t, (state, action) in enumerate(zip(result.states[:-1], result.actions, strict=True)):
            np.testing.assert_array_equal(samples.observations[offset + t], domain.observe([state])[0])
            assert samples.actions[offset + t] == action
            assert samples.cost_to_go[offset + t] == result.length - t
            assert samples.weights[offset + t] == result.expanded
        offset += result.length
    assert solution_samples(domain, results[:3]) is None  # budget 2 solves nothing


def test_learning_from_solutions_reduces_expansions_on_unseen_problems():
    domain = get_domain("tsp")
    train = [domain.generate(seed) for seed in range(24)]
    validation = [domain.generate(seed) for seed in range(1000, 1012)]
    torch.manual_seed(0)
    network = FlatNetwork(FlatNetworkConfig(domain.observation_shape(train[0]), 4, channels=16, blocks=1))
    evaluator = NetworkEvaluator(domain, network)
    phs = make_algorithm("phs")

    def validation_expansions() -> int:
        return sum(r.expanded for r in search_lockstep(domain, validation, phs, evaluator, budget=4000))

    before = validation_expansions()
    learner = FlatLearner(
        network, LearnerConfig(learning_rate=3e-3, epochs=10, minibatch=64), torch.Generator().manual_seed(0)
    )
    for _ in range(3):
        results = search_lockstep(domain, train, phs, evaluator, budget=4000)
        assert learner.update(solution_samples(domain, results)) is not None
    after = validation_expansions()
    assert after < 0.6 * before, (before, after)
