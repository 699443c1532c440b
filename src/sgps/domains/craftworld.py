"""CraftWorld: collect raw materials and craft at stations until the goal item is held.

Rules (spec/domains.md section 2, checked against the reference traces):

- Moves (0-3) only enter empty cells (26); everything else blocks.
- Use (4) looks at the neighbours Up, Right, Down, Left (skipping out-of-grid and
  empty cells) and acts on the first that qualifies:
  a primitive (tin, copper, wood, grass, gold, gem) is removed and collected - grass is
  removed but *not* collected; iron is mined only with a bronze pick (kept); a station
  crafts the first recipe of its priority list whose inputs are held, and ends the Use
  even if it crafted nothing; water is removed by consuming a bridge; stone is
  removed by consuming an iron pick. Other cells (walls, iron without a pick, ...) are
  skipped.
- Goal: at least one goal item (the level header's third field) held.

The observation is (27, R+4, C+4): channel = code; the board at offset (2, 2), a wall
ring (channel 1) around it and an outer ring of channel 26 (empty) whose first ten
cells of row 0 show the inventory (wood x2, copper, tin, iron, stick x2, bronze bar,
bronze pick, iron pick); other items are not shown, as in the reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from sgps.domains.base import (
    MOVE_NAMES,
    Board,
    Domain,
    check_codes,
    check_generator_size,
    count_exactly,
    one_hot,
    split_level,
    stack_grids,
)
from sgps.domains.invariants import count, only_cleared, unchanged
from sgps.domains.render import Sprite, draw_cells
from sgps.errors import LevelFormatError

# Cell and item codes (they are also the observation channels).
AGENT, WALL, WORKSHOP1, WORKSHOP2, WORKSHOP3, FURNACE, WATER, STONE, IRON = range(9)
TIN, COPPER, WOOD, GRASS, GOLD, GEM = range(9, 15)
BRONZE_BAR, STICK, PLANK, ROPE, NAILS, BRONZE_HAMMER, BRONZE_PICK, BRIDGE, IRON_PICK, GOLD_BAR, GEM_RING = range(15, 26)
EMPTY = 26
NUM_CODES = 27
USE = 4

ITEM_NAMES: dict[int, str] = {
    IRON: "iron", TIN: "tin", COPPER: "copper", WOOD: "wood", GRASS: "grass", GOLD: "gold", GEM: "gem",
    BRONZE_BAR: "bronze_bar", STICK: "stick", PLANK: "plank", ROPE: "rope", NAILS: "nails",
    BRONZE_HAMMER: "bronze_hammer", BRONZE_PICK: "bronze_pick", BRIDGE: "bridge", IRON_PICK: "iron_pick",
    GOLD_BAR: "gold_bar", GEM_RING: "gem_ring",
}  # fmt: skip
#: Goal codes a level may name (the reference loader accepts 8-25).
GOAL_CODES = range(IRON, GEM_RING + 1)
PRIMITIVES = frozenset({TIN, COPPER, WOOD, GRASS, GOLD, GEM})
STATIONS = frozenset({WORKSHOP1, WORKSHOP2, WORKSHOP3, FURNACE})

#: Each station's recipes in the order the reference tries them: (output, inputs).
RECIPES: dict[int, tuple[tuple[int, tuple[int, ...]], ...]] = {
    WORKSHOP1: ((GOLD_BAR, (GOLD,)), (BRIDGE, (PLANK, NAILS, BRONZE_HAMMER)), (NAILS, (BRONZE_BAR,)), (STICK, (WOOD,))),
    WORKSHOP2: ((GEM_RING, (GEM,)), (BRONZE_HAMMER, (BRONZE_BAR, STICK))),
    WORKSHOP3: ((IRON_PICK, (IRON, STICK)), (BRONZE_PICK, (BRONZE_BAR, STICK)), (PLANK, (WOOD,))),
    FURNACE: ((BRONZE_BAR, (COPPER, TIN)),),
}
#: The recipe of every craftable item (each item has exactly one).
RECIPE_OF: dict[int, tuple[int, ...]] = {out: ins for recipes in RECIPES.values() for out, ins in recipes}

#: Inventory markers in row 0 of the observation: (column, item, minimum count).
INVENTORY_MARKERS: tuple[tuple[int, int, int], ...] = (
    (0, WOOD, 1), (1, WOOD, 2), (2, COPPER, 1), (3, TIN, 1), (4, IRON, 1),
    (5, STICK, 1), (6, STICK, 2), (7, BRONZE_BAR, 1), (8, BRONZE_PICK, 1), (9, IRON_PICK, 1),
)  # fmt: skip

#: Goal items the generator can draw, with the raw materials placed for each.
GENERATOR_GOALS: dict[str, tuple[int, tuple[int, ...]]] = {
    "bronze_pick": (BRONZE_PICK, (COPPER, TIN, WOOD)),
    "iron_pick": (IRON_PICK, (IRON, WOOD, WOOD, COPPER, TIN)),
    "gem_ring": (GEM_RING, (IRON, WOOD, WOOD, COPPER, TIN)),
}
#: Goal distributions over (bronze_pick, iron_pick, gem_ring) of the reference's training sets.
GOAL_MIX_STANDARD = (0.2, 0.3, 0.5)
GOAL_MIX_HARD = (0.3, 0.7, 0.0)

_TEXT = "@#123F~oiTcwg.*bsprnHPBIGR "
_SPRITES = (
    Sprite((235, 235, 225), "circle", (30, 60, 200)),  # agent
    Sprite((90, 90, 90)),  # wall
    Sprite((150, 110, 70), "square", (250, 230, 120)),  # workshop 1
    Sprite((150, 110, 70), "triangle", (250, 230, 120)),  # workshop 2
    Sprite((150, 110, 70), "cross", (250, 230, 120)),  # workshop 3
    Sprite((150, 60, 40), "bars", (255, 150, 40)),  # furnace
    Sprite((70, 130, 230)),  # water
    Sprite((160, 160, 150), "circle", (110, 110, 100)),  # stone
    Sprite((235, 235, 225), "square", (120, 120, 140)),  # iron
    Sprite((235, 235, 225), "square", (200, 200, 215)),  # tin
    Sprite((235, 235, 225), "square", (205, 110, 50)),  # copper
    Sprite((235, 235, 225), "bars", (120, 75, 30)),  # wood
    Sprite((235, 235, 225), "x", (60, 170, 60)),  # grass
    Sprite((235, 235, 225), "dot", (230, 190, 30)),  # gold
    Sprite((235, 235, 225), "diamond", (220, 40, 180)),  # gem
    Sprite((245, 215, 170), "square", (190, 120, 50)),  # bronze bar
    Sprite((245, 215, 170), "bars", (120, 75, 30)),  # stick
    Sprite((245, 215, 170), "square", (180, 140, 90)),  # plank
    Sprite((245, 215, 170), "ring", (150, 120, 60)),  # rope
    Sprite((245, 215, 170), "x", (120, 120, 140)),  # nails
    Sprite((245, 215, 170), "triangle", (190, 120, 50)),  # bronze hammer
    Sprite((245, 215, 170), "cross", (190, 120, 50)),  # bronze pick
    Sprite((245, 215, 170), "frame", (120, 75, 30)),  # bridge
    Sprite((245, 215, 170), "cross", (80, 80, 100)),  # iron pick
    Sprite((245, 215, 170), "square", (230, 190, 30)),  # gold bar
    Sprite((245, 215, 170), "ring", (220, 40, 180)),  # gem ring
    Sprite((235, 235, 225)),  # empty
)
_NO_INVENTORY = bytes(NUM_CODES)

#: The count of each item, indexed by item code. Counts are unbounded, as in the
#: reference: one byte per count while every count is at most 255 (the usual case;
#: cheap to copy, and its hash is cached), a tuple of ints once one is larger.
#: `_recount` always picks the byte form when it fits, so equal counts compare equal.
Inventory = bytes | tuple[int, ...]


class CraftWorldState(NamedTuple):
    """A CraftWorld position; `board.extra` is the level's goal item code."""

    grid: bytes
    agent: int
    inventory: Inventory
    board: Board


