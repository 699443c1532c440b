"""Box-World: open the right sequence of locked boxes to reach the gem.

Rules (spec/domains.md section 1, checked against the reference traces):

- Codes: 0-11 colours, 12 the goal gem, 13 agent, 14 empty, 15 wall.
- When a level is loaded, every coloured cell (codes 0-12) is classified once from its
  left and right neighbours: a *lock* has a coloured left neighbour, a *loose key* has
  no coloured neighbour on either side, and any other coloured cell is the *content*
  of the box whose lock is on its right. A box is the pair ``[content | lock]``.
- Moving onto a loose key picks it up (a key already held is overwritten). Moving onto
  a lock whose colour is the held key consumes the key, empties the box and gives
  the agent its content; a box can be opened from above, below or the right. Every
  other coloured cell, and walls, block.
- Goal: holding the gem (inventory 12). Opening a distractor box wastes a key the main
  path needs, which makes the level unsolvable; this is not detected.

Decision: code 15 (wall) is accepted in files as an impassable cell that is never
classified as a key, box or lock (the reference would misclassify it).

The observation is (16, R+2, C+2): the board at offset (1, 1), channel = code, the
border ring is wall except its four corners, and a held key is shown in the top-left
corner in the key's channel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from sgps.domains.base import (
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

NUM_COLOURS = 12
GEM, AGENT, EMPTY, WALL = 12, 13, 14, 15
NO_KEY = AGENT  # the inventory code meaning "nothing held", as in the reference
NUM_CHANNELS = 16
_NOTHING = 255  # a code that sets no observation channel

_PALETTE: tuple[tuple[int, int, int], ...] = (
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48), (145, 30, 180),
    (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212), (0, 128, 128), (170, 110, 40),
    (255, 255, 255),
)  # fmt: skip
_FLOOR, _BORDER = (215, 215, 215), (70, 70, 70)
# Sprite ids: 0-12 box content / gem, 13 agent, 14 empty, 15 wall,
# 16-28 lock of colour c, 29-41 loose key of colour c, 42-54 key held (border corner), 55 corner.
_LOCK, _KEY, _HELD, _CORNER = 16, 29, 42, 55
_SPRITES = (
    *(Sprite(colour) for colour in _PALETTE[:NUM_COLOURS]),
    Sprite(_PALETTE[GEM], "diamond", (212, 175, 55)),
    Sprite(_FLOOR, "circle", (10, 10, 10)),
    Sprite(_FLOOR),
    Sprite(_BORDER),
    *(Sprite(colour, "frame", (10, 10, 10)) for colour in _PALETTE),
    *(Sprite(_FLOOR, "circle", colour) for colour in _PALETTE),
    *(Sprite(_BORDER, "circle", colour) for colour in _PALETTE),
    Sprite(_BORDER),
)


class BoxWorldLayout(NamedTuple):
    """The load-time classification of coloured cells (never recomputed)."""

    locks: frozenset[int]
    keys: frozenset[int]


class BoxWorldState(NamedTuple):
    """A Box-World position; `board.extra` is the level's `BoxWorldLayout`."""

    grid: bytes
    agent: int
    inventory: int  # colour of the held key, NO_KEY (13) when none
    board: Board


def classify(cells: Sequence[int], rows: int, cols: int) -> BoxWorldLayout:
    """Locks and loose keys of a level, from each coloured cell's row neighbours."""

    def coloured(index: int) -> bool:
        return cells[index] <= GEM

    locks, keys = set(), set()
    for index, code in enumerate(cells):
        if code > GEM:
            continue
        col = index % cols
        left = col > 0 and coloured(index - 1)
        right = col < cols - 1 and coloured(index + 1)
        if left:
            locks.add(index)
        elif not right:
            keys.add(index)
    return BoxWorldLayout(frozenset(locks), frozenset(keys))


