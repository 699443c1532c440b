"""BoulderDash (gravity off): collect diamonds, open gates with keys, leave through the exit.

Rules (spec/domains.md section 3, checked against the reference traces), for the
elements of the paper's levels (the reference's default parameters turn gravity off):

- The agent moves into empty or dirt (dirt is dug away). Moving onto a diamond
  (resting or falling) collects it. Moving onto a key opens every closed gate of its
  colour for good (keys are not carried). Moving into an open gate jumps the agent
  over it to the cell beyond, if that cell is in the grid and is empty, dirt, a
  resting diamond, a key or the open exit (landing collects a diamond or uses a key);
  otherwise nothing happens. Moving into the open exit enters it. Walls, closed gates
  and the closed exit block.
- After the move, the rest of the grid is updated in one row-major scan:
  - the closed exit opens if at least ``gems_required`` diamonds have been collected,
    so it opens in the step that collects the last one;
  - a falling diamond (code 6) moves even with gravity off, as in the reference,
    whose falling-diamond update has no gravity check (only resting stones and
    diamonds wait for gravity). It falls one cell into an empty cell below; else, if
    the cell below is the agent, it explodes; else, if the cell below is rounded (a
    resting diamond or a brick wall), it rolls one cell left, or else right, when both
    the side cell and the cell below that are empty; else it lands as a resting
    diamond (code 5). A diamond that fell or rolled right is not updated again later
    in the same scan.
  - The explosion turns the agent's cell and every in-grid neighbour of it (diagonals
    included) that can be consumed - agent, empty, dirt, diamonds, brick wall - into
    an explosion (code 26). The agent is dead, which ends the episode, so the
    explosion never clears.
- Goal: the agent in the exit. Dead states: the agent killed by a falling diamond.
  The paper's levels hold no falling diamond, so nothing there can kill the agent.

Decision (spec 3.8): landing on the open exit by a gate jump enters the exit. The
reference overwrites the exit instead, which makes the level unsolvable; generated
levels never put the exit in line with a gate, so the traces cannot tell.

Accepted codes: 0 agent, 1 empty, 2 dirt, 5 diamond, 6 falling diamond, 7 exit closed,
8 exit open, 9 agent in exit, 18 brick wall, 19 steel wall, 27-38 gates and keys; 26
(an explosion) arises only in play. Stones, creatures, magic walls, blobs, nuts, bombs
and level-file explosions need gravity and monster rules, which are not implemented;
levels holding them are rejected. The observation is the reference's 34 visible
channels, (34, R, C).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from sgps.domains.base import (
    Board,
    Domain,
    check_codes,
    check_probability,
    manhattan,
    one_hot,
    split_level,
    stack_grids,
)
from sgps.domains.invariants import count, only_cleared, only_set, unchanged
from sgps.domains.render import Sprite, draw_cells
from sgps.errors import LevelFormatError

AGENT, EMPTY, DIRT = 0, 1, 2
DIAMOND, DIAMOND_FALLING = 5, 6
EXIT_CLOSED, EXIT_OPEN, AGENT_IN_EXIT = 7, 8, 9
BRICK_WALL, STEEL_WALL = 18, 19
#: The reference's "explosion turning into empty": what a falling diamond's explosion leaves.
EXPLOSION = 26
#: Gate and key codes per colour (red, blue, green, yellow): closed gate, open gate, key.
COLOUR_NAMES = ("red", "blue", "green", "yellow")
CLOSED_GATES = (27, 30, 33, 36)
OPEN_GATES = (28, 31, 34, 37)
KEYS = (29, 32, 35, 38)
NUM_CHANNELS = 34

ACCEPTED_CODES = (
    AGENT, EMPTY, DIRT, DIAMOND, DIAMOND_FALLING, EXIT_CLOSED, EXIT_OPEN, AGENT_IN_EXIT, BRICK_WALL, STEEL_WALL,
    *range(27, 39),
)  # fmt: skip
#: Hidden code -> visible observation channel (the reference's table), for accepted codes.
VISIBLE_CHANNEL = np.full(256, 255, dtype=np.uint8)
for _code, _channel in {
    AGENT: 0, EMPTY: 1, DIRT: 2, DIAMOND: 4, DIAMOND_FALLING: 4, EXIT_CLOSED: 5, EXIT_OPEN: 6, AGENT_IN_EXIT: 7,
    BRICK_WALL: 10, STEEL_WALL: 11, EXPLOSION: 15, **{code: code - 11 for code in range(27, 39)},
}.items():  # fmt: skip
    VISIBLE_CHANNEL[_code] = _channel

_WALKABLE = frozenset({EMPTY, DIRT})
_LANDABLE = frozenset({EMPTY, DIRT, DIAMOND, EXIT_OPEN, *KEYS})
_DIAMONDS = frozenset({DIAMOND, DIAMOND_FALLING})
_KEY_GATE = {key: (closed, opened) for key, closed, opened in zip(KEYS, CLOSED_GATES, OPEN_GATES, strict=True)}
_ENTERABLE = _WALKABLE | _DIAMONDS | frozenset(KEYS) | {EXIT_OPEN}
_DIRT_TO_EMPTY = bytes.maketrans(bytes([DIRT]), bytes([EMPTY]))
#: Cells a falling diamond rolls off (the reference's rounded elements among the accepted codes).
_ROUNDED = frozenset({DIAMOND, BRICK_WALL})
#: Cells an explosion destroys (the reference's consumable elements among the accepted codes).
_CONSUMABLE = frozenset({AGENT, EMPTY, DIRT, DIAMOND, DIAMOND_FALLING, BRICK_WALL})

_COLOURS = ((220, 50, 50), (50, 100, 230), (40, 170, 70), (235, 200, 30))
_GROUND = (30, 30, 30)
_SPRITE_OF_CODE = {
    AGENT: Sprite(_GROUND, "circle", (250, 250, 250)),
    EMPTY: Sprite(_GROUND),
    DIRT: Sprite((120, 80, 40), "dot", (90, 60, 30)),
    DIAMOND: Sprite(_GROUND, "diamond", (90, 230, 240)),
    DIAMOND_FALLING: Sprite(_GROUND, "diamond", (150, 240, 250)),
    EXIT_CLOSED: Sprite((100, 100, 100), "frame", (200, 200, 200)),
    EXIT_OPEN: Sprite((240, 240, 240), "frame", (30, 30, 30)),
    AGENT_IN_EXIT: Sprite((240, 240, 240), "circle", (30, 30, 30)),
    BRICK_WALL: Sprite((160, 70, 50), "bars", (110, 45, 30)),
    STEEL_WALL: Sprite((130, 140, 150)),
    EXPLOSION: Sprite((240, 120, 30), "x", (250, 220, 60)),
    **{closed: Sprite(rgb, "x", (20, 20, 20)) for closed, rgb in zip(CLOSED_GATES, _COLOURS, strict=True)},
    **{opened: Sprite(_GROUND, "frame", rgb) for opened, rgb in zip(OPEN_GATES, _COLOURS, strict=True)},
    **{key: Sprite(_GROUND, "triangle", rgb) for key, rgb in zip(KEYS, _COLOURS, strict=True)},
}
_SPRITE_INDEX = np.zeros(256, dtype=np.intp)
for _i, _code in enumerate(_SPRITE_OF_CODE):
    _SPRITE_INDEX[_code] = _i
_SPRITES = tuple(_SPRITE_OF_CODE.values())
_TEXT = {
    AGENT: "@", EMPTY: " ", DIRT: ".", DIAMOND: "*", DIAMOND_FALLING: "*", EXIT_CLOSED: "E", EXIT_OPEN: "O",
    AGENT_IN_EXIT: "&", BRICK_WALL: "#", STEEL_WALL: "X", EXPLOSION: "%",
    **dict(zip(CLOSED_GATES, "RBGY", strict=True)), **dict(zip(OPEN_GATES, "rbgy", strict=True)),
    **dict(zip(KEYS, "1234", strict=True)),
}  # fmt: skip


class BoulderDashState(NamedTuple):
    """A BoulderDash position; `board.extra` is the level's number of gems required."""

    grid: bytes
    agent: int
    gems: int  # diamonds collected so far
    board: Board


