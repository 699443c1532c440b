"""Record BoulderDash conformance traces from the official simulator (tuero/boulderdash_cpp).

Not part of the installed package and not run by CI: it needs a C++20 compiler, the
Python headers and pybind11 (``pip install pybind11``), and a copy of the official
sources. It builds the official Python binding from unmodified sources (GCC 12 has no
``<format>``, which the sources include only for error messages, so a stand-in header
is put first on the include path), then plays random walks on random levels that hold
every one of the 50 cell codes, with gravity on and off and each game parameter varied
(and, for butterflies that turn and move at once, on levels open at the left and right
edges, where their move wraps round to the next or previous row), and writes one JSON
line per walk: the level, the parameters, the actions, and the grid and hidden state
after every step. It ends by printing, for every cell code, the number of recorded
states that hold it, and fails if a code was never seen.

With ``--cases`` it plays instead the fixed levels and actions of `CASES` (what random
walks seldom meet: a butterfly moving onto the agent in the exit, the wrapping move at
the left and right edges) and writes one JSON line per case, named in its ``case`` field.

Usage (the official repository as a git directory or a checkout)::

    python tools/reference/record_boulderdash.py --source /path/to/boulderdash_cpp \
        --out tests/data/boulderdash_official_traces.jsonl.gz
    python tools/reference/record_boulderdash.py --source /path/to/boulderdash_cpp --cases \
        --out tests/data/boulderdash_official_cases.jsonl.gz

The test ``tests/test_boulderdash_official.py`` replays both files on every suite run.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import importlib.util
import json
import random
import subprocess
import sys
import sysconfig
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

#: The official commit the committed traces come from.
OFFICIAL_COMMIT = "a9846c1e283384073a413c1f2056622b16ef8941"
NUM_CODES = 50
STEEL, EMPTY, DIRT = 19, 1, 2
AGENT, EXIT_OPEN = 0, 8
OPEN_GATES = (28, 31, 34, 37)
#: Codes the official element table maps to its null element: the agent pushing one
#: sideways ends the process (an unhandled lookup error), and the observation of a state
#: holding one writes outside its buffer, so walks avoid the first and record no
#: observation for the second.
NULL_ELEMENT_CODES = (47, 48, 49)
BUTTERFLIES = (14, 15, 16, 17)
STONE_FALLING = 4
#: Mask keeping the xorshift state in 64 bits.
MASK64 = (1 << 64) - 1

#: The official defaults, and the values each walk group tries one at a time.
DEFAULTS: dict[str, Any] = {
    "gravity": False,
    "magic_wall_steps": 140,
    "blob_chance": 20,
    "blob_max_percentage": 0.16,
    "disable_explosions": False,
    "butterfly_explosion_ver": 1,
    "butterfly_move_ver": 1,
    "random_seed": 0,
}
VARIATIONS: list[dict[str, Any]] = [
    {},
    {"gravity": True},
    {"gravity": True, "magic_wall_steps": 4},
    {"magic_wall_steps": 0, "gravity": True},
    {"blob_chance": 200},
    {"blob_chance": 0, "gravity": True},
    {"blob_max_percentage": 0.03, "blob_chance": 255},
    {"disable_explosions": True, "gravity": True},
    {"butterfly_explosion_ver": 2, "gravity": True},
    {"butterfly_move_ver": 2},
    {"butterfly_move_ver": 2, "gravity": True},
    {"random_seed": 7},
    {"random_seed": 12345, "gravity": True},
]
#: Walk groups on levels open at the left and right edges (steel only on the top and bottom
#: rows), where a butterfly that turns and moves at once wraps round a row's end.
WRAP_VARIATIONS: list[dict[str, Any]] = [
    {"butterfly_move_ver": 2},
    {"butterfly_move_ver": 2, "gravity": True},
]
#: The parameter fields of an sgps level line, in order (after the cells).
PARAMETER_FIELDS = (
    "gravity", "magic_wall_steps", "blob_chance", "blob_max_percentage", "disable_explosions",
    "butterfly_explosion_ver", "butterfly_move_ver", "random_seed",
)  # fmt: skip
_INSTANT = "0|140|20|160000|0|1|2|0"  # the default parameters but butterfly_move_ver 2
#: Fixed cases for ``--cases``: a name, the level in sgps's form (the official level line,
#: then the eight parameter fields) and the actions, which must end where the episode does.
CASES: list[tuple[str, str, list[int]]] = [
    (
        "exit flags: a butterfly moves onto the agent in the exit (3x1, at the edge)",
        f"3|1|0|15|8|0|{_INSTANT}",
        [0],
    ),
    (
        "exit flags: a butterfly boxed in by steel moves onto the agent in the exit (3x3)",
        f"3|3|0|19|19|19|8|14|19|0|19|19|{_INSTANT}",
        [0],
    ),
    (
        "wrap left: a butterfly at column 0 moves onto the agent at the end of the row above, which stays alive; "
        "the agent's moves then move the butterfly, which collects a diamond and enters the exit",
        f"4|5|1|19|19|19|19|19|19|7|5|1|0|14|19|2|1|1|19|19|19|19|19|{_INSTANT}",
        [1, 3, 3, 3],
    ),
    (
        "wrap left: the butterfly on the agent's cell moves away; the agent's moves then move an empty cell, "
        "which collects a diamond and enters the exit",
        f"4|5|1|19|19|19|19|19|19|7|5|1|0|14|19|2|1|1|19|19|19|19|19|{_INSTANT}",
        [1, 0, 3, 3, 3, 3],
    ),
    (
        "wrap left onto the agent that enters the exit at the end of the row above in the same step",
        f"4|5|0|19|19|19|19|19|19|19|19|0|8|14|19|1|1|1|19|19|19|19|19|{_INSTANT}",
        [1],
    ),
    (
        "wrap right: a butterfly at the last column moves onto the agent at the start of the row below",
        f"4|5|1|19|19|19|19|19|19|1|1|19|16|0|2|5|7|19|19|19|19|19|19|{_INSTANT}",
        [0, 1, 1, 1],
    ),
    (
        "wrap right into dirt beside the agent, which the butterfly then kills",
        f"4|5|0|19|19|19|19|19|19|19|1|19|16|2|0|1|7|19|19|19|19|19|19|{_INSTANT}",
        [0, 0],
    ),
]

FORMAT_STAND_IN = """#pragma once
#include <string>
namespace std {
template <class... Args> std::string format(const char *text, Args &&...) { return text; }
}
"""


def splitmix64(seed: int) -> int:
    """The official seeding function: one splitmix64 step from `seed`."""
    value = (seed + 0x9E3779B97F4A7C15) & MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK64
    return value ^ (value >> 31)


def export_sources(source: Path, commit: str, into: Path) -> Path:
    """The official sources at `commit` in a fresh folder (from a git directory or a checkout)."""
    wanted = ["src", "include", "python"]  # the sources only: a snapshot may lack the large level files
    archive = subprocess.run(["git", "-C", str(source), "archive", commit, *wanted], check=True, capture_output=True)
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def build_binding(source: Path, commit: str, workdir: Path) -> Any:
    """Compile the official binding with g++ and import it."""
    import pybind11

    root = export_sources(source, commit, workdir / "src")
    stand_in = workdir / "stand_in"
    stand_in.mkdir()
    (stand_in / "format").write_text(FORMAT_STAND_IN)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    target = workdir / f"pyboulderdash{suffix}"
    command = [
        "g++", "-std=c++20", "-O2", "-shared", "-fPIC",
        f"-I{stand_in}", f"-I{root / 'include'}", f"-I{root / 'src'}",
        f"-I{pybind11.get_include()}", f"-I{sysconfig.get_paths()['include']}",
        str(root / "src" / "boulderdash_base.cpp"), str(root / "python" / "pyboulderdash.cpp"),
        "-o", str(target),
    ]  # fmt: skip
    subprocess.run(command, check=True)
    spec = importlib.util.spec_from_file_location("pyboulderdash", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_level(rng: random.Random, open_sides: bool = False) -> tuple[int, int, int, list[int]]:
    """A steel-bordered level in two halves that a steel wall with a few holes divides.

    The agent's half holds the elements it meets without dying at once (stones, nuts,
    bombs, diamonds, walls, gates and keys, exits, explosions, magic walls and the
    null-element codes); the other half holds every code but the agent, creatures and
    blobs included, so that walks last long and still see everything. With
    `open_sides` only the top and bottom rows are steel: the first and last columns
    hold cells like the others.
    """
    rows, cols = rng.randint(9, 13), rng.randint(14, 20)
    divider = cols // 2
    creatures = {10, 11, 12, 13, 14, 15, 16, 17, 23, 43, 44, 45, 46}
    safe = [code for code in range(3, NUM_CODES) if code not in creatures | {9, STEEL}]
    wild = [code for code in range(3, NUM_CODES) if code not in (9, STEEL)]
    cells = []
    for r in range(rows):
        for c in range(cols):
            side = not open_sides and c in (0, cols - 1)
            if r in (0, rows - 1) or side or (c == divider and rng.random() < 0.85):
                cells.append(STEEL)
                continue
            roll = rng.random()
            pool = safe if c < divider else wild
            cells.append(EMPTY if roll < 0.5 else DIRT if roll < 0.65 else rng.choice(pool))
    inner = [i for i in range(rows * cols) if cells[i] != STEEL and i % cols < divider]
    cells[rng.choice(inner)] = 9 if rng.random() < 0.02 else AGENT
    diamonds = sum(code in (5, 6) for code in cells)
    return rows, cols, rng.randint(0, min(diamonds, 2)), cells


def level_string(rows: int, cols: int, required: int, cells: list[int]) -> str:
    return "|".join([str(rows), str(cols), str(required), *(str(code) for code in cells)])


def make_state(module: Any, level: str, params: dict[str, Any]) -> Any:
    """The official state for `level` with `params` (the random seed set through the pickled state)."""
    game = module.GameParameters()
    for key, value in params.items():
        if key != "random_seed":
            setattr(game, key, value)
    state = module.BoulderDashGameState(level, game)
    packed = list(state.__getstate__())
    packed[11] = splitmix64(params["random_seed"])
    seeded = module.BoulderDashGameState.__new__(module.BoulderDashGameState)
    seeded.__setstate__(tuple(packed))
    return seeded


def record_state(state: Any) -> dict[str, Any]:
    """The grid (one character per cell, chr(48 + code)), the hidden state and the observation."""
    packed = state.__getstate__()
    grid = packed[22]
    record = {
        "grid": "".join(chr(48 + code) for code in grid),
        "agent": packed[9],
        "gems": packed[4],
        "alive": packed[19],
        "in_exit": packed[20],
        "magic_wall_steps": packed[0],
        "magic_active": packed[17],
        "blob_swap": packed[21],
        "random_state": packed[11],
        "obs": None,
    }
    if not any(code in NULL_ELEMENT_CODES for code in grid):
        observation = state.get_observation()
        channels, rows, cols = observation.shape
        flat = observation.reshape(channels, rows * cols)
        assert (flat.sum(axis=0) == 1).all(), "an observation cell without exactly one channel"
        record["obs"] = "".join(chr(48 + int(channel)) for channel in flat.argmax(axis=0))
    return record


def allowed(state: Any, action: int, cols: int) -> bool:
    """Leave out the moves whose official outcome is undefined or that sgps decides otherwise.

    Pushing a null-element code sideways ends the process; jumping a gate onto the exit
    overwrites the exit officially, where sgps enters it (spec 3.8).
    """
    packed = state.__getstate__()
    grid, agent = packed[22], packed[9]
    step = (-cols, 1, cols, -1)[action]
    target = agent + step
    if not 0 <= target < len(grid):
        return True
    if action in (1, 3) and grid[target] in NULL_ELEMENT_CODES:
        return False
    beyond = target + step
    return not (grid[target] in OPEN_GATES and 0 <= beyond < len(grid) and grid[beyond] == EXIT_OPEN)


def butterfly_may_leave(state: Any, rows: int, cols: int) -> bool:
    """A butterfly whose instant move could leave the grid's memory in the next step: undefined.

    A butterfly that turns and moves at once moves blindly to its left (up -> left,
    left -> down, down -> right, right -> up) by adding that direction's offset to the
    flat index. At the left and right edges this wraps to the row above or below, which
    is defined; only a step past the first or last cell (up from the top row, down from
    the bottom row, left from the first cell, right from the last) is not. Nothing
    changes a butterfly's heading or cell before its own update in a step (it is blown
    up or overwritten at most), so its code now tells where that move would go.
    """
    grid = state.__getstate__()[22]
    size = rows * cols
    offset = dict(zip(BUTTERFLIES, (-1, cols, 1, -cols), strict=True))  # headings up, left, down, right
    return any(not 0 <= index + offset[code] < size for index, code in enumerate(grid) if code in offset)


def undefined_ahead(state: Any, params: dict[str, Any], rows: int, cols: int) -> bool:
    """Whether the next step, whatever its action, may meet undefined official behaviour.

    Besides a butterfly's instant move off the grid (`butterfly_may_leave`), a falling
    stone on the bottom row with `butterfly_explosion_ver` 2: its update looks for a
    butterfly below it without a bounds check. Only a stone falling there when the
    step starts is updated there (one that arrives is marked updated).
    """
    if params["butterfly_move_ver"] == 2 and butterfly_may_leave(state, rows, cols):
        return True
    bottom = state.__getstate__()[22][(rows - 1) * cols :]
    return params["butterfly_explosion_ver"] == 2 and STONE_FALLING in bottom


def goes_on(state: Any, action: int) -> bool:
    """Whether the walk can go on after `action`: the agent neither dies nor enters the exit."""
    trial = copy.copy(state)
    trial.apply_action(action)
    return trial.agent_alive() and not trial.agent_in_exit()


def walk(
    module: Any, rng: random.Random, params: dict[str, Any], steps: int, cautious: bool, open_sides: bool = False
) -> dict[str, Any]:
    """A momentum random walk (the previous move again with probability 1/2), to `steps` or the end.

    A `cautious` walk avoids the moves after which the agent is dead or in the exit,
    while it has another, so that it lasts; the others show how the agent dies or leaves.
    """
    rows, cols, required, cells = random_level(rng, open_sides)
    level = level_string(rows, cols, required, cells)
    state = make_state(module, level, params)
    states, actions = [record_state(state)], []
    previous = rng.randrange(4)
    while len(actions) < steps and state.agent_alive() and not state.agent_in_exit():
        if undefined_ahead(state, params, rows, cols):
            break
        action = previous if rng.random() < 0.5 else rng.randrange(4)
        choices = [a for a in range(4) if allowed(state, a, cols)]
        if cautious:
            choices = [a for a in choices if goes_on(state, a)] or choices
        if not choices:
            break
        if action not in choices:
            action = rng.choice(choices)
        state.apply_action(action)
        actions.append(action)
        states.append(record_state(state))
        previous = action
    return {"level": level, "params": params, "actions": actions, "states": states}


def parse_case_level(line: str) -> tuple[str, dict[str, Any]]:
    """The official level line and the parameters of a level in sgps's form (the eight trailing fields optional)."""
    fields = [int(field) for field in line.split("|")]
    size = 3 + fields[0] * fields[1]
    params = dict(DEFAULTS)
    if len(fields) > size:
        values = dict(zip(PARAMETER_FIELDS, fields[size:], strict=True))
        params = {name: bool(values[name]) if isinstance(DEFAULTS[name], bool) else values[name] for name in DEFAULTS}
        params["blob_max_percentage"] = values["blob_max_percentage"] / 1_000_000  # the field is in millionths
    return "|".join(str(field) for field in fields[:size]), params