class BoxWorld(Domain[BoxWorldState]):
    """Box-World with the reference rules and the paper's generator."""

    name = "boxworld"
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "standard": {"size": 20, "goal_length": 5, "distractors": 2, "distractor_length": 3, "fixed_chains": False},
    }

    def parse(self, fields: Sequence[int]) -> BoxWorldState:
        (rows, cols), cells = split_level(fields, self.header_fields)
        check_codes(cells, range(NUM_CHANNELS), self.name, cols)
        (agent,) = count_exactly(cells, {AGENT}, 1, "agent (code 13)")
        board = Board.of(rows, cols, classify(cells, rows, cols))
        return BoxWorldState(bytes(cells), agent, NO_KEY, board)

    def check_level(self, state: BoxWorldState) -> None:
        if GEM not in state.grid:
            raise LevelFormatError(f"the level has no goal gem (code {GEM}), so it cannot be solved")

    def encode(self, state: BoxWorldState) -> list[int]:
        if state.inventory != NO_KEY:
            raise ValueError("a Box-World state holding a key cannot be written as a level")
        return [state.board.rows, state.board.cols, *state.grid]

    def grid_codes(self, state: BoxWorldState) -> list[int]:
        return list(state.grid)

    def step(self, state: BoxWorldState, action: int) -> BoxWorldState:
        target = state.board.moves[action][state.agent]
        if target < 0:
            return state
        grid = state.grid
        code = grid[target]
        if code == EMPTY:
            inventory = state.inventory
        elif target in state.board.extra.keys:
            inventory = code
        elif code == state.inventory and target in state.board.extra.locks:
            inventory = grid[target - 1]
            new = bytearray(grid)
            new[target - 1] = EMPTY
            new[state.agent] = EMPTY
            new[target] = AGENT
            return BoxWorldState(bytes(new), target, inventory, state.board)
        else:
            return state
        new = bytearray(grid)
        new[state.agent] = EMPTY
        new[target] = AGENT
        return BoxWorldState(bytes(new), target, inventory, state.board)

    def is_goal(self, state: BoxWorldState) -> bool:
        return state.inventory == GEM

    def may_reach(self, starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """Walls stay, one agent, and coloured cells (keys, boxes, the gem) only ever vanish from the board."""
        board = (slice(1, -1), slice(1, -1))  # the held key shows in a corner of the border, outside it
        return (
            unchanged(starts, goals, (WALL,))
            & (count(goals, (AGENT,)) == 1)
            & only_cleared(starts, goals, range(GEM + 1), board)
        )

    def heuristic(self, state: BoxWorldState) -> float:
        """Manhattan distance to the gem box's lock, which the agent must step on."""
        gem = state.grid.find(GEM)
        if gem < 0 or gem + 1 not in state.board.extra.locks:
            return 0.0
        cols = state.board.cols
        ar, ac = divmod(state.agent, cols)
        lr, lc = divmod(gem + 1, cols)
        return float(abs(ar - lr) + abs(ac - lc))

    def loose_keys(self, state: BoxWorldState) -> list[int]:
        """Indices of the loose keys still on the board."""
        return sorted(i for i in state.board.extra.keys if state.grid[i] <= GEM)

    def locks(self, state: BoxWorldState) -> list[int]:
        """Indices of the locks still on the board."""
        return sorted(i for i in state.board.extra.locks if state.grid[i] <= GEM)

    def observation_shape(self, state: BoxWorldState) -> tuple[int, int, int]:
        return (NUM_CHANNELS, state.board.rows + 2, state.board.cols + 2)

    def observe(self, states: Sequence[BoxWorldState]) -> np.ndarray:
        rows, cols = states[0].board.rows, states[0].board.cols
        planes = np.full((len(states), rows + 2, cols + 2), WALL, dtype=np.uint8)
        planes[:, 1:-1, 1:-1] = stack_grids([s.grid for s in states], rows, cols)
        planes[:, [0, 0, -1, -1], [0, -1, 0, -1]] = _NOTHING
        held = np.fromiter((s.inventory for s in states), dtype=np.uint8, count=len(states))
        planes[:, 0, 0] = np.where(held == NO_KEY, _NOTHING, held)
        return one_hot(planes, NUM_CHANNELS)

    def render_text(self, state: BoxWorldState) -> str:
        rows, cols = state.board.rows, state.board.cols
        locks = state.board.extra.locks

        def char(index: int, code: int) -> str:
            if code == GEM:
                return "!"
            if code < NUM_COLOURS:
                letter = chr(ord("a") + code)
                return letter.upper() if index in locks else letter
            return {AGENT: "@", EMPTY: " ", WALL: "#"}[code]

        lines = ["".join(char(r * cols + c, state.grid[r * cols + c]) for c in range(cols)) for r in range(rows)]
        border = "+" + "-" * cols + "+"
        held = "nothing" if state.inventory == NO_KEY else "!" if state.inventory == GEM else chr(97 + state.inventory)
        legend = "@ agent  a-l loose key or box content  A-L lock (box = content|lock)  ! gem  # wall"
        return "\n".join([border, *(f"|{line}|" for line in lines), border, f"holding: {held}", legend])

    def render_image(self, state: BoxWorldState, cell: int = 16) -> np.ndarray:
        rows, cols = state.board.rows, state.board.cols
        plane = np.full((rows + 2, cols + 2), WALL, dtype=np.intp)
        inner = np.frombuffer(state.grid, dtype=np.uint8).astype(np.intp)
        layout = state.board.extra
        for index in layout.locks:
            if inner[index] <= GEM:
                inner[index] += _LOCK
        for index in layout.keys:
            if inner[index] <= GEM:
                inner[index] += _KEY
        plane[1:-1, 1:-1] = inner.reshape(rows, cols)
        plane[[0, 0, -1, -1], [0, -1, 0, -1]] = _CORNER
        if state.inventory != NO_KEY:
            plane[0, 0] = _HELD + state.inventory
        return draw_cells(plane, _SPRITES, cell)

    def describe(self, state: BoxWorldState) -> str:
        return f"boxworld {state.board.rows}x{state.board.cols}, {len(state.board.extra.locks)} boxes"

    def generate(
        self,
        seed: int,
        *,
        size: int = 20,
        goal_length: int = 5,
        distractors: int = 2,
        distractor_length: int = 3,
        fixed_chains: bool = False,
    ) -> BoxWorldState:
        """A level from the paper's generator (spec section 1.7), seed for seed.

        `goal_length` counts the loose key plus the boxes on the solution path, the
        last of which holds the gem. Each distractor chain starts with a box locked
        by a main-path colour. By default the chains keep the reference generator's
        quirk (box k+1 holds colour d[k-1], so a chain stalls after two boxes), which
        the official files contain; `fixed_chains=True` builds the intended chains
        (box k+1 holds d[k+1]).
        """
        check_generator_size(size, 3)
        if goal_length < 2:
            raise ValueError("goal_length must be at least 2 (the loose key and the gem box)")
        if goal_length - 1 > NUM_COLOURS or distractor_length > NUM_COLOURS - (goal_length - 1):
            raise ValueError("not enough colours for this goal length and distractor length")
        if distractors > 0 and distractor_length < 1:
            raise ValueError("distractor chains need at least one box")
        pairs = goal_length - 1 + max(distractors, 0) * distractor_length
        if 2 * pairs + 2 > size * size:  # each box takes two cells: refused before anything is drawn
            raise ValueError(f"{pairs} boxes, an agent and a key do not fit in a {size}x{size} level")
        rng = np.random.default_rng(seed)
        goal_colours = [int(c) for c in rng.choice(range(NUM_COLOURS), size=goal_length - 1, replace=False)]
        others = [c for c in range(NUM_COLOURS) if c not in goal_colours]
        chain_colours = [
            [int(c) for c in rng.choice(others, size=distractor_length, replace=False)] for _ in range(distractors)
        ]
        roots = [int(r) for r in rng.choice(range(goal_length - 1), size=distractors, replace=True)]
        boxes, agent_slot, key_slot = _sample_slots(pairs, size, rng)

        cells = [EMPTY] * (size * size)

        def place_box(slot: tuple[int, int], content: int, lock: int) -> None:
            r, c = slot
            cells[r * size + c] = content
            cells[r * size + c + 1] = lock

        for i in range(1, goal_length):
            place_box(boxes[i - 1], GEM if i == goal_length - 1 else goal_colours[i], goal_colours[i - 1])
        cells[key_slot[0] * size + key_slot[1]] = goal_colours[0]
        for j, (chain, root) in enumerate(zip(chain_colours, roots, strict=True)):
            first = goal_length - 1 + j * distractor_length
            place_box(boxes[first], chain[0], goal_colours[root])
            for k in range(distractor_length - 1):
                content = chain[k + 1] if fixed_chains else chain[k - 1]
                place_box(boxes[first + 1 + k], content, chain[k])
        cells[agent_slot[0] * size + agent_slot[1]] = AGENT
        return self.parse([size, size, *cells])


def _sample_slots(
    pairs: int, size: int, rng: np.random.Generator
) -> tuple[list[tuple[int, int]], tuple[int, int], tuple[int, int]]:
    """Box positions (content cell), then the agent and loose-key cells.

    Slot s is cell (s div (size-1), s mod (size-1)); slot 0 is never used. Choosing a
    box removes its slot and the slots up to two columns either side in its row. Slots
    are picked by a uniform index into the Python list of the remaining set, so the
    set's iteration order is part of the procedure (it is what the reference does).
    """
    width = size - 1
    available = set(range(1, size * width))

    def pick() -> int:
        if not available:
            raise ValueError(f"{pairs} boxes, an agent and a key do not fit in a {size}x{size} level")
        return list(available)[rng.choice(len(available))]

    boxes = []
    for _ in range(pairs):
        slot = pick()
        r, c = divmod(slot, width)
        nearby = (
            [slot]
            + [slot + i for i in range(1, min(2, width - 1 - c) + 1)]
            + [slot - i for i in range(1, min(2, c) + 1)]
        )
        available -= set(nearby)
        boxes.append((r, c))
    agent = pick()
    available -= {agent}
    key = pick()
    return boxes, divmod(agent, width), divmod(key, width)