def inventory_items(inventory: Inventory) -> list[list[int]]:
    """The held items as sorted ``[code, count]`` pairs (the reference trace form)."""
    return [[code, count] for code, count in enumerate(inventory) if count]


class CraftWorld(Domain[CraftWorldState]):
    """CraftWorld with the reference rules, recipe priorities and generator."""

    name = "craftworld"
    action_names: ClassVar[tuple[str, ...]] = (*MOVE_NAMES, "use")
    header_fields: ClassVar[tuple[str, ...]] = ("rows", "cols", "goal")
    exact_solver: ClassVar[str | None] = "bfs"  # BFS beats A* with this heuristic here
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "standard": {"size": 14, "grass": 2, "water": False, "goal": "mix"},
        "hard": {"size": 18, "grass": 4, "water": True, "goal": "mix"},
    }

    def parse(self, fields: Sequence[int]) -> CraftWorldState:
        (rows, cols, goal), cells = split_level(fields, self.header_fields)
        if goal not in GOAL_CODES:
            raise LevelFormatError(
                f"the goal field is {goal}, which is not an item code ({GOAL_CODES.start}-{GOAL_CODES.stop - 1})"
            )
        check_codes(cells, range(NUM_CODES), self.name, cols)
        (agent,) = count_exactly(cells, {AGENT}, 1, "agent (code 0)")
        return CraftWorldState(bytes(cells), agent, _NO_INVENTORY, Board.of(rows, cols, goal))

    def encode(self, state: CraftWorldState) -> list[int]:
        if any(state.inventory):
            raise ValueError("a CraftWorld state with a non-empty inventory cannot be written as a level")
        return [state.board.rows, state.board.cols, state.board.extra, *state.grid]

    def grid_codes(self, state: CraftWorldState) -> list[int]:
        return list(state.grid)

    def step(self, state: CraftWorldState, action: int) -> CraftWorldState:
        moves = state.board.moves
        if action != USE:
            target = moves[action][state.agent]
            if target < 0 or state.grid[target] != EMPTY:
                return state
            new = bytearray(state.grid)
            new[state.agent] = EMPTY
            new[target] = AGENT
            return CraftWorldState(bytes(new), target, state.inventory, state.board)
        grid, inventory = state.grid, state.inventory
        for direction in range(4):
            cell = moves[direction][state.agent]
            if cell < 0:
                continue
            code = grid[cell]
            if code in STATIONS:
                return self._craft(state, code)
            if code in PRIMITIVES:
                gained = () if code == GRASS else (code,)
                return self._use(state, cell, gained, ())
            if code == IRON and inventory[BRONZE_PICK]:
                return self._use(state, cell, (IRON,), ())
            if code == WATER and inventory[BRIDGE]:
                return self._use(state, cell, (), (BRIDGE,))
            if code == STONE and inventory[IRON_PICK]:
                return self._use(state, cell, (), (IRON_PICK,))
        return state

    @staticmethod
    def _use(state: CraftWorldState, cell: int, gained: tuple[int, ...], spent: tuple[int, ...]) -> CraftWorldState:
        """Empty `cell`, add `gained` to and remove `spent` from the inventory."""
        grid = bytearray(state.grid)
        grid[cell] = EMPTY
        return CraftWorldState(bytes(grid), state.agent, _recount(state.inventory, gained, spent), state.board)

    @staticmethod
    def _craft(state: CraftWorldState, station: int) -> CraftWorldState:
        """Craft the station's first recipe whose inputs are all held (or nothing)."""
        held = state.inventory
        for output, inputs in RECIPES[station]:
            if all(held[item] for item in inputs):
                return CraftWorldState(state.grid, state.agent, _recount(held, (output,), inputs), state.board)
        return state

    def is_goal(self, state: CraftWorldState) -> bool:
        return state.inventory[state.board.extra] > 0

    def may_reach(self, starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """Walls and stations stay, one agent, and nothing is ever put on the board: its items only vanish."""
        board = (slice(2, -2), slice(2, -2))  # the inventory shows in row 0, outside it
        return (
            unchanged(starts, goals, (WALL,))
            & unchanged(starts, goals, sorted(STATIONS))
            & (count(goals, (AGENT,)) == 1)
            & only_cleared(starts, goals, range(WATER, EMPTY), board)
        )

    def uses_needed(self, state: CraftWorldState) -> int:
        """Use actions still needed before the goal item is held: a lower bound from the recipe
        tree and the inventory, ignoring the grid (0 at a goal; an iron pick from nothing takes 10:
        2 wood, a stick twice, copper, tin, a bronze bar, a bronze pick, the iron, the pick)."""
        return _uses_needed(state.board.extra, state.inventory, set())

    def heuristic(self, state: CraftWorldState) -> float:
        """Use actions still needed (`uses_needed`) plus the walk to the next object.

        Admissible: each Use yields at most one item, and every Use needs the agent
        next to a non-empty cell, at least Manhattan distance - 1 moves away.
        """
        uses = self.uses_needed(state)
        if uses == 0:
            return 0.0
        cols = state.board.cols
        ar, ac = divmod(state.agent, cols)
        nearest = min(
            (
                abs(ar - index // cols) + abs(ac - index % cols)
                for index, code in enumerate(state.grid)
                if WORKSHOP1 <= code <= GEM
            ),
            default=1,
        )
        return float(uses + max(0, nearest - 1))

    def observation_shape(self, state: CraftWorldState) -> tuple[int, int, int]:
        return (NUM_CODES, state.board.rows + 4, state.board.cols + 4)

    def observe(self, states: Sequence[CraftWorldState]) -> np.ndarray:
        rows, cols = states[0].board.rows, states[0].board.cols
        planes = np.full((len(states), rows + 4, cols + 4), EMPTY, dtype=np.uint8)
        planes[:, 1:-1, 1:-1] = WALL
        planes[:, 2:-2, 2:-2] = stack_grids([s.grid for s in states], rows, cols)
        inventories = [s.inventory for s in states]
        try:
            counts = np.frombuffer(b"".join(inventories), dtype=np.uint8).reshape(len(states), NUM_CODES)
        except TypeError:  # a tuple inventory (a count above 255) in the batch
            counts = np.array([tuple(inventory) for inventory in inventories], dtype=np.int64)
        for column, item, minimum in INVENTORY_MARKERS:
            if column < cols + 4:
                planes[:, 0, column] = np.where(counts[:, item] >= minimum, item, EMPTY)
        return one_hot(planes, NUM_CODES)

    def render_text(self, state: CraftWorldState) -> str:
        cols = state.board.cols
        lines = [
            "".join(_TEXT[code] for code in state.grid[r * cols : (r + 1) * cols]) for r in range(state.board.rows)
        ]
        border = "+" + "-" * cols + "+"
        held = ", ".join(f"{ITEM_NAMES[c]} x{n}" for c, n in inventory_items(state.inventory)) or "nothing"
        legend = "@ agent # wall 1/2/3 workshops F furnace ~ water o stone i iron T tin c copper w wood g grass"
        return "\n".join(
            [border, *(f"|{line}|" for line in lines), border, f"goal: {ITEM_NAMES[state.board.extra]}",
             f"holding: {held}", legend]
        )  # fmt: skip

    def render_image(self, state: CraftWorldState, cell: int = 16) -> np.ndarray:
        """The board in a wall ring, with the inventory (one cell per unit) in a row below."""
        rows, cols = state.board.rows, state.board.cols
        plane = np.full((rows + 3, cols + 2), WALL, dtype=np.intp)
        plane[1 : rows + 1, 1:-1] = np.frombuffer(state.grid, dtype=np.uint8).reshape(rows, cols)
        plane[-1, :] = EMPTY
        plane[-1, 0] = state.board.extra
        units = [code for code, count in inventory_items(state.inventory) for _ in range(count)]
        for slot, code in enumerate(units[:cols]):
            plane[-1, slot + 2] = code
        return draw_cells(plane, _SPRITES, cell)

    def describe(self, state: CraftWorldState) -> str:
        return f"craftworld {state.board.rows}x{state.board.cols}, goal {ITEM_NAMES[state.board.extra]}"

    def generate(
        self, seed: int, *, size: int = 14, grass: int = 2, water: bool = False, goal: str = "mix",
        extra_primitives: int = 0,
    ) -> CraftWorldState:  # fmt: skip
        """A level from the reference generator's procedure (spec section 2.6).

        `goal` is ``mix`` (the training mix: 0.2/0.3/0.5 bronze pick / iron pick / gem
        ring, or 0.3/0.7/0 with `water`) or one of ``bronze_pick``, ``iron_pick``,
        ``gem_ring``. A gem-ring goal puts the gem in a cave of four stones; `water`
        adds the hard levels' four water arms. The draws are those of the reference
        with `numpy.random.default_rng(seed)`, so its sets are reproduced exactly: the
        standard test set is seeds 50000-50099 with goal gem_ring, the hard one seeds
        20000-20099 with size 18, 4 grass, water and goal iron_pick.
        """
        names = list(GENERATOR_GOALS)
        if goal == "mix":
            probabilities = GOAL_MIX_HARD if water else GOAL_MIX_STANDARD
        elif goal in GENERATOR_GOALS:
            probabilities = tuple(1.0 if name == goal else 0.0 for name in names)
        else:
            raise ValueError(f"goal must be 'mix' or one of {', '.join(names)}, not {goal!r}")
        check_generator_size(size, 5)
        if grass < 0 or extra_primitives < 0:
            raise ValueError("CraftWorld levels need non-negative grass and extra_primitives")
        rng = np.random.default_rng(seed)
        grid = np.full((size, size), EMPTY, dtype=np.intp)
        goal_code, materials = GENERATOR_GOALS[names[int(rng.choice(len(names), p=probabilities))]]

        if water:
            middle = size // 2
            for i in range(middle - 2):
                for r, c in ((middle, i), (i, middle), (middle, size - 1 - i), (size - 1 - i, middle)):
                    grid[r, c] = WATER
        if goal_code == GEM_RING:
            inner = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1) if grid[r, c] == EMPTY]
            r, c = inner[rng.choice(len(inner))]
            grid[r, c] = GEM
            for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                grid[r + dr, c + dc] = STONE
        for material in materials:
            grid[_spacious_cell(grid, rng, seed)] = material
        for _ in range(extra_primitives):
            grid[_spacious_cell(grid, rng, seed)] = rng.choice([GRASS, WOOD])
        for station in (WORKSHOP1, WORKSHOP2, WORKSHOP3, FURNACE):
            grid[_spacious_cell(grid, rng, seed)] = station
        grid[_spacious_cell(grid, rng, seed)] = AGENT
        for _ in range(grass):
            grid[_spacious_cell(grid, rng, seed)] = GRASS
        return self.parse([size, size, goal_code, *grid.ravel().tolist()])


