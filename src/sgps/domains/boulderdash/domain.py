"""BoulderDash: collect diamonds, open gates with keys, leave through the exit.

Every official cell code (tuero/boulderdash_cpp; `elements`) and game parameter
(`scan.Rules`, with the official defaults) is implemented, and the grid after every
step equals the official simulator's (checked against its traces: the paper's levels
in shared/reference, every element and parameter in tests/data). docs/domains.md has
the element table, the parameters and the official quirks kept.

A level of the paper's elements with the default parameters (gravity off) is played by
a fast path (`static`): only the agent, the exit and falling diamonds change there. Any
other level is played by the official end-of-step scan (`scan.Scan`); its states also
carry the hidden game state (magic wall steps, blob swap, random state).

Rules of the paper's levels (spec/domains.md section 3):

- The agent moves into empty or dirt (dirt is dug away). Moving onto a diamond
  (resting or falling) collects it. Moving onto a key opens every closed gate of its
  colour for good (keys are not carried). Moving into an open gate jumps the agent
  over it to the cell beyond, if that cell is in the grid and is empty, dirt, a
  resting diamond, a key or the open exit (landing collects a diamond or uses a key);
  otherwise nothing happens. Moving into the open exit enters it. Walls, closed gates
  and the closed exit block.
- After the move the closed exit opens once `gems_required` diamonds are collected,
  and falling diamonds (code 6) fall, roll, land, or explode on the agent, even with
  gravity off (the official falling-diamond update has no gravity check).
- Goal: the agent in the exit. Dead: the agent killed (its cell holds an explosion).

Levels beyond the paper's keep the agent's fate as the official flags (`scan.Hidden`),
set during the step: a butterfly that turns and moves at once may overwrite the agent
in the exit (still solved) or, wrapping round a row's end, the agent itself (still
alive, officially; the agent's moves then move what its cell holds).

`gems_required` is a count from 0 to 2**31 - 1 (the official field is a C++ int). A
level that provably can never be solved for want of diamonds is refused
(`check_gems_required`); every other level the official loader accepts is accepted.

Decision (spec 3.8): landing on the open exit by a gate jump enters the exit. The
official code overwrites the exit instead, which makes the level unsolvable; generated
levels never put the exit in line with a gate.

Level lines are the official format, ``rows|cols|gems_required|cells``. The official
format has no place for the game parameters (the official simulator takes them beside
the level string), so a level whose parameters differ from the defaults carries them
as eight more fields after the cells, in the order of `PARAMETER_FIELDS`.
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
    count_exactly,
    manhattan,
    one_hot,
    split_level,
    stack_grids,
)
from sgps.domains.boulderdash.drawing import LEGEND, MORE_LEGEND, SPRITE_INDEX, SPRITES, TEXT
from sgps.domains.boulderdash.elements import (
    AGENT,
    AGENT_IN_EXIT,
    BLOB,
    BRICK_WALL,
    BUTTERFLIES,
    CLOSED_GATES,
    DIAMOND,
    DIAMOND_FALLING,
    DIRT,
    EMPTY,
    EXIT_CLOSED,
    EXIT_OPEN,
    EXPLOSION,
    EXPLOSION_DIAMOND,
    EXPLOSION_STONE,
    GATE_OF_KEY,
    KEYS,
    MAGIC_DORMANT,
    MAGIC_EXPIRED,
    MAGIC_ON,
    NUM_CHANNELS,
    NUM_CODES,
    NUT,
    NUT_FALLING,
    OPEN_GATES,
    PEBBLE_IN_DIRT,
    STATIC_CODES,
    STEEL_WALL,
    STONE,
    STONE_FALLING,
    STONE_IN_DIRT,
    VISIBLE_CHANNEL,
    VOID_IN_DIRT,
)
from sgps.domains.boulderdash.generator import SIZE, Extras, generate_cells
from sgps.domains.boulderdash.scan import Hidden, Rules, Scan, initial_hidden
from sgps.domains.boulderdash.static import open_exit, update_falling_diamonds
from sgps.domains.invariants import count, only_cleared, only_set, unchanged
from sgps.domains.render import draw_cells
from sgps.errors import LevelFormatError

#: The trailing level fields of a level with other than the default parameters, in order
#: (flags 0 or 1; the blob percentage in millionths).
PARAMETER_FIELDS = (
    "gravity", "magic_wall_steps", "blob_chance", "blob_max_percentage_millionths", "disable_explosions",
    "butterfly_explosion_ver", "butterfly_move_ver", "random_seed",
)  # fmt: skip
#: Inclusive bounds of each parameter field.
_FIELD_BOUNDS = ((0, 1), (0, 2**31 - 1), (0, 255), (0, 1_000_000), (0, 1), (1, 2), (1, 2), (0, 2**63 - 1))
_MILLION = 1_000_000
#: Inclusive bounds of the gems_required field (the official field is a C++ int; a negative
#: count would act as 0, so it is refused as a slip).
GEMS_REQUIRED_BOUNDS = (0, 2**31 - 1)
#: Elements whose rules can put a diamond where the level held none: butterflies (their
#: explosions, or a falling stone with butterfly_explosion_ver 2), blobs (enclosed, they
#: turn into diamonds), explosions to diamond, and nuts (cracked by a falling stone).
_DIAMOND_MAKERS = frozenset({*BUTTERFLIES, BLOB, EXPLOSION_DIAMOND, NUT, NUT_FALLING})
#: Magic walls turn falling stones into falling diamonds (and diamonds into stones), one for one.
_MAGIC_WALLS = frozenset({MAGIC_DORMANT, MAGIC_ON, MAGIC_EXPIRED})
_STONES = frozenset({STONE, STONE_FALLING, EXPLOSION_STONE})

_ALIVE = (AGENT, AGENT_IN_EXIT)
_OPEN_GATES = frozenset(OPEN_GATES)
_WALKABLE = frozenset({EMPTY, DIRT})
_LANDABLE = frozenset({EMPTY, DIRT, DIAMOND, EXIT_OPEN, *KEYS})
_DIAMONDS = frozenset({DIAMOND, DIAMOND_FALLING})
_ENTERABLE = _WALKABLE | _DIAMONDS | frozenset(KEYS) | {EXIT_OPEN}
_DIRT_TO_EMPTY = bytes.maketrans(bytes([DIRT]), bytes([EMPTY]))


class BoulderDashState(NamedTuple):
    """A BoulderDash position of a paper-style level; `board.extra` is the level's number of gems required."""

    grid: bytes
    agent: int
    gems: int  # diamonds collected so far
    board: Board


