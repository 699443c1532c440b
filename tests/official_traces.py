"""Reading and replaying the BoulderDash traces recorded from the official simulator (tests/data).

tools/reference/record_boulderdash.py writes one JSON line per random walk (TRACES) or
fixed case (CASES, recorded with ``--cases``; each names itself in a ``case`` field):
the level string, the game parameters, the actions, and after every step the grid (one
character per cell, ``chr(48 + code)``), the official packed state's agent, gems, fate
flags (alive, in the exit), magic wall and blob fields and random state, and the
observation's channel per cell (null where the official observation is undefined:
states holding codes 47-49).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from sgps.domains.animation import trajectory
from sgps.domains.boulderdash import PARAMETER_FIELDS, BoulderDash, DynamicState

TRACES = Path(__file__).parent / "data" / "boulderdash_official_traces.jsonl.gz"
CASES = Path(__file__).parent / "data" / "boulderdash_official_cases.jsonl.gz"
MILLION = 1_000_000


def read_records(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def trace_records() -> list[dict[str, Any]]:
    """Every recorded walk and case: the random walks first, then the fixed cases."""
    return read_records(TRACES) + read_records(CASES)


def find_case(line: str, actions: list[int]) -> dict[str, Any]:
    """The recorded case of `line` (an sgps level line: the official level, then the parameter fields) and `actions`."""
    fields = [int(field) for field in line.split("|")]
    for record in read_records(CASES):
        if level_fields(record) == fields and record["actions"] == actions:
            return record
    raise LookupError(f"no recorded case plays {line} with actions {actions} (tools/reference/record_boulderdash.py)")


def level_fields(record: dict[str, Any]) -> list[int]:
    """The level line's fields with the recorded parameters appended as sgps parameter fields."""
    params = record["params"]
    extra = {**params, "blob_max_percentage_millionths": round(params["blob_max_percentage"] * MILLION)}
    return [*(int(field) for field in record["level"].split("|")), *(int(extra[name]) for name in PARAMETER_FIELDS)]


def ours(domain: BoulderDash, state: Any) -> dict[str, Any]:
    """Our state in the trace's terms (the official packed state's fields)."""
    hidden = state.hidden
    return {
        "grid": "".join(chr(48 + code) for code in state.grid),
        "agent": state.agent,
        "gems": state.gems,
        "alive": not domain.is_dead(state),
        "in_exit": domain.is_goal(state),
        "magic_wall_steps": hidden.magic_wall_steps,
        "magic_active": hidden.magic_active,
        "blob_swap": hidden.blob_swap,
        "random_state": hidden.random_state,
    }


def replay(domain: BoulderDash, number: int, record: dict[str, Any]) -> list[str]:
    start = domain.parse(level_fields(record))
    assert isinstance(start, DynamicState)
    states = trajectory(domain, start, record["actions"])
    observations = domain.observe(states)
    for t, (state, observation, expected) in enumerate(zip(states, observations, record["states"], strict=True)):
        got = ours(domain, state)
        problems = [f"{key}: ours {got[key]!r}, official {expected[key]!r}" for key in got if got[key] != expected[key]]
        if expected["obs"] is not None:
            channels = "".join(chr(48 + int(c)) for c in observation.reshape(len(observation), -1).argmax(axis=0))
            if channels != expected["obs"] or not (observation.sum(axis=0) == 1).all():
                problems.append("observation differs")
        if problems:
            return [f"walk {number} ({record['params']}) step {t}: {problem}" for problem in problems]
    return []
