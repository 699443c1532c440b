"""Reading the reference conformance traces (shared/reference/*.jsonl.gz).

Each record holds a level string and the state after every action, recorded from the
reference C++ simulators; see shared/reference/README.md for the schema.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def records(reference: Path, kind: str, level_set: str) -> Iterator[dict[str, Any]]:
    """The JSON records of ``<kind>_<level_set>.jsonl.gz`` (kind: walks or solutions)."""
    with gzip.open(reference / f"{kind}_{level_set}.jsonl.gz", "rt") as handle:
        for line in handle:
            yield json.loads(line)


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


def mismatches(domain: Domain[Any], state: Any, observation: Any, record: dict[str, Any]) -> list[str]:
    """How our state and its observation differ from one trace state record."""
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
    nonzero = [list(map(int, index)) for index in zip(*observation.nonzero(), strict=True)]
    if nonzero != record[f"{obs_key}_nonzero"]:
        problems.append("observation non-zero entries differ")
    if not (observation[observation != 0] == 1).all():
        problems.append("observation has values other than 0 and 1")
    return problems


def replay(domain: Domain[Any], record: dict[str, Any]) -> list[str]:
    """Replay a walk or solution record; the first differences found, with their step."""
    states = trajectory(domain, parse_level(domain, record["level"]), record["actions"])
    observations = domain.observe(states)
    for t, (state, observation, expected) in enumerate(zip(states, observations, record["states"], strict=True)):
        problems = mismatches(domain, state, observation, expected)
        if problems:
            where = f"level {record['level_index']} walk {record.get('walk', '-')} step {t}"
            return [f"{where}: {problem}" for problem in problems]
    return []