class DynamicState(BoulderDashState):
    """A position of any other level: `board.extra` is its `Rules`, and `hidden` the rest of the game state.

    A five-item tuple, so it never equals a `BoulderDashState`; the paper's levels keep
    the four-item states (and their speed).
    """

    __slots__ = ()

    def __new__(cls, grid: bytes, agent: int, gems: int, board: Board, hidden: Hidden) -> DynamicState:
        return tuple.__new__(cls, (grid, agent, gems, board, hidden))

    @property
    def hidden(self) -> Hidden:
        return self[4]

    def __repr__(self) -> str:
        return f"DynamicState(agent={self.agent}, gems={self.gems}, board={self.board!r}, hidden={self.hidden!r})"


def rules_of(state: BoulderDashState) -> Rules:
    """The diamonds required and game parameters of a state's level."""
    extra = state.board.extra
    return extra if isinstance(extra, Rules) else Rules(extra)


def parameter_fields(rules: Rules) -> list[int]:
    """The trailing level fields of `rules` (empty for the default parameters)."""
    if rules == Rules(rules.gems_required):
        return []
    return [
        int(rules.gravity), rules.magic_wall_steps, rules.blob_chance, round(rules.blob_max_percentage * _MILLION),
        int(rules.disable_explosions), rules.butterfly_explosion_ver, rules.butterfly_move_ver, rules.random_seed,
    ]  # fmt: skip


def rules_from_fields(required: int, fields: Sequence[int]) -> Rules:
    """`Rules` from the trailing parameter fields; `LevelFormatError` naming a field out of range."""
    for name, value, (low, high) in zip(PARAMETER_FIELDS, fields, _FIELD_BOUNDS, strict=True):
        if not low <= value <= high:
            raise LevelFormatError(f"parameter field {name} is {value}; it must be between {low} and {high}")
    gravity, magic, chance, millionths, disable, explosion_ver, move_ver, seed = fields
    return Rules(required, bool(gravity), magic, chance, millionths / _MILLION, bool(disable), explosion_ver,
                 move_ver, seed)  # fmt: skip


