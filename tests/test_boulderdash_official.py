"""BoulderDash against the official simulator on every element and parameter: replay recorded traces.

tests/data/boulderdash_official_traces.jsonl.gz was recorded from the official code
(tuero/boulderdash_cpp) by tools/reference/record_boulderdash.py: random walks on
random levels holding all 50 cell codes, with gravity on and off and each game
parameter varied. After every step the grid, the agent, the diamonds collected, the
agent's fate, the magic walls' steps and state, the blob swap and the random state
must equal the official ones, and the observation the official observation (recorded
where the official one is defined: not for the in-dirt codes 47-49).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from sgps.domains import get_domain
from sgps.domains.boulderdash import NUM_CODES, BoulderDash, rules_of
from sgps.domains.boulderdash.scan import NO_SWAP, splitmix64

from official_traces import replay, trace_records


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
