"""`Domain.may_reach`: never wrong on real trajectories, and it does reject what cannot be reached.

Soundness is what matters (HIPS-ε drops the subgoals it rejects without a rollout), so
every pair (earlier state, later state) along the reference simulators' walks and
solutions must be accepted. Usefulness: each domain rejects some pairs, e.g. a later
state back towards an earlier one after an item was used up.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sgps.domains import get_domain
from sgps.domains.base import Domain
from sgps.domains.tsp import AGENT, WALL

from traces import LEVEL_SETS, parse_level, records

#: Walks and solutions read per level set (the first ones: several walks of each of the first levels).
RECORDS_PER_KIND = 30
CASES = [(domain, level_set) for domain, sets in LEVEL_SETS.items() for level_set in sets]


def trajectory_observations(domain: Domain, record: dict) -> np.ndarray:
    state = parse_level(domain, record["level"])
    states = [state]
    for action in record["actions"]:
        state = domain.step(state, action)
        states.append(state)
    return domain.observe(states)


def every_later(domain: Domain, observations: np.ndarray, stride: int) -> tuple[bool, bool]:
    """(every (earlier, later) pair accepted, some (later, earlier) pair rejected), from every `stride`-th state."""
    forward_ok, backward_rejected = True, False
    for i in range(0, len(observations), stride):
        later = observations[i:]
        earlier = np.repeat(observations[i : i + 1], len(later), axis=0)
        forward_ok &= bool(domain.may_reach(earlier, later).all())
        backward_rejected |= not bool(domain.may_reach(later, earlier).all())
    return forward_ok, backward_rejected


@pytest.mark.parametrize(("domain_name", "level_set"), CASES)
def test_every_later_state_of_a_reference_trajectory_may_be_reached(shared, domain_name, level_set):
    domains = [get_domain(domain_name)]
    if domain_name == "sokoban":
        domains.append(get_domain("sokoban", observation="full"))
    for domain in domains:
        checked, rejected_somewhere = 0, False
        for kind in ("walks", "solutions"):
            for record in itertools.islice(records(shared / "reference", kind, level_set), RECORDS_PER_KIND):
                if not record.get("actions"):
                    continue
                sound, rejected = every_later(domain, trajectory_observations(domain, record), stride=5)
                assert sound, f"{domain_name} level {record['level_index']} ({kind}): a reached state was rejected"
                rejected_somewhere |= rejected
                checked += 1
        assert checked >= RECORDS_PER_KIND
        if domain_name != "sokoban":  # Sokoban's moves are reversible as far as these invariants go
            assert rejected_somewhere, f"{domain_name}: no earlier state was ever ruled out from a later one"


@pytest.mark.parametrize("domain_name", sorted(LEVEL_SETS))
def test_broken_invariants_are_rejected(shared, domain_name):
    domain = get_domain(domain_name)
    record = next(records(shared / "reference", "solutions", LEVEL_SETS[domain_name][0]))
    start = trajectory_observations(domain, record)[:1]
    no_agent = start.copy()
    no_agent[:, 0] = 0  # channel 0 is the agent in Sokoban, Box-World's colour 0, ...
    moved = np.roll(start, 1, axis=3)  # the whole board shifted: walls move
    assert domain.may_reach(start, start).all()
    assert not domain.may_reach(start, moved).any()
    if domain_name == "sokoban":
        assert not domain.may_reach(start, no_agent).any()
    if domain_name == "tsp":
        two_agents = start.copy()
        empty = np.argwhere((start[0].sum(axis=0) == 1) & (start[0, 0] == 1))[0]  # an empty cell
        two_agents[0, :, empty[0], empty[1]] = 0
        two_agents[0, AGENT, empty[0], empty[1]] = 1
        assert not domain.may_reach(start, two_agents).any()
        no_walls = start.copy()
        no_walls[:, WALL] = 0
        assert start[:, WALL].any() and not domain.may_reach(start, no_walls).any()


def test_a_domain_without_invariants_rejects_nothing():
    observations = np.zeros((3, 2, 4, 4), dtype=np.float32)
    assert Domain.may_reach(get_domain("tsp"), observations, observations[::-1]).all()