def diamond_bound(cells: Sequence[int]) -> int | None:
    """The most diamonds a level can ever hold in all, or None when nothing bounds it.

    Diamonds are made only by `_DIAMOND_MAKERS`; without them the level's diamonds are
    all it gets, plus, with a magic wall, its stones (falling stones and explosions to
    stone included), which the wall may turn into diamonds one for one. Without a maker
    no rule makes a stone either (blobs turn into stones), so no later state holds more.
    """
    present = set(cells)
    if not present.isdisjoint(_DIAMOND_MAKERS):
        return None
    bound = sum(code in _DIAMONDS for code in cells)
    if not present.isdisjoint(_MAGIC_WALLS):
        bound += sum(code in _STONES for code in cells)
    return bound


def check_gems_required(cells: Sequence[int], required: int) -> None:
    """`LevelFormatError` for a level that provably can never be solved for want of diamonds.

    The closed exit opens only once `required` diamonds are collected, so a level
    needing more than `diamond_bound` is refused, unless it is solved already (the
    agent starts in the exit) or holds an open exit, which the agent enters whatever it
    has collected. Every other level is accepted, as the official loader accepts it.
    """
    bound = diamond_bound(cells)
    if bound is None or required <= bound or AGENT_IN_EXIT in cells or EXIT_OPEN in cells:
        return
    stones = " (counting its stones, which a magic wall may turn into diamonds)" if _MAGIC_WALLS & set(cells) else ""
    raise LevelFormatError(
        f"gems_required is {required} but the level holds at most {bound} diamonds{stones}, nothing on it makes more "
        f"(no butterfly, blob, nut or explosion to diamond) and its exit is closed, so it can never be solved"
    )


def make_state(cells: Sequence[int], rows: int, cols: int, rules: Rules) -> BoulderDashState:
    """The initial state: a fast-path state for the paper's elements with the default parameters.

    `LevelFormatError` for a level that can never be solved for want of diamonds
    (`check_gems_required`).
    """
    agents = count_exactly(cells, set(_ALIVE), 1, "agent (code 0 or 9)")
    check_gems_required(cells, rules.gems_required)
    if rules == Rules(rules.gems_required) and STATIC_CODES.issuperset(cells):
        return BoulderDashState(bytes(cells), agents[0], 0, Board.of(rows, cols, rules.gems_required))
    in_exit = cells[agents[0]] == AGENT_IN_EXIT
    return DynamicState(bytes(cells), agents[0], 0, Board.of(rows, cols, rules), initial_hidden(rules, in_exit))


