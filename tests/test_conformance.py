"""Conformance with the reference simulators: replay every recorded trace.

For every walk and solution record of shared/reference (levels 0-59 of the official
test sets), the state after each action (grid in level codes, agent, domain fields,
goal and terminal flags) and the observation's non-zero entries must equal the
reference's. The exact solver must find the recorded optimal lengths (on one standard
CraftWorld level in three: the other 40 go unchecked); where the reference BFS's effort is
small enough for a test, our BFS must reproduce its action sequence and its count of
generated states exactly (same successor order, same duplicate semantics). BoulderDash's
solver merges states that differ only in dug dirt, as the reference's supplementary BFS
does, and must reproduce that BFS's counts.
"""

from __future__ import annotations

import pytest

from sgps.domains import get_domain, solve

from traces import LEVEL_SETS, parse_level, records, replay

CASES = [(domain, level_set) for domain, sets in LEVEL_SETS.items() for level_set in sets]
#: Largest reference BFS (children generated) re-run with our BFS in the tests, per set.
BFS_GENERATED_LIMIT = {"craftworld_test_100": 400_000, "craftworld_test_100_hard": 1_400_000}
DEFAULT_BFS_GENERATED_LIMIT = 150_000
#: Sets whose levels are checked one in n only: each of standard CraftWorld's 60 levels costs
#: the reference BFS 0.34-0.37 M children (our BFS took 41 s for all 60 on the loaded 2-core
#: machine); 20 levels show the same successor order and duplicate semantics (the hard set's 4
#: levels within its limit, at up to 1.4 M each, are all re-run).
BFS_LEVEL_STRIDE = {"craftworld_test_100": 3}
#: State cap of the A* runs that check the other optimal lengths (where the domain's
#: heuristic makes A* cheaper than BFS; CraftWorld's does not, see docs/domains.md).
ASTAR_STATE_LIMIT = 400_000
ASTAR_DOMAINS = {"tsp", "boxworld", "sokoban"}
#: Levels the reference solved only with its dirt-blind supplementary BFS.
SUPPLEMENTARY = "supplementary_dirt_abstraction_bfs"


@pytest.mark.parametrize(("domain_name", "level_set"), CASES)
@pytest.mark.parametrize("kind", ["walks", "solutions"])
def test_replay_matches_reference(shared, domain_name, level_set, kind):
    domain = get_domain(domain_name)
    replayed = 0
    for record in records(shared / "reference", kind, level_set):
        if not record.get("states"):
            continue
        problems = replay(domain, record)
        assert not problems, "\n".join(problems)
        replayed += 1
    assert replayed >= 20


def test_sokoban_full_observation_matches_reference(shared):
    domain = get_domain("sokoban", observation="full")
    for k, record in enumerate(records(shared / "reference", "walks", "sokoban_unfiltered_test_100")):
        if k % 3 == 0:  # one walk per level keeps this check short
            problems = replay(domain, record)
            assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("domain_name", "level_set"), CASES)
def test_optimal_lengths_match_reference(shared, domain_name, level_set):
    domain = get_domain(domain_name)
    limit = BFS_GENERATED_LIMIT.get(level_set, DEFAULT_BFS_GENERATED_LIMIT)
    stride = BFS_LEVEL_STRIDE.get(level_set, 1)
    checked = 0
    for record in records(shared / "reference", "solutions", level_set):
        if record["solution_length"] is None or record["level_index"] % stride:
            continue
        state = parse_level(domain, record["level"])
        where = f"{level_set} level {record['level_index']}"
        if domain_name == "boulderdash":
            result = solve(domain, state, method="bfs")
            assert result.length == record["solution_length"], where
            assert result.generated == record["supplementary_bfs"]["generated"], where
            if record["solved_by"] == SUPPLEMENTARY:
                assert list(result.actions) == record["actions"], where
        elif record["generated"] <= limit:
            result = solve(domain, state, method="bfs")
            assert list(result.actions) == record["actions"], where
            assert result.generated == record["generated"], where
        elif domain_name in ASTAR_DOMAINS:
            result = solve(domain, state, method="astar", max_states=ASTAR_STATE_LIMIT)
            if result.status == "cap":
                continue
            assert result.length == record["solution_length"], where
        else:
            continue
        checked += 1
    assert checked >= 3
