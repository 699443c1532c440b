"""BoulderDash against the official simulator on every element and parameter: replay recorded traces.

tests/data/boulderdash_official_traces.jsonl.gz was recorded from the official code
(tuero/boulderdash_cpp) by tools/reference/record_boulderdash.py: random walks on
random levels holding all 50 cell codes, with gravity on and off and each game
parameter varied; tests/data/boulderdash_official_cases.jsonl.gz (``--cases``) holds
fixed levels and actions that random walks seldom meet (a butterfly moving onto the
agent in the exit, the butterfly's move wrapping round the left and right edges).
After every step the grid, the agent, the diamonds collected, the agent's fate flags,
the magic walls' steps and state, the blob swap and the random state must equal the
official ones, and the observation the official observation (recorded where the
official one is defined: not for the in-dirt codes 47-49).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from sgps.domains import get_domain
from sgps.domains.boulderdash import BUTTERFLIES, EMPTY, NUM_CODES, BoulderDash, rules_of
from sgps.domains.boulderdash.scan import NO_SWAP, splitmix64

from helpers import run
from official_traces import CASES, find_case, read_records, replay, trace_records

UP, RIGHT, DOWN, LEFT = range(4)


def test_traces_replay_exactly():
    domain = get_domain("boulderdash")
    failures = []
    for number, record in enumerate(trace_records()):
        failures.extend(replay(domain, number, record))
        if len(failures) > 20:
            break
    assert not failures, "\n".join(failures)


def test_traces_exercise_every_code_and_parameter():
    records = trace_records()
    states_with = Counter(code for record in records for state in record["states"] for code in
                          {ord(char) - 48 for char in state["grid"]})  # fmt: skip
    assert [code for code in range(NUM_CODES) if not states_with[code]] == []
    defaults = BoulderDash().parse([1, 1, 0, 0])
    for name, default in zip(rules_of(defaults)._fields[1:], rules_of(defaults)[1:], strict=True):
        assert any(record["params"][name] != default for record in records), name
    assert {record["params"]["gravity"] for record in records} == {False, True}
    assert sum(len(record["actions"]) >= 200 for record in records) >= 20


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**63 - 1])
def test_random_state_starts_as_the_official_splitmix(seed):
    state = BoulderDash().parse([1, 2, 0, 0, 43, 0, 140, 20, 160000, 0, 1, 1, seed])
    assert state.hidden.random_state == splitmix64(seed)
    assert state.hidden.blob_swap == NO_SWAP
    assert splitmix64(0) == 0xE220A8397B1DCDAF  # the official default state
    assert np.array_equal(BoulderDash().observe([state])[0].argmax(axis=0), [[0, 30]])


def parse_line(line: str):
    return BoulderDash().parse([int(field) for field in line.split("|")])


#: The default parameters but butterfly_move_ver 2 (a blocked butterfly turns and moves at once).
INSTANT = "0|140|20|160000|0|1|2|0"


@pytest.mark.parametrize(
    "line",
    [
        f"3|1|0|15|8|0|{INSTANT}",  # 3x1: the agent enters the exit below the butterfly, at the grid's edge
        f"3|3|0|19|19|19|8|14|19|0|19|19|{INSTANT}",  # 3x3: the butterfly boxed in by steel, not at an edge
    ],
)
def test_a_butterfly_moving_onto_the_agent_in_the_exit_leaves_it_solved_and_alive(line):
    """The official step keeps the agent's fate as flags set during the step, not read off the grid after it."""
    domain = get_domain("boulderdash")
    record = find_case(line, [UP])
    assert replay(domain, 0, record) == []
    official = record["states"][-1]
    assert official["in_exit"] and official["alive"]
    end = domain.step(parse_line(line), UP)
    assert end.grid[end.agent] in BUTTERFLIES  # the butterfly overwrote the agent in the exit ...
    assert domain.is_goal(end) and not domain.is_dead(end)  # ... which is still solved and alive
    assert domain.heuristic(end) == 0 and all(domain.step(end, action) is end for action in range(4))


WRAP_LEFT = f"4|5|1|19|19|19|19|19|19|7|5|1|0|14|19|2|1|1|19|19|19|19|19|{INSTANT}"
WRAP_RIGHT = f"4|5|1|19|19|19|19|19|19|1|1|19|16|0|2|5|7|19|19|19|19|19|19|{INSTANT}"


@pytest.mark.parametrize(
    ("line", "actions", "butterfly", "agent"),
    [
        (WRAP_LEFT, [RIGHT, LEFT, LEFT, LEFT], 10, 9),  # column 0 of row 2, left: the last cell of row 1
        (WRAP_RIGHT, [UP, RIGHT, RIGHT, RIGHT], 9, 10),  # the last column of row 1, right: the first cell of row 2
    ],
)
def test_the_instant_butterfly_wraps_round_the_left_and_right_edges_onto_the_agent(line, actions, butterfly, agent):
    """Officially the move adds the direction's offset to the flat index: at a side edge it lands in the next row.

    The agent there is overwritten but stays alive (the butterfly's neighbour test, bounded
    to the grid, did not see it), and the agent's actions move what its cell holds: the
    butterfly collects the diamond and enters the exit, which solves the level.
    """
    domain = get_domain("boulderdash")
    record = find_case(line, actions)
    assert replay(domain, 0, record) == []
    start = parse_line(line)
    assert start.grid[butterfly] in BUTTERFLIES and start.agent == agent
    after = domain.step(start, actions[0])
    assert after.grid[butterfly] == EMPTY and after.grid[agent] in BUTTERFLIES and after.agent == agent
    assert not domain.is_dead(after) and not domain.is_goal(after) and record["states"][1]["alive"]
    end = run(domain, after, actions[1:])
    assert end.gems == 1 and domain.is_goal(end) and record["states"][-1]["in_exit"]


def test_every_recorded_case_replays_and_ends_where_its_episode_ends():
    domain = get_domain("boulderdash")
    cases = read_records(CASES)
    assert len(cases) >= 7 and all(record["case"] for record in cases)
    for record in cases:
        *playing, last = record["states"]
        assert all(state["alive"] and not state["in_exit"] for state in playing), record["case"]
        assert not last["alive"] or last["in_exit"], record["case"]
    assert any(not record["states"][-1]["alive"] for record in cases)  # the wrapped butterfly can still kill
    assert sum(replay(domain, n, record) == [] for n, record in enumerate(cases)) == len(cases)