class BoulderDash(Domain[BoulderDashState]):
    """BoulderDash with the reference's agent rules and the paper's level generators."""

    name = "boulderdash"
    header_fields: ClassVar[tuple[str, ...]] = ("rows", "cols", "gems_required")
    exact_solver: ClassVar[str | None] = "bfs"  # BFS on the dirt-blind solver key is fast
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "standard": {"keys": 1, "diamonds": 1, "decoy": True, "dirt": 0.1},
        "hard": {"keys": 1, "diamonds": 4, "decoy": True, "dirt": 0.1},
        "ood": {"keys": 2, "diamonds": 1, "decoy": False, "dirt": 0.1},
    }

    def parse(self, fields: Sequence[int]) -> BoulderDashState:
        (rows, cols, required), cells = split_level(fields, self.header_fields)
        if not 0 <= required <= 255:
            raise LevelFormatError(f"gems_required is {required}; it must be between 0 and 255")
        check_codes(cells, ACCEPTED_CODES, self.name, cols)
        agents = [i for i, code in enumerate(cells) if code in (AGENT, AGENT_IN_EXIT)]
        if len(agents) != 1:
            raise LevelFormatError(f"a level needs exactly 1 agent (code 0 or 9), found {len(agents)}")
        available = sum(code in _DIAMONDS for code in cells)
        if required > available:
            raise LevelFormatError(f"gems_required is {required} but the level has only {available} diamonds")
        return BoulderDashState(bytes(cells), agents[0], 0, Board.of(rows, cols, required))

    def check_level(self, state: BoulderDashState) -> None:
        if not any(code in (EXIT_CLOSED, EXIT_OPEN, AGENT_IN_EXIT) for code in state.grid):
            raise LevelFormatError(f"the level has no exit (code {EXIT_CLOSED} or {EXIT_OPEN}), so it cannot be solved")

    def encode(self, state: BoulderDashState) -> list[int]:
        if state.gems:
            raise ValueError("a BoulderDash state with collected diamonds cannot be written as a level")
        if self.is_dead(state):
            raise ValueError("a BoulderDash state whose agent was killed cannot be written as a level")
        return [state.board.rows, state.board.cols, state.board.extra, *state.grid]

    def grid_codes(self, state: BoulderDashState) -> list[int]:
        return list(state.grid)

    def step(self, state: BoulderDashState, action: int) -> BoulderDashState:
        grid = state.grid
        if grid[state.agent] != AGENT:  # in the exit or killed: the episode is over
            return state
        board = state.board
        moves = board.moves[action]
        target = moves[state.agent]
        code = grid[target] if target >= 0 else BRICK_WALL
        if code in OPEN_GATES:
            target = moves[target]
            code = grid[target] if target >= 0 else BRICK_WALL
            enterable = code in _LANDABLE
        else:
            enterable = code in _ENTERABLE
        gems = state.gems
        if enterable:
            new = bytearray(grid)
            new[state.agent] = EMPTY
            if code in _DIAMONDS:
                gems += 1
            elif code in _KEY_GATE:
                closed, opened_gate = _KEY_GATE[code]
                new = new.replace(bytes([closed]), bytes([opened_gate]))
            new[target] = AGENT_IN_EXIT if code == EXIT_OPEN else AGENT
        elif DIAMOND_FALLING in grid:
            new, target = bytearray(grid), state.agent
        else:  # the agent stays and nothing falls; only the exit can change
            opened = _open_exit(grid, gems, board.extra)
            return state if opened is grid else BoulderDashState(opened, state.agent, gems, board)
        if DIAMOND_FALLING in new:
            _update_falling_diamonds(new, board.cols)
        return BoulderDashState(_open_exit(bytes(new), gems, board.extra), target, gems, board)

    def is_goal(self, state: BoulderDashState) -> bool:
        return state.grid[state.agent] == AGENT_IN_EXIT

    def is_dead(self, state: BoulderDashState) -> bool:
        """The agent was killed by a falling diamond (its cell holds the explosion)."""
        return state.grid[state.agent] == EXPLOSION

    def solver_key(self, state: BoulderDashState) -> Any:
        """Dirt and empty cells act alike while nothing falls, so the solver then merges them.

        A falling diamond falls into empty cells but lands on dirt, so a state holding
        one keeps its dirt; resting diamonds never start falling with gravity off, so
        once the falling ones have landed the merge is sound for every later state.
        """
        if DIAMOND_FALLING in state.grid:
            return (state.grid, state.gems)
        return (state.grid.translate(_DIRT_TO_EMPTY), state.gems)

    def may_reach(self, starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """What the rules never undo: steel, the exit's cell and each gate's cell stay; dirt, brick walls, keys
        and closed gates only vanish; diamonds are never made; explosions never clear; at most one agent.

        Channels are the visible ones (`VISIBLE_CHANNEL`).
        """
        channel = VISIBLE_CHANNEL
        gates = [(int(channel[closed]), int(channel[opened])) for closed, opened in zip(CLOSED_GATES, OPEN_GATES,
                                                                                      strict=True)]  # fmt: skip
        keep = unchanged(starts, goals, (channel[STEEL_WALL],)) & unchanged(
            starts, goals, (channel[EXIT_CLOSED], channel[EXIT_OPEN], channel[AGENT_IN_EXIT])
        )
        for gate in gates:
            keep &= unchanged(starts, goals, gate)
        vanishing = (channel[DIRT], channel[BRICK_WALL], *(channel[key] for key in KEYS), *(c for c, _ in gates))
        for plane in vanishing:
            keep &= only_cleared(starts, goals, (plane,))
        diamonds, agent = (channel[DIAMOND],), (channel[AGENT], channel[AGENT_IN_EXIT])
        return (
            keep
            & only_set(starts, goals, (channel[EXPLOSION],))
            & (count(goals, diamonds) <= count(starts, diamonds))
            & (count(goals, agent) <= 1)
        )

    def heuristic(self, state: BoulderDashState) -> float:
        """Admissible: each action moves at most two cells (a gate jump) and collects at most one diamond."""
        if self.is_goal(state):
            return 0.0
        missing = max(0, state.board.extra - state.gems)
        exits = [i for i, code in enumerate(state.grid) if code in (EXIT_CLOSED, EXIT_OPEN)]
        if not exits or self.is_dead(state):
            return float("inf")
        distance = manhattan(state.agent, exits[0], state.board.cols)
        return float(max(missing + 1, (distance + 1) // 2))

    def observation_shape(self, state: BoulderDashState) -> tuple[int, int, int]:
        return (NUM_CHANNELS, state.board.rows, state.board.cols)

    def observe(self, states: Sequence[BoulderDashState]) -> np.ndarray:
        rows, cols = states[0].board.rows, states[0].board.cols
        return one_hot(VISIBLE_CHANNEL[stack_grids([s.grid for s in states], rows, cols)], NUM_CHANNELS)

    def render_text(self, state: BoulderDashState) -> str:
        cols = state.board.cols
        lines = ["".join(_TEXT[c] for c in state.grid[r * cols : (r + 1) * cols]) for r in range(state.board.rows)]
        border = "+" + "-" * cols + "+"
        legend = (
            "@ agent . dirt * diamond E/O exit closed/open # wall R/B/G/Y closed gate r/b/g/y open gate 1-4 key"
            " % explosion"
        )
        return "\n".join(
            [border, *(f"|{line}|" for line in lines), border,
             f"diamonds: {state.gems} of {state.board.extra} required", legend]
        )  # fmt: skip

    def render_image(self, state: BoulderDashState, cell: int = 16) -> np.ndarray:
        rows, cols = state.board.rows, state.board.cols
        plane = _SPRITE_INDEX[np.frombuffer(state.grid, dtype=np.uint8)].reshape(rows, cols)
        return draw_cells(plane, _SPRITES, cell)

    def describe(self, state: BoulderDashState) -> str:
        closed = sum(code in CLOSED_GATES for code in state.grid)
        return f"boulderdash {state.board.rows}x{state.board.cols}, {state.board.extra} gems required, {closed} locked"

    def generate(
        self, seed: int, *, keys: int = 1, diamonds: int = 1, decoy: bool = True, dirt: float = 0.1
    ) -> BoulderDashState:
        """A 14x14 five-room level from the paper's generator (spec section 3.6).

        `keys` = 1: the diamond room is locked by a gate whose key lies in another
        room (the standard and, with `diamonds` = 4, the hard levels); `keys` = 2: the
        key room is itself locked and its key lies in a third room (the out-of-
        distribution levels). `decoy` adds, with probability 1/2, a key of another
        colour (the one-key reference always draws for it). The draws are those of the reference with
        `numpy.random.default_rng(seed)`: seeds 50001-50100 give the one-key test set,
        seeds 40000-40099 with 4 diamonds the hard test set.
        """
        if keys not in (1, 2):
            raise ValueError("keys must be 1 (standard) or 2 (two consecutive locked doors)")
        if not 1 <= diamonds <= 20:
            raise ValueError("diamonds must be between 1 and 20")
        check_probability("dirt", dirt)
        return self.parse([SIZE, SIZE, diamonds, *_generate_cells(seed, keys, diamonds, decoy, dirt)])


def _open_exit(grid: bytes, gems: int, required: int) -> bytes:
    """The exit part of the end-of-step scan: the closed exit opens once enough diamonds are collected.

    Returns `grid` itself when nothing changes. Falling diamonds treat a closed and an
    open exit alike (neither is empty, the agent or rounded), so this may run after them.
    """
    if gems >= required and EXIT_CLOSED in grid:
        return grid.replace(bytes([EXIT_CLOSED]), bytes([EXIT_OPEN]))
    return grid


def _update_falling_diamonds(grid: bytearray, cols: int) -> None:
    """The falling-diamond part of the end-of-step scan, in place, in row-major order.

    A diamond that fell or rolled right lands on a cell the scan has not reached yet;
    the reference marks such cells as updated and skips them, and so does `entered`.
    """
    entered: set[int] = set()
    index = grid.find(DIAMOND_FALLING)
    while index >= 0:
        if index not in entered:
            _update_falling_diamond(grid, index, cols, entered)
        index = grid.find(DIAMOND_FALLING, index + 1)


def _update_falling_diamond(grid: bytearray, index: int, cols: int, entered: set[int]) -> None:
    """Fall, explode on the agent, roll off a rounded cell, or land (the reference's order)."""
    below = index + cols
    if below >= len(grid):  # on the bottom row: nothing below to fall into or roll off
        grid[index] = DIAMOND
        return
    under = grid[below]
    if under == EMPTY:
        grid[index], grid[below] = EMPTY, DIAMOND_FALLING
        entered.add(below)
        return
    if under == AGENT:
        _explode(grid, below, cols)
        return
    if under in _ROUNDED:
        column = index % cols
        for side, allowed in ((-1, column > 0), (1, column < cols - 1)):
            if allowed and grid[index + side] == EMPTY and grid[below + side] == EMPTY:
                grid[index], grid[index + side] = EMPTY, DIAMOND_FALLING
                entered.add(index + side)
                return
    grid[index] = DIAMOND


def _explode(grid: bytearray, centre: int, cols: int) -> None:
    """Blow up the agent at `centre`: it and its consumable neighbours (diagonals too) become explosions."""
    rows = len(grid) // cols
    row, column = divmod(centre, cols)
    for r in range(max(row - 1, 0), min(row + 2, rows)):
        for c in range(max(column - 1, 0), min(column + 2, cols)):
            if grid[r * cols + c] in _CONSUMABLE:
                grid[r * cols + c] = EXPLOSION


# -- the generator's fixed map: five rooms (four corner rooms and a central ring) -------

SIZE = 14
#: The room template of spec 3.6: '#' wall, 'D' door candidate (a wall), 's' a door's
#: side cell, 'a'-'d' and 'm' the inner cells of each room, '+' corridor, '.' free.
ROOM_TEMPLATE = (
    "aaasDs..sDsbbb",
    "aaasDs..sDsbbb",
    "aaaa#....#bbbb",
    "ssa#++ss++#bss",
    "DD#+++DD+++#DD",
    "ss.++#ss#++.ss",
    "...sDsmmsDs...",
    "...sDsmmsDs...",
    "ss.++#ss#++.ss",
    "DD#+++DD+++#DD",
    "ssc#++ss++#dss",
    "cccc#....#dddd",
    "cccsDs..sDsddd",
    "cccsDs..sDsddd",
)
#: Door candidates of each room (upper-left, upper-right, lower-left, lower-right,
#: middle), in the order the generator chooses among them.
ROOM_DOORS: tuple[tuple[tuple[int, int], ...], ...] = (
    ((0, 4), (1, 4), (4, 0), (4, 1)),
    ((0, 9), (1, 9), (4, 12), (4, 13)),
    ((9, 0), (9, 1), (12, 4), (13, 4)),
    ((9, 12), (9, 13), (12, 9), (13, 9)),
    ((4, 6), (4, 7), (6, 4), (6, 9), (7, 4), (7, 9), (9, 6), (9, 7)),
)
ROOM_LETTERS = "abcdm"


class _Room(NamedTuple):
    inner: tuple[int, ...]  # inner cell indices, row-major
    doors: tuple[int, ...]  # door candidate indices, in choice order
    sides: dict[int, tuple[int, int]]  # door -> its two side cells


def _rooms() -> tuple[tuple[_Room, ...], frozenset[int], frozenset[int]]:
    """The rooms, the wall cells and the corridor cells of the template."""
    flat = "".join(ROOM_TEMPLATE)
    walls = frozenset(i for i, ch in enumerate(flat) if ch in "#D")
    corridors = frozenset(i for i, ch in enumerate(flat) if ch == "+")
    rooms = []
    for letter, doors in zip(ROOM_LETTERS, ROOM_DOORS, strict=True):
        sides = {}
        for r, c in doors:
            horizontal = 0 < c < SIZE - 1 and ROOM_TEMPLATE[r][c - 1] == "s" and ROOM_TEMPLATE[r][c + 1] == "s"
            pair = ((r, c - 1), (r, c + 1)) if horizontal else ((r - 1, c), (r + 1, c))
            sides[r * SIZE + c] = tuple(rr * SIZE + cc for rr, cc in pair)
        inner = tuple(i for i, ch in enumerate(flat) if ch == letter)
        rooms.append(_Room(inner, tuple(r * SIZE + c for r, c in doors), sides))
    return tuple(rooms), walls, corridors


ROOMS, _WALL_CELLS, _CORRIDOR_CELLS = _rooms()


def _generate_cells(seed: int, keys: int, diamonds: int, decoy: bool, dirt: float) -> list[int]:
    """The cells of one generated level, drawing exactly as the reference generator."""
    rng = np.random.default_rng(seed)
    cells = [BRICK_WALL if i in _WALL_CELLS else EMPTY for i in range(SIZE * SIZE)]
    blocked = set(_WALL_CELLS) | set(_CORRIDOR_CELLS)
    for i in range(SIZE * SIZE):
        if i not in _WALL_CELLS:
            cells[i] = int(rng.choice([DIRT, EMPTY], p=[dirt, 1.0 - dirt]))

    order = list(range(len(ROOMS)))
    rng.shuffle(order)
    colours = list(range(len(KEYS)))
    if keys == 2:
        colours.reverse()
    rng.shuffle(colours)

    def lock(room: _Room, colour: int) -> None:
        """Keep agent and exit out of `room` and lock one of its doors with `colour`."""
        blocked.update(room.inner)
        for pair in room.sides.values():
            blocked.update(pair)
        door = int(rng.choice(room.doors))
        cells[door] = CLOSED_GATES[colour]
        for side in room.sides[door]:
            cells[side] = EMPTY

    def place_key(room: _Room, colour: int) -> None:
        index = int(rng.choice(room.inner))
        cells[index] = KEYS[colour]
        blocked.add(index)

    diamond_room, key_room = ROOMS[order[0]], ROOMS[order[1]]
    gate_colour = colours.pop()
    lock(diamond_room, gate_colour)
    cells[int(rng.choice(diamond_room.inner))] = DIAMOND
    place_key(key_room, gate_colour)
    locked = [diamond_room]
    second_colour = -1
    if keys == 2:
        second_colour = colours.pop()
        lock(key_room, second_colour)
        place_key(ROOMS[order[2]], second_colour)
        locked.append(key_room)

    for room in ROOMS:
        if room in locked:
            continue
        door = int(rng.choice(room.doors))
        for side in room.sides[door]:
            cells[side] = EMPTY
            blocked.add(side)
        plain = rng.choice([0, 1], p=[0.25, 0.75]) == 0
        cells[door] = EMPTY if plain or not colours else OPEN_GATES[colours.pop()]

    if diamonds > 1:
        free = [i for i in range(SIZE * SIZE) if i not in blocked]
        for index in rng.choice(free, size=diamonds - 1, replace=False):
            cells[int(index)] = DIAMOND
            blocked.add(int(index))

    free = [i for i in range(SIZE * SIZE) if i not in blocked]
    drawn = [int(i) for i in rng.choice(free, size=3 if decoy else 2, replace=False)]
    cells[drawn[0]] = AGENT
    cells[drawn[1]] = EXIT_CLOSED
    if decoy and rng.choice([0, 1]) == 0:
        used = {gate_colour, second_colour} if keys == 2 else {gate_colour}
        cells[drawn[2]] = KEYS[int(rng.choice([c for c in range(len(KEYS)) if c not in used]))]
    return cells
