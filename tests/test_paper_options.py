"""Options that switch from the reference code's behaviour to the paper's, each checked by hand.

- the codebook kept in use (`subgoal.codebook`), against the reference's collapse;
- lazy duplicate detection (`search.duplicates = "lazy"`, the paper's Algorithm 5);
- LevinTS ordered by (d + 1)/π (`search.levin_plus_one`);
- the improved Levin loss (`learner.loss = "improved-levin"`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pytest
import torch

from sgps.domains import get_domain
from sgps.errors import ConfigError
from sgps.search import make_algorithm, search, search_lockstep
from sgps.search.engine import SearchResult
from sgps.training.config import resolve_config
from sgps.training.methods.flat.samples import levin_weight, solution_samples
from sgps.training.methods.subgoal.learner import SgpsDeprecationWarning, SubgoalSettings
from sgps.training.methods.subgoal.samples import collect_samples
from sgps.training.setup import build_flat_method, build_subgoal_method


def tiny_subgoal_method(domain, example, **subgoal):
    overrides = {"run": {"algorithm": "phs-sg", "device": "cpu"}, "subgoal": subgoal}
    return build_subgoal_method(domain, example, resolve_config("tiny", overrides=overrides))


@pytest.mark.parametrize(("codebook", "used"), [("standardised", 4), ("reference", 1)])
def test_the_default_codebook_stays_in_use_and_the_reference_one_collapses(codebook, used):
    domain = get_domain("boxworld")
    levels = [domain.generate(seed) for seed in range(8)]
    method = tiny_subgoal_method(domain, levels[0], codebook=codebook)
    results = search_lockstep(domain, levels, method.algorithm, method.evaluator(), budget=150, record_graph=True)
    samples = collect_samples(domain, results, method.settings.sampling(), (5.0, 1.0), np.random.default_rng(0))
    report = method.learner.update(samples, results, domain)
    counts = [int(c) for c in report["code_counts"].split()]
    assert sum(counts) == len(samples.vq) and report["codes_used"] == used
    assert math.isclose(report["code_perplexity"], 1.0) == (used == 1)
    vectors = method.model.vqvae.codebook.vectors
    if codebook == "reference":  # every code but the one in use was set to the zero vector
        dead = [k for k in range(4) if counts[k] == 0]
        assert torch.count_nonzero(vectors[dead]) == 0
    assert report["high_entropy"] is None  # no solved search, so no high-level samples


def test_old_option_spellings_still_work_with_a_deprecation_message():
    with pytest.warns(SgpsDeprecationWarning) as caught:
        settings = SubgoalSettings(conditioning="code", hierarchy="paper")
    messages = [str(warning.message) for warning in caught]
    assert messages == ["subgoal.conditioning = 'code' is deprecated; write 'code-vector'",
                        "subgoal.hierarchy = 'paper' is deprecated; write 'louvain'"]  # fmt: skip
    assert (settings.conditioning, settings.hierarchy) == ("code-vector", "louvain")


class Line(NamedTuple):
    position: int


class Corridor:
    """Three cells in a row, walls at both ends, no goal: actions 0 (left) and 1 (right)."""

    num_actions = 2

    def step(self, state: Line, action: int) -> Line:
        return Line(min(2, max(0, state.position + (1 if action else -1))))

    def key(self, state: Line) -> Line:
        return state

    def is_goal(self, state: Line) -> bool:
        return False

    def is_dead(self, state: Line) -> bool:
        return False


def uniform(states):
    return np.full((len(states), 2), math.log(0.5)), None


def test_lazy_duplicate_detection_counts_skipped_pops_as_the_paper_does():
    # Eager: 0, 1, 2 each expanded once; every rediscovery is pruned at generation.
    eager = search(Corridor(), Line(0), make_algorithm("bfs"), uniform)
    assert (eager.status, eager.expanded, eager.generated) == ("no_solution", 3, 3)
    # Lazy, by hand, breadth first (ties by generation order):
    # pop 0 [1] -> children 0 (a), 1 (b); pop a [2] skipped; pop b [3] -> 0 (c), 2 (d);
    # pop c [4] skipped; pop d [5] -> 1 (e), 2 (f); pop e [6], f [7] skipped; open empty.
    lazy = search(Corridor(), Line(0), make_algorithm("bfs", duplicates="lazy"), uniform)
    assert (lazy.status, lazy.expanded, lazy.generated) == ("no_solution", 7, 7)
    # The skipped pops count against the budget: budget 4 ends at the 4th pop (c).
    capped = search(Corridor(), Line(0), make_algorithm("bfs", duplicates="lazy"), uniform, budget=4)
    assert (capped.status, capped.expanded) == ("budget", 4)


def test_lazy_search_solves_and_its_tree_replays():
    domain = get_domain("tsp")
    level = domain.generate(3)
    lazy = search(domain, level, make_algorithm("levin", duplicates="lazy"), uniform_policy(domain), record_graph=True)
    eager = search(domain, level, make_algorithm("levin"), uniform_policy(domain))
    assert lazy.solved and eager.solved and lazy.expanded >= eager.expanded
    state = lazy.states[0]
    for action in lazy.actions:
        state = domain.step(state, action)
    assert domain.is_goal(state)


def uniform_policy(domain):
    def evaluate(states):
        return np.full((len(states), domain.num_actions), -math.log(domain.num_actions)), None

    return evaluate


def test_search_options_reach_the_algorithm_from_the_config():
    domain = get_domain("tsp")
    level = domain.generate(0)
    search_options = {"levin_plus_one": True, "duplicates": "lazy"}
    overrides = {"run": {"algorithm": "levin", "device": "cpu"}, "search": search_options}
    method = build_flat_method(domain, level, resolve_config("tiny", overrides=overrides))
    assert method.algorithm.lazy_duplicates
    assert method.algorithm.cost(2, math.log(0.5), 0.0) == pytest.approx(math.log(3) + math.log(2))  # (d+1)/π
    default = build_flat_method(domain, level, resolve_config("tiny", overrides={"run": {"algorithm": "levin"}}))
    assert not default.algorithm.lazy_duplicates
    assert default.algorithm.cost(2, math.log(0.5), 0.0) == pytest.approx(math.log(2) + math.log(2))  # g/π


def test_improved_levin_weight_by_hand():
    # n = 99 expansions, T = 9 actions, π_sol = 0.01: n' = 100, d = 10, a = ln(11/100) / ln(0.01).
    expected = 100 * math.log(11 / 100) / math.log(0.01)
    assert levin_weight(99, 9, math.log(0.01), "improved-levin") == pytest.approx(expected)
    assert expected == pytest.approx(47.93, abs=0.01)
    assert levin_weight(99, 9, math.log(0.01)) == 99.0  # the plain Levin loss
    assert levin_weight(3, 9, math.log(0.01), "improved-levin") == 0.0  # n' < d + 1: a clamps at 0
    assert levin_weight(99, 9, 0.0, "improved-levin") == 0.0  # π_sol = 1
    assert levin_weight(99, 9, None, "improved-levin") == 99.0  # no path probability (WA*)


def test_the_loss_option_weights_the_solution_samples():
    domain = get_domain("tsp")
    level = domain.generate(0)
    result = search(domain, level, make_algorithm("levin"), uniform_policy(domain))
    assert result.solved
    plain = solution_samples(domain, [result])
    improved = solution_samples(domain, [result, _unsolved()], "improved-levin")
    assert (plain.weights == result.expanded).all()
    weight = levin_weight(result.expanded, result.length, result.solution_log_prob, "improved-levin")
    np.testing.assert_allclose(improved.weights, weight, rtol=1e-6)
    with pytest.raises(ConfigError, match=r"learner\.loss must be one of levin, improved-levin"):
        resolve_config("tiny", overrides={"learner": {"loss": "squared"}})


def _unsolved() -> SearchResult:
    return SearchResult("budget", None, None, 10, 10, 0.0, None)
