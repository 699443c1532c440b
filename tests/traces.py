"""Reading the reference conformance traces (shared/reference/*.jsonl.gz).

Each record holds a level string and the state after every action, recorded from the
reference C++ simulators; see shared/reference/README.md for the schema.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sgps.domains.animation import trajectory
from sgps.domains.base import Domain
from sgps.domains.boulderdash import BoulderDash
from sgps.domains.boxworld import NO_KEY, BoxWorld
from sgps.domains.craftworld import CraftWorld, inventory_items
from sgps.domains.sokoban import Sokoban
from sgps.domains.tsp import CITY, Tsp

#: Trace level sets of each domain (file stems after walks_/solutions_).
LEVEL_SETS = {
    "boulderdash": ["boulderdash_one_key_test_100", "boulderdash_test_hard_100"],
    "boxworld": ["boxworld_test_100"],
    "craftworld": ["craftworld_test_100", "craftworld_test_100_hard"],
    "sokoban": ["sokoban_unfiltered_test_100"],
    "tsp": ["tsp_test_10", "tsp_test_16"],
}


#: A state's observation entries in a trace line, ``"obs_nonzero":[[c,y,x],...]`` (or ``obs_compact_nonzero``).
NONZERO_FIELD = re.compile(r'"(obs(?:_compact)?_nonzero)":(\[[\[\]\d,]*\])')


class NonzeroEntries:
    """A trace state's list of non-zero observation indices, kept as its JSON text.

    These lists are about 80% of the traces' text, and turning them into Python lists was
    most of the conformance tests' time. `matches` compares them with an observation's
    indices as integer arrays, entry for entry and in order, which decides exactly what
    comparing the parsed lists decides; ``==`` with a list parses them."""

    __slots__ = ("text",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, text: str) -> None:
        self.text = text

    def to_list(self) -> list[list[int]]:
        return json.loads(self.text)

    def matches(self, indices: np.ndarray) -> bool:
        """Whether the entries are the rows of `indices` ([k, ndim] non-negative ints, as
        `np.argwhere` gives an observation's non-zero entries), in the same order."""
        count, ndim = indices.shape
        if not _rows_pattern(ndim).fullmatch(self.text):  # not k rows of `ndim` integers: compare the lists
            return self.to_list() == indices.tolist()
        values = np.fromstring(self.text.replace("[", "").replace("]", ""), dtype=np.int64, sep=",")
        return values.size == count * ndim and np.array_equal(values.reshape(count, ndim), indices)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NonzeroEntries):
            return self.text == other.text or self.to_list() == other.to_list()
        return self.to_list() == other

    def __repr__(self) -> str:
        return f"NonzeroEntries({self.text[:60]}{'...' if len(self.text) > 60 else ''})"


_ROWS: dict[int, re.Pattern[str]] = {}


def _rows_pattern(ndim: int) -> re.Pattern[str]:
    """``[]`` or ``[[i,j,...],[...],...]``: rows of exactly `ndim` non-negative integers, no spaces."""
    if ndim not in _ROWS:
        row = r"\[\d+" + r"(?:,\d+)" * (ndim - 1) + r"\]"
        _ROWS[ndim] = re.compile(rf"\[\]|\[{row}(?:,{row})*\]")
    return _ROWS[ndim]


def records(reference: Path, kind: str, level_set: str) -> Iterator[dict[str, Any]]:
    """The JSON records of ``<kind>_<level_set>.jsonl.gz`` (kind: walks or solutions); each state's
    ``obs_nonzero`` (``obs_compact_nonzero``) is a `NonzeroEntries`, read only when compared."""
    with gzip.open(reference / f"{kind}_{level_set}.jsonl.gz", "rt") as handle:
        for line in handle:
            yield parse_record(line)


def parse_record(line: str) -> dict[str, Any]:
    """One trace line as `records` gives it: the non-zero lists cut out as text, the rest parsed."""
    texts: list[str] = []

    def cut(match: re.Match[str]) -> str:
        texts.append(match.group(2))
        return f'"{match.group(1)}":{len(texts) - 1}'  # an integer where the reference always has a list

    record = json.loads(NONZERO_FIELD.sub(cut, line))
    restored = 0
    for state in record.get("states") or []:
        for key in ("obs_nonzero", "obs_compact_nonzero"):
            if type(state.get(key)) is int:
                state[key] = NonzeroEntries(texts[state[key]])
                restored += 1
    if restored != len(texts):  # a non-zero list somewhere else in the record: read the line as it is
        return json.loads(line)
    return record


