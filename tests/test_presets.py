"""The presets' compute matching: a π^SG evaluation does at most 1.2x a flat one's arithmetic.

Counted with `sgps.models.cost` (exact FLOPs, the same on every machine), for every domain
and the presets a CPU runs (`tiny`, `cpu`); docs/subgoals.md records the measured times.
"""

from __future__ import annotations

import pytest

from sgps.domains import domain_names, get_domain
from sgps.domains.generation import generate_levels, resolve_params
from sgps.models.cost import flops_per_state
from sgps.training.config import resolve_config
from sgps.training.setup import build_method, subgoal_flop_ratio

MATCHED = 1.2


@pytest.mark.parametrize("preset", ["tiny", "cpu"])
@pytest.mark.parametrize("name", domain_names())
def test_a_subgoal_evaluation_costs_at_most_1_2_flat_evaluations(name, preset):
    domain = get_domain(name)
    levels = generate_levels(domain, resolve_params(domain, "standard"), 0, 4)
    ratio = subgoal_flop_ratio(domain, levels, preset)
    assert 0 < ratio <= MATCHED, f"{name} {preset}: {ratio:.3f}x"


def test_the_count_is_per_state_and_refuses_an_empty_batch():
    domain = get_domain("tsp")
    levels = [domain.generate(seed) for seed in range(4)]
    config = resolve_config("tiny", overrides={"run": {"device": "cpu"}})
    evaluator = build_method(domain, levels[0], config).evaluator()
    assert flops_per_state(evaluator, levels) == pytest.approx(flops_per_state(evaluator, levels[:1]))
    with pytest.raises(ValueError, match="empty"):
        flops_per_state(evaluator, [])