def _recount(held: Inventory, gained: tuple[int, ...], spent: tuple[int, ...]) -> Inventory:
    """`held` with one more of each `gained` item and one fewer of each `spent` item.

    Stays in the byte form unless a gained count passes 255; a tuple inventory goes
    back to bytes once every count fits again.
    """
    counts: bytearray | list[int] = bytearray(held) if type(held) is bytes else list(held)
    for item in spent:
        counts[item] -= 1
    for item in gained:
        if counts[item] == 255 and type(counts) is bytearray:
            counts = list(counts)
        counts[item] += 1
    if type(counts) is bytearray or max(counts) <= 255:
        return bytes(counts)
    return tuple(counts)


def _uses_needed(item: int, held: Inventory, visiting: set[int]) -> int:
    """A lower bound on the Use actions that obtain one more `item` (0 if held)."""
    if held[item]:
        return 0
    if item in PRIMITIVES or item in visiting:
        return 1
    if item == IRON:
        return 1 + _uses_needed(BRONZE_PICK, held, visiting | {IRON})
    inputs = RECIPE_OF.get(item)
    if inputs is None:  # rope: never craftable
        return 1
    return 1 + sum(_uses_needed(part, held, visiting | {item}) for part in inputs)


def _spacious_cell(grid: np.ndarray, rng: np.random.Generator, seed: int) -> tuple[int, int]:
    """A uniformly drawn empty cell with no object within distance 1 and no station within 2."""
    occupied = grid != EMPTY
    station = np.isin(grid, list(STATIONS))
    # A cell q is unusable as a neighbour of p if it is occupied or next to a station.
    unusable = occupied | _dilate(station)
    candidates = np.argwhere(~_dilate(unusable))
    if len(candidates) == 0:
        raise ValueError(f"seed {seed}: no room left to place every object; use a larger size or less grass")
    r, c = candidates[rng.choice(len(candidates))]
    return int(r), int(c)


def _dilate(mask: np.ndarray) -> np.ndarray:
    """Cells with a true cell of `mask` within Chebyshev distance 1 (in-grid cells only)."""
    rows, cols = mask.shape
    padded = np.pad(mask, 1)
    out = np.zeros_like(mask)
    for dr in range(3):
        for dc in range(3):
            out |= padded[dr : dr + rows, dc : dc + cols]
    return out