def play_case(module: Any, name: str, line: str, actions: list[int]) -> dict[str, Any]:
    """The official states along a fixed case; its actions must stay defined and end where the episode does."""
    level, params = parse_case_level(line)
    rows, cols = (int(field) for field in level.split("|")[:2])
    state = make_state(module, level, params)
    states = [record_state(state)]
    for number, action in enumerate(actions):
        if not state.agent_alive() or state.agent_in_exit():
            raise ValueError(f"case {name!r}: the episode is over before action {number}")
        if not allowed(state, action, cols) or undefined_ahead(state, params, rows, cols):
            raise ValueError(f"case {name!r}: action {number} may meet undefined official behaviour")
        state.apply_action(action)
        states.append(record_state(state))
    return {"case": name, "level": level, "params": params, "actions": list(actions), "states": states}


def write_records(records: list[dict[str, Any]], out: Path) -> None:
    """One JSON line per record, gzip-compressed without a timestamp or a file name (the same records, the same
    bytes, wherever they are written)."""
    lines = "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records)
    with out.open("wb") as raw, gzip.GzipFile("", "wb", compresslevel=9, fileobj=raw, mtime=0) as handle:
        handle.write(lines.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="the official repository (git dir or checkout)")
    parser.add_argument("--commit", default=OFFICIAL_COMMIT)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", action="store_true", help="record the fixed cases (CASES) instead of random walks")
    parser.add_argument("--walks-per-variation", type=int, default=16)
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--seed", type=int, default=45)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    counts: Counter[int] = Counter()
    with tempfile.TemporaryDirectory() as work:
        module = build_binding(args.source, args.commit, Path(work))
        if args.cases:
            records = [play_case(module, *case) for case in CASES]
            write_records(records, args.out)
            print(f"{len(records)} cases, {sum(len(r['actions']) for r in records)} steps, written to {args.out}")
            return
        records = []
        groups = [(variation, False) for variation in VARIATIONS] + [(v, True) for v in WRAP_VARIATIONS]
        for variation, open_sides in groups:
            for k in range(args.walks_per_variation):
                params = {**DEFAULTS, **variation}
                record = walk(module, rng, params, args.steps, cautious=k % 2 == 1, open_sides=open_sides)
                for state in record["states"]:
                    counts.update({ord(char) - 48 for char in state["grid"]})
                records.append(record)
    write_records(records, args.out)
    steps = sum(len(r["actions"]) for r in records)
    long_walks = sum(len(r["actions"]) >= 200 for r in records)
    print(f"{len(records)} walks ({long_walks} of 200 steps or more), {steps} steps, written to {args.out}")
    print("states holding each code:")
    for code in range(NUM_CODES):
        print(f"  {code:2d}: {counts[code]}")
    missing = [code for code in range(NUM_CODES) if not counts[code]]
    if missing:
        sys.exit(f"codes never seen: {missing}")


if __name__ == "__main__":
    main()