class BoulderDash(Domain[BoulderDashState]):
    """BoulderDash with every official element and parameter, and the paper's level generators."""

    name = "boulderdash"
    header_fields: ClassVar[tuple[str, ...]] = ("rows", "cols", "gems_required")
    exact_solver: ClassVar[str | None] = "bfs"  # BFS on the dirt-blind solver key is fast
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "standard": {"keys": 1, "diamonds": 1, "decoy": True, "dirt": 0.1},
        "hard": {"keys": 1, "diamonds": 4, "decoy": True, "dirt": 0.1},
        "ood": {"keys": 2, "diamonds": 1, "decoy": False, "dirt": 0.1},
    }

    def parse(self, fields: Sequence[int]) -> BoulderDashState:
        """The official level format, optionally followed by the eight parameter fields."""
        extra = len(PARAMETER_FIELDS)
        size = fields[0] * fields[1] if len(fields) >= 2 and min(fields[:2]) > 0 else 0
        after_cells = len(fields) - len(self.header_fields) - size
        if size and after_cells > 0 and after_cells != extra:
            raise LevelFormatError(
                f"{after_cells} fields follow the {size} cells of a {fields[0]}x{fields[1]} level; only the "
                f"{extra} parameter fields may ({', '.join(PARAMETER_FIELDS)})"
            )
        with_parameters = size > 0 and after_cells == extra
        (rows, cols, required), cells = split_level(fields[:-extra] if with_parameters else fields,
                                                    self.header_fields)  # fmt: skip
        low, high = GEMS_REQUIRED_BOUNDS
        if not low <= required <= high:
            raise LevelFormatError(f"gems_required is {required}; it must be between {low} and {high}")
        check_codes(cells, range(NUM_CODES), self.name, cols)
        rules = rules_from_fields(required, fields[-extra:]) if with_parameters else Rules(required)
        return make_state(cells, rows, cols, rules)

    def check_level(self, state: BoulderDashState) -> None:
        if not any(code in (EXIT_CLOSED, EXIT_OPEN, AGENT_IN_EXIT) for code in state.grid):
            raise LevelFormatError(f"the level has no exit (code {EXIT_CLOSED} or {EXIT_OPEN}), so it cannot be solved")

    def encode(self, state: BoulderDashState) -> list[int]:
        if state.gems:
            raise ValueError("a BoulderDash state with collected diamonds cannot be written as a level")
        if self.is_dead(state):
            raise ValueError("a BoulderDash state whose agent was killed cannot be written as a level")
        rules = rules_of(state)
        if isinstance(state, DynamicState) and state.hidden != initial_hidden(rules, self.is_goal(state)):
            raise ValueError("a BoulderDash state after moves of its magic walls, blobs or oranges cannot be written "
                             "as a level")  # fmt: skip
        return [state.board.rows, state.board.cols, rules.gems_required, *state.grid, *parameter_fields(rules)]

    def grid_codes(self, state: BoulderDashState) -> list[int]:
        return list(state.grid)

    def step(self, state: BoulderDashState, action: int) -> BoulderDashState:
        if type(state) is DynamicState:  # the episode is over once the official flags say so
            return state if state[4].over else _step_scan(state, action)
        grid, agent = state.grid, state.agent
        if grid[agent] != AGENT:  # in the exit or killed: the episode is over
            return state
        board = state.board
        moves = board.moves[action]
        target = moves[agent]
        code = grid[target] if target >= 0 else BRICK_WALL
        if code in _OPEN_GATES:
            target = moves[target]
            code = grid[target] if target >= 0 else BRICK_WALL
            enterable = code in _LANDABLE
        else:
            enterable = code in _ENTERABLE
        gems = state.gems
        if enterable:
            new = bytearray(grid)
            new[agent] = EMPTY
            if code in _DIAMONDS:
                gems += 1
            elif code in GATE_OF_KEY:
                closed, opened_gate = GATE_OF_KEY[code]
                new = new.replace(bytes([closed]), bytes([opened_gate]))
            new[target] = AGENT_IN_EXIT if code == EXIT_OPEN else AGENT
        elif DIAMOND_FALLING in grid:
            new, target = bytearray(grid), agent
        elif gems >= board.extra and EXIT_CLOSED in grid:  # the agent stays and nothing falls: the exit opens
            return BoulderDashState(open_exit(grid, gems, board.extra), agent, gems, board)
        else:
            return state
        if DIAMOND_FALLING in new:
            update_falling_diamonds(new, board.cols)
        return BoulderDashState(open_exit(bytes(new), gems, board.extra), target, gems, board)

    def is_goal(self, state: BoulderDashState) -> bool:
        """The agent is in the exit (the official `is_solution`).

        The agent's cell holding the agent in the exit (code 9) or the agent (code 0)
        settles it, as on the paper's levels; anything else there, on the other levels,
        may be a butterfly that moved onto the agent, so the official flag decides.
        """
        code = state.grid[state.agent]
        if code == AGENT_IN_EXIT:
            return True
        return code != AGENT and type(state) is DynamicState and state[4].agent_in_exit

    def is_dead(self, state: BoulderDashState) -> bool:
        """The agent was killed: an explosion reached it (whatever the cause: falling objects,
        creatures, bombs, chained explosions).

        On the paper's levels the explosion shows on the agent's cell. On the others the
        agent's cell holding the agent (code 0 or 9) still means alive, and anything else
        there may be a butterfly that moved onto the agent without killing it, so the
        official flag decides.
        """
        code = state.grid[state.agent]
        if code in _ALIVE:
            return False
        return type(state) is not DynamicState or not state[4].agent_alive

    def solver_key(self, state: BoulderDashState) -> Any:
        """Dirt and empty cells act alike while nothing falls, so the solver then merges them.

        A falling diamond falls into empty cells but lands on dirt, so a state holding
        one keeps its dirt; resting diamonds never start falling with gravity off, so
        once the falling ones have landed the merge is sound for every later state.
        Levels with other elements or parameters are never merged: stones, creatures
        and blobs treat dirt and empty cells differently.
        """
        if type(state) is DynamicState:
            return state
        if DIAMOND_FALLING in state.grid:
            return (state.grid, state.gems)
        return (state.grid.translate(_DIRT_TO_EMPTY), state.gems)

    def may_reach(self, starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """What the rules never undo, for the paper's elements: steel, the exit's cell and each gate's cell
        stay; dirt, brick walls, keys and closed gates only vanish; diamonds are never made; explosions never
        clear; at most one agent.

        A start showing any other element (or an explosion, which may turn into a stone
        or a diamond) only keeps what no official rule creates: steel, exits, gates,
        keys, brick walls, dirt and the in-dirt codes only vanish (a butterfly that
        turns and moves at once overwrites whatever it meets), and at most one agent.
        Gravity does not show in an observation; it only moves diamonds there, which
        keeps the first set. Channels are the visible ones (`VISIBLE_CHANNEL`).
        """
        moving = _shows_moving_elements(starts)
        if not moving.any():
            return _paper_invariants(starts, goals)
        if moving.all():
            return _creation_free_invariants(starts, goals)
        return np.where(moving, _creation_free_invariants(starts, goals), _paper_invariants(starts, goals))

    def heuristic(self, state: BoulderDashState) -> float:
        """Admissible: each action moves at most two cells (a gate jump) and collects at most one diamond."""
        if self.is_goal(state):
            return 0.0
        missing = max(0, rules_of(state).gems_required - state.gems)
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
        lines = ["".join(TEXT[c] for c in state.grid[r * cols : (r + 1) * cols]) for r in range(state.board.rows)]
        border = "+" + "-" * cols + "+"
        rules = rules_of(state)
        legend = [LEGEND] if isinstance(state.board.extra, int) else [LEGEND, MORE_LEGEND, _describe_rules(rules)]
        return "\n".join(
            [border, *(f"|{line}|" for line in lines), border,
             f"diamonds: {state.gems} of {rules.gems_required} required", *legend]
        )  # fmt: skip

    def render_image(self, state: BoulderDashState, cell: int = 16) -> np.ndarray:
        rows, cols = state.board.rows, state.board.cols
        plane = SPRITE_INDEX[np.frombuffer(state.grid, dtype=np.uint8)].reshape(rows, cols)
        return draw_cells(plane, SPRITES, cell)

    def describe(self, state: BoulderDashState) -> str:
        closed = sum(code in CLOSED_GATES for code in state.grid)
        rules = rules_of(state)
        gravity = ", gravity on" if rules.gravity else ""
        return (f"boulderdash {state.board.rows}x{state.board.cols}, {rules.gems_required} gems required, "
                f"{closed} locked{gravity}")  # fmt: skip

    def generate(
        self,
        seed: int,
        *,
        keys: int = 1,
        diamonds: int = 1,
        decoy: bool = True,
        dirt: float = 0.1,
        gravity: bool = False,
        stones: int = 0,
        fireflies: int = 0,
        butterflies: int = 0,
    ) -> BoulderDashState:
        """A 14x14 five-room level from the paper's generator (spec section 3.6).

        `keys` = 1: the diamond room is locked by a gate whose key lies in another
        room (the standard and, with `diamonds` = 4, the hard levels); `keys` = 2: the
        key room is itself locked and its key lies in a third room (the out-of-
        distribution levels). `decoy` adds, with probability 1/2, a key of another
        colour (the one-key reference always draws for it). The draws are those of the reference with
        `numpy.random.default_rng(seed)`: seeds 50001-50100 give the one-key test set,
        seeds 40000-40099 with 4 diamonds the hard test set. `gravity` is the game
        parameter; `stones`, `fireflies` and `butterflies` are placed on free cells after
        every other draw (creatures away from the agent), so without them the levels are
        the paper's.
        """
        if keys not in (1, 2):
            raise ValueError("keys must be 1 (standard) or 2 (two consecutive locked doors)")
        if not 1 <= diamonds <= 20:
            raise ValueError("diamonds must be between 1 and 20")
        check_probability("dirt", dirt)
        extras = Extras(stones, fireflies, butterflies)
        if min(extras) < 0:
            raise ValueError("stones, fireflies and butterflies are counts (0 or more)")
        cells = generate_cells(seed, keys, diamonds, decoy, dirt, extras)
        return make_state(cells, SIZE, SIZE, Rules(diamonds, gravity=gravity))


def _step_scan(state: DynamicState, action: int) -> BoulderDashState:
    """One official step (agent, then the row-major scan) of a level beyond the paper's."""
    scan = Scan(state.grid, state.agent, state.gems, state.board, state.board.extra, state.hidden)
    scan.move_agent(action)
    scan.update_all()
    grid, hidden = bytes(scan.grid), scan.hidden()
    if grid == state.grid and hidden == state.hidden and scan.gems == state.gems and scan.agent == state.agent:
        return state
    return DynamicState(grid, scan.agent, scan.gems, state.board, hidden)


def _describe_rules(rules: Rules) -> str:
    """The parameters that differ from the official defaults, on one line."""
    defaults = Rules(rules.gems_required)
    changed = [f"{name}={value}" for name, value, default in zip(rules._fields, rules, defaults, strict=True)
               if value != default]  # fmt: skip
    return "parameters: " + (", ".join(changed) if changed else "official defaults")


_CHANNEL = {code: int(VISIBLE_CHANNEL[code]) for code in range(NUM_CODES)}
_GATE_PLANES = [(_CHANNEL[closed], _CHANNEL[opened]) for closed, opened in zip(CLOSED_GATES, OPEN_GATES, strict=True)]
#: Planes whose cells never change in a paper-style level (a gate's two planes together).
_FIXED = [(_CHANNEL[STEEL_WALL],), (_CHANNEL[EXIT_CLOSED], _CHANNEL[EXIT_OPEN], _CHANNEL[AGENT_IN_EXIT]), *_GATE_PLANES]
#: Planes whose cells only ever vanish in a paper-style level.
_VANISHING = [_CHANNEL[DIRT], _CHANNEL[BRICK_WALL], *(_CHANNEL[key] for key in KEYS), *(c for c, _ in _GATE_PLANES)]
_IN_DIRT = [_CHANNEL[code] for code in (PEBBLE_IN_DIRT, STONE_IN_DIRT, VOID_IN_DIRT)]
_AGENTS = (_CHANNEL[AGENT], _CHANNEL[AGENT_IN_EXIT])
_EXPLOSION_CHANNEL = _CHANNEL[EXPLOSION]
#: Channel ranges of the elements beyond the paper's levels, and of explosions: stones;
#: fireflies and butterflies; magic walls, blobs and explosions; nuts, bombs, oranges and 47-49.
_MOVING_RANGES = ((3, 4), (8, 10), (12, 16), (28, 34))


def _shows_moving_elements(starts: np.ndarray) -> np.ndarray:
    """Which observations [B] show an element beyond the paper's levels or an explosion."""
    moving = np.zeros(len(starts), dtype=bool)
    for low, high in _MOVING_RANGES:
        moving |= starts[:, low:high].any(axis=(1, 2, 3))
    return moving


def _paper_invariants(starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
    keep = count(goals, _AGENTS) <= 1
    for planes in _FIXED:
        keep &= unchanged(starts, goals, planes)
    for plane in _VANISHING:
        keep &= only_cleared(starts, goals, (plane,))
    keep &= only_set(starts, goals, (_EXPLOSION_CHANNEL,))
    diamonds = (_CHANNEL[DIAMOND],)
    return keep & (count(goals, diamonds) <= count(starts, diamonds))


def _creation_free_invariants(starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """What holds with every element: what no rule creates only vanishes; at most one agent."""
    keep = count(goals, _AGENTS) <= 1
    for planes in [*_FIXED, *((plane,) for plane in _VANISHING + _IN_DIRT)]:
        keep &= only_cleared(starts, goals, planes)
    return keep