def parse_level(domain: Domain[Any], level: str) -> Any:
    return domain.parse([int(field) for field in level.split("|")])


def domain_fields(domain: Domain[Any], state: Any) -> dict[str, Any]:
    """The trace fields beyond grid/agent/goal/observation, computed from our state."""
    if isinstance(domain, BoxWorld):
        return {
            "inventory": state.inventory,
            "has_key": state.inventory != NO_KEY,
            "key_indices": domain.loose_keys(state),
            "lock_indices": domain.locks(state),
        }
    if isinstance(domain, CraftWorld):
        return {"goal": state.board.extra, "inventory": inventory_items(state.inventory)}
    if isinstance(domain, BoulderDash):
        return {
            "gems_collected": state.gems,
            "gems_required": state.board.extra,
            "agent_alive": True,
            "agent_in_exit": domain.is_goal(state),
        }
    if isinstance(domain, Tsp):
        grid = state.grid
        return {
            "start_city_index": state.start,
            "visited_city_indices": sorted(c for c in state.board.extra.cities if grid[c] != CITY),
            "unvisited_city_indices": sorted(c for c in state.board.extra.cities if grid[c] == CITY),
        }
    if isinstance(domain, Sokoban):
        return {"box_indices": domain.boxes(state), "goal_indices": list(state.board.extra.goals)}
    return {}


def observation_key(domain: Domain[Any]) -> str:
    """The trace field holding the observation this domain object produces."""
    if isinstance(domain, Sokoban) and domain.observation == "compact":
        return "obs_compact"
    return "obs"


def mismatches(
    domain: Domain[Any], state: Any, observation: Any, record: dict[str, Any], nonzero: np.ndarray | None = None
) -> list[str]:
    """How our state and its observation differ from one trace state record (`nonzero`: the observation's
    ``np.argwhere``, when already known)."""
    problems = []
    ours = {
        "grid": domain.grid_codes(state),
        "agent_index": state.agent,
        "is_solution": domain.is_goal(state),
        "is_terminal": domain.is_goal(state) or domain.is_dead(state),
        **domain_fields(domain, state),
    }
    for key, value in ours.items():
        if record[key] != value:
            problems.append(f"{key}: ours {value!r} != reference {record[key]!r}")
    obs_key = observation_key(domain)
    if list(observation.shape) != record[f"{obs_key}_shape"]:
        problems.append(f"observation shape {observation.shape} != {record[f'{obs_key}_shape']}")
    if nonzero is None:
        nonzero = np.argwhere(observation)  # the indices of zip(*observation.nonzero()), row by row in that order
    expected = record[f"{obs_key}_nonzero"]
    same = expected.matches(nonzero) if isinstance(expected, NonzeroEntries) else nonzero.tolist() == expected
    if not same:
        problems.append("observation non-zero entries differ")
    if not (observation[observation != 0] == 1).all():
        problems.append("observation has values other than 0 and 1")
    return problems


def replay(domain: Domain[Any], record: dict[str, Any]) -> list[str]:
    """Replay a walk or solution record; the first differences found, with their step."""
    states = trajectory(domain, parse_level(domain, record["level"]), record["actions"])
    observations = domain.observe(states)
    entries = np.argwhere(observations)  # [t, channel, row, column], by step: each step's np.argwhere after its t
    bounds = np.searchsorted(entries[:, 0], np.arange(len(states) + 1))
    for t, (state, observation, expected) in enumerate(zip(states, observations, record["states"], strict=True)):
        problems = mismatches(domain, state, observation, expected, entries[bounds[t] : bounds[t + 1], 1:])
        if problems:
            where = f"level {record['level_index']} walk {record.get('walk', '-')} step {t}"
            return [f"{where}: {problem}" for problem in problems]
    return []
