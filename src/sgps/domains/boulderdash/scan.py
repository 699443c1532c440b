"""One step of BoulderDash with every element and parameter, as the official simulator plays it.

A step moves the agent, then updates the other cells in one row-major scan; a cell that
something moved into, or that an update wrote, this step is not updated again in the
same scan (the official `has_updated` flags). Each element's update follows the
official branch order; docs/domains.md lists the rules per element and the official
quirks kept. The paper's levels (gravity off, none of the moving elements) never come
here: `BoulderDash.step` plays them with a fast path that gives the same grids.

The random state is the official xorshift64 state, seeded with one splitmix64 step;
oranges draw one number when they turn, blobs two per update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from sgps.domains.base import Board
from sgps.domains.boulderdash.elements import (
    AGENT,
    AGENT_IN_EXIT,
    BLOB,
    BOMB,
    BOMB_FALLING,
    BUTTERFLIES,
    CAN_EXPLODE,
    CONSUMABLE,
    DIAMOND,
    DIAMOND_FALLING,
    DIRT,
    EMPTY,
    EXIT_CLOSED,
    EXIT_OPEN,
    EXPLOSION,
    EXPLOSION_DIAMOND,
    EXPLOSION_STONE,
    FIREFLIES,
    GATE_OF_KEY,
    MAGIC_DORMANT,
    MAGIC_EXPIRED,
    MAGIC_ON,
    NUT,
    NUT_FALLING,
    OPEN_GATES,
    ORANGES,
    PROPERTIES,
    PUSHABLE,
    ROUNDED,
    STONE,
    STONE_FALLING,
    TRAVERSABLE,
)

MASK64 = (1 << 64) - 1
#: No blob swap yet (the official null element).
NO_SWAP = -1
UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3
#: The eight neighbours in the official order: up, right, down, left, then the diagonals
#: up-right, down-right, down-left, up-left.
_AROUND = ((-1, 0), (0, 1), (1, 0), (0, -1), (-1, 1), (1, 1), (1, -1), (-1, -1))


class Rules(NamedTuple):
    """A level's diamonds required and game parameters (the official `GameParameters`, same defaults)."""

    gems_required: int
    gravity: bool = False
    magic_wall_steps: int = 140
    blob_chance: int = 20  # out of 256
    blob_max_percentage: float = 0.16
    disable_explosions: bool = False
    butterfly_explosion_ver: int = 1  # 1: a falling stone explodes a butterfly; 2: turns it into a diamond
    butterfly_move_ver: int = 1  # 1: a blocked butterfly only turns; 2: it turns and moves at once
    random_seed: int = 0  # the random state starts as splitmix64(random_seed)


class Hidden(NamedTuple):
    """The official game state beyond the grid that later steps depend on.

    The agent's fate is kept as the official flags, set during the step, not read off the
    grid afterwards: a butterfly that turns and moves at once (`butterfly_move_ver` 2)
    may move onto the agent in the exit, or onto the agent itself from the other end of
    a row, and officially the agent is then still in the exit, or still alive.
    """

    magic_wall_steps: int  # active steps the magic walls have left (counts down while active)
    magic_active: bool
    blob_swap: int  # what every blob turns into from now on, or NO_SWAP
    random_state: int  # the xorshift64 state
    agent_alive: bool  # cleared when an explosion reaches a cell holding the agent (code 0)
    agent_in_exit: bool  # set when the agent enters the open exit (or the level starts with code 9)

    @property
    def over(self) -> bool:
        """The episode has ended: the agent was killed or is in the exit (the official `is_terminal`)."""
        return self.agent_in_exit or not self.agent_alive


def splitmix64(seed: int) -> int:
    """The official seeding: one splitmix64 step from `seed`, as a 64-bit unsigned value."""
    value = (seed + 0x9E3779B97F4A7C15) & MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK64
    return value ^ (value >> 31)


def initial_hidden(rules: Rules, in_exit: bool = False) -> Hidden:
    """The hidden state of a level before its first step (what the official constructor sets).

    `in_exit`: the level starts with the agent in the exit (code 9).
    """
    return Hidden(rules.magic_wall_steps, False, NO_SWAP, splitmix64(rules.random_seed), True, in_exit)


@lru_cache(maxsize=256)
def blob_max_size(cells: int, percentage: float) -> int:
    """The official largest blob: the cell count times the percentage, in single precision, truncated."""
    return int(np.float32(cells) * np.float32(percentage))


def _table(codes: set[int]) -> bytes:
    return bytes(code in codes for code in range(256))


#: Codes the scan updates, without and with gravity (resting stones, diamonds, nuts and
#: bombs wait for gravity; everything else moves or changes on its own).
_MOVING = {
    STONE_FALLING, DIAMOND_FALLING, EXIT_CLOSED, *FIREFLIES, *BUTTERFLIES, MAGIC_DORMANT, MAGIC_ON, MAGIC_EXPIRED,
    BLOB, EXPLOSION_DIAMOND, EXPLOSION_STONE, EXPLOSION, NUT_FALLING, BOMB_FALLING, *ORANGES,
}  # fmt: skip
SCANNED = (_table(_MOVING), _table(_MOVING | {STONE, DIAMOND, NUT, BOMB}))
_RESTING = _table({STONE, DIAMOND, NUT, BOMB})
#: What holds a resting element in place: a cell neither empty (to fall into) nor rounded (to roll off).
_HOLDS = bytes(code != EMPTY and not PROPERTIES[code] & ROUNDED for code in range(256))
_FIREFLY_OF = dict(zip((UP, LEFT, DOWN, RIGHT), FIREFLIES, strict=True))
_BUTTERFLY_OF = dict(zip((UP, LEFT, DOWN, RIGHT), BUTTERFLIES, strict=True))
_ORANGE_OF = dict(zip((UP, LEFT, DOWN, RIGHT), ORANGES, strict=True))
_HEADING = {code: d for table in (_FIREFLY_OF, _BUTTERFLY_OF, _ORANGE_OF) for d, code in table.items()}
_FALLING_OF = {STONE: STONE_FALLING, NUT: NUT_FALLING, BOMB: BOMB_FALLING}
_AFTER_EXPLOSION = {EXPLOSION_DIAMOND: DIAMOND, EXPLOSION_STONE: STONE, EXPLOSION: EMPTY}
_MAGIC = (MAGIC_DORMANT, MAGIC_ON)


def explosion_of(code: int) -> int:
    """The explosion an exploding element leaves: a diamond one for butterflies, an empty one otherwise."""
    return EXPLOSION_DIAMOND if code in BUTTERFLIES else EXPLOSION


class Scan:
    """The mutable game state of one step: the grid, the agent, the counters and the updated cells."""

    def __init__(self, grid: bytes, agent: int, gems: int, board: Board, rules: Rules, hidden: Hidden) -> None:
        self.grid = bytearray(grid)
        self.agent = agent
        self.gems = gems
        self.rows, self.cols = board.rows, board.cols
        self.moves = board.moves
        self.rules = rules
        self.magic_steps, self.magic_active, self.blob_swap, self.random_state, self.alive, self.in_exit = hidden
        self.updated: set[int] = set()
        self.blob_size = 0
        self.blob_enclosed = True

    def hidden(self) -> Hidden:
        return Hidden(self.magic_steps, self.magic_active, self.blob_swap, self.random_state, self.alive, self.in_exit)

    # -- primitives --------------------------------------------------------------------

    def put(self, index: int, code: int) -> None:
        self.grid[index] = code
        self.updated.add(index)

    def move(self, source: int, target: int) -> None:
        self.grid[target] = self.grid[source]
        self.grid[source] = EMPTY
        self.updated.add(target)

    def next_random(self) -> int:
        state = self.random_state
        state ^= (state << 13) & MASK64
        state ^= state >> 7
        state ^= (state << 17) & MASK64
        self.random_state = state
        return state

    def is_empty(self, index: int) -> bool:
        """The cell is on the grid and empty (`index` is -1 off the grid)."""
        return index >= 0 and self.grid[index] == EMPTY

    def adjacent(self, index: int, codes: tuple[int, ...]) -> bool:
        grid, moves = self.grid, self.moves
        for direction in (UP, LEFT, DOWN, RIGHT):
            target = moves[direction][index]
            if target >= 0 and grid[target] in codes:
                return True
        return False

    def roll_side(self, index: int) -> int:
        """The cell a resting or falling element rolls to off a rounded cell below (left first), or -1."""
        moves = self.moves
        below = moves[DOWN][index]
        if below < 0 or not PROPERTIES[self.grid[below]] & ROUNDED:
            return -1
        for side in (LEFT, RIGHT):
            if self.is_empty(moves[side][index]) and self.is_empty(moves[side][below]):
                return moves[side][index]
        return -1

    def roll(self, index: int, side: int, code: int) -> None:
        self.put(index, code)
        self.move(index, side)

    def explode(self, centre: int, code: int) -> None:
        """Blow up `centre` into `code`; its neighbours become its own explosion, chaining through those that explode.

        Depth first in the official neighbour order, as the official recursion (kept as
        an explicit stack so that long chains of bombs do not hit the recursion limit).
        """
        stack = [self._blast(centre, code)]
        while stack:
            for neighbour, blast in stack[-1]:
                if PROPERTIES[self.grid[neighbour]] & CAN_EXPLODE:
                    stack.append(self._blast(neighbour, blast))
                    break
                if PROPERTIES[self.grid[neighbour]] & CONSUMABLE:
                    self.put(neighbour, blast)
            else:
                stack.pop()

    def _blast(self, index: int, code: int) -> Iterator[tuple[int, int]]:
        """Set `index` to `code`, then yield its on-grid neighbours with the explosion its old element leaves.

        Blowing up a cell that holds the agent (code 0) clears the official alive flag;
        nothing else does, whatever else may overwrite the agent's cell.
        """
        old = self.grid[index]
        if old == AGENT:
            self.alive = False
        blast = explosion_of(old)
        self.put(index, code)
        row, col = divmod(index, self.cols)
        for dr, dc in _AROUND:
            r, c = row + dr, col + dc
            if 0 <= r < self.rows and 0 <= c < self.cols:
                yield r * self.cols + c, blast

    def open_gates(self, key: int) -> None:
        closed, opened = GATE_OF_KEY[key]
        index = self.grid.find(closed)
        while index >= 0:
            self.put(index, opened)
            index = self.grid.find(closed, index + 1)

    # -- the agent -----------------------------------------------------------------------

    def move_agent(self, action: int) -> None:
        """The official agent update, except where docs/domains.md says sgps decides otherwise.

        Like the official one it moves whatever the agent's cell holds: after a butterfly
        landed on the agent from the other end of a row (`instant_move`), that butterfly.
        """
        grid, agent = self.grid, self.agent
        target = self.moves[action][agent]
        if target < 0:
            return
        code = grid[target]
        if code in (EMPTY, DIRT):
            self.move(agent, target)
        elif code in (DIAMOND, DIAMOND_FALLING):
            self.gems += 1
            self.move(agent, target)
        elif action in (LEFT, RIGHT) and PROPERTIES[code] & PUSHABLE:
            self.push(target, action, code)
            return
        elif code in GATE_OF_KEY:
            self.open_gates(code)
            self.move(agent, target)
        elif code in OPEN_GATES:
            self.jump_gate(target, action)
            return
        elif code == EXIT_OPEN:
            self.move(agent, target)
            self.put(target, AGENT_IN_EXIT)
            self.in_exit = True
        else:
            return
        self.agent = target

    def push(self, target: int, action: int, code: int) -> None:
        """Push a stone, nut or bomb sideways into an empty cell; it falls next if nothing is under it.

        The null-element codes 47-49 have the pushable bit too; pushing one ends the
        official process (it has no falling form), so here it blocks the agent.
        """
        if code not in _FALLING_OF:
            return
        beyond = self.moves[action][target]
        if not self.is_empty(beyond):
            return
        falling = self.is_empty(self.moves[DOWN][beyond])
        self.move(target, beyond)
        self.put(beyond, _FALLING_OF[code] if falling else code)
        self.move(self.agent, target)
        self.agent = target

    def jump_gate(self, gate: int, action: int) -> None:
        """Cross an open gate onto a traversable cell beyond it (collecting a diamond, using a key).

        Landing on the open exit enters it (spec 3.8; the official code overwrites the exit).
        """
        land = self.moves[action][gate]
        if land < 0 or not PROPERTIES[self.grid[land]] & TRAVERSABLE:
            return
        code = self.grid[land]
        if code == DIAMOND:
            self.gems += 1
        elif code in GATE_OF_KEY:
            self.open_gates(code)
        elif code == EXIT_OPEN:
            self.in_exit = True
        self.put(land, AGENT_IN_EXIT if code == EXIT_OPEN else AGENT)
        self.put(self.agent, EMPTY)
        self.agent = land

    # -- the scan ----------------------------------------------------------------------

    def update_all(self) -> None:
        """Update every cell in row-major order that holds something the scan moves or changes."""
        grid, updated = self.grid, self.updated
        marks = grid.translate(SCANNED[self.rules.gravity])
        index = marks.find(1)
        while index >= 0:
            if index not in updated:
                code = grid[index]
                if not _RESTING[code] or self.may_leave(index):
                    self.update(index, code)
            index = marks.find(1, index + 1)
        self.end()

    def may_leave(self, index: int) -> bool:
        """Whether a resting element could fall or roll: a quick test that spares most updates of resting ones."""
        grid, moves = self.grid, self.moves
        below = moves[DOWN][index]
        if below < 0 or _HOLDS[grid[below]]:
            return False
        if grid[below] == EMPTY:
            return True
        left, right = moves[LEFT][index], moves[RIGHT][index]
        return (left >= 0 and grid[left] == EMPTY and grid[below - 1] == EMPTY) or (
            right >= 0 and grid[right] == EMPTY and grid[below + 1] == EMPTY
        )

    def update(self, index: int, code: int) -> None:
        """The official update of the element `code` at `index` (the official switch, as a table)."""
        _UPDATES[code](self, index)

    def open_exit(self, index: int) -> None:
        if self.gems >= self.rules.gems_required:
            self.put(index, EXIT_OPEN)

    def magic_wall(self, index: int) -> None:
        """Active while something falls through the walls, dormant before, expired once the steps are spent."""
        dormant = MAGIC_DORMANT if self.magic_steps > 0 else MAGIC_EXPIRED
        self.put(index, MAGIC_ON if self.magic_active else dormant)

    def firefly(self, index: int) -> None:
        self.creature(index, _HEADING[self.grid[index]], _FIREFLY_OF, turn=3, explosion=EXPLOSION)

    def butterfly(self, index: int) -> None:
        self.creature(index, _HEADING[self.grid[index]], _BUTTERFLY_OF, turn=1, explosion=EXPLOSION_DIAMOND)

    def orange(self, index: int) -> None:
        """An orange moves straight on; blocked, it explodes next to the agent, or else turns at random."""
        heading = _HEADING[self.grid[index]]
        ahead = self.moves[heading][index]
        if self.is_empty(ahead):
            self.move(index, ahead)
        elif self.adjacent(index, (AGENT,)):
            self.explode(index, EXPLOSION)
        else:
            free = [d for d in (UP, RIGHT, DOWN, LEFT) if self.is_empty(self.moves[d][index])]
            if free:
                self.put(index, _ORANGE_OF[free[self.next_random() % len(free)]])

    def explosion(self, index: int) -> None:
        self.put(index, _AFTER_EXPLOSION[self.grid[index]])

    def fall_from_rest(self, index: int, falling: int, rolled: int) -> None:
        """A resting stone, diamond, nut or bomb (gravity on): start falling, or roll off a rounded cell."""
        if self.is_empty(self.moves[DOWN][index]):
            self.put(index, falling)
            self.update(index, falling)
            return
        side = self.roll_side(index)
        if side >= 0:
            self.roll(index, side, rolled)

    def stone_falling(self, index: int) -> None:
        below = self.moves[DOWN][index]
        under = self.grid[below] if below >= 0 else -1
        if under == EMPTY:
            self.move(index, below)
        elif self.rules.butterfly_explosion_ver == 2 and under in BUTTERFLIES:
            self.put(index, EMPTY)
            self.put(below, DIAMOND)
        elif under >= 0 and PROPERTIES[under] & CAN_EXPLODE:
            self.explode(below, explosion_of(under))
        elif under in _MAGIC:
            self.through_magic(index, DIAMOND_FALLING)
        elif under == NUT:
            self.put(below, DIAMOND)  # cracked; the stone stays a falling one
        else:
            self.land_or_roll(index, STONE_FALLING, STONE)

    def diamond_falling(self, index: int) -> None:
        below = self.moves[DOWN][index]
        under = self.grid[below] if below >= 0 else -1
        if under == EMPTY:
            self.move(index, below)
        elif under >= 0 and PROPERTIES[under] & CAN_EXPLODE and under not in (BOMB, BOMB_FALLING):
            self.explode(below, explosion_of(under))
        elif under in _MAGIC:
            self.through_magic(index, STONE_FALLING)
        else:
            self.land_or_roll(index, DIAMOND_FALLING, DIAMOND)

    def nut_falling(self, index: int) -> None:
        if self.is_empty(self.moves[DOWN][index]):
            self.move(index, self.moves[DOWN][index])
        else:
            self.land_or_roll(index, NUT_FALLING, NUT)

    def bomb_falling(self, index: int) -> None:
        """A falling bomb explodes where it stops, unless explosions are disabled (then it stays a falling bomb)."""
        if self.is_empty(self.moves[DOWN][index]):
            self.move(index, self.moves[DOWN][index])
            return
        side = self.roll_side(index)
        if side >= 0:
            self.roll(index, side, BOMB_FALLING)
        elif not self.rules.disable_explosions:
            self.explode(index, EXPLOSION)

    def land_or_roll(self, index: int, falling: int, resting: int) -> None:
        side = self.roll_side(index)
        if side >= 0:
            self.roll(index, side, falling)
        else:
            self.put(index, resting)

    def through_magic(self, index: int, converted: int) -> None:
        """Fall through a magic wall below (waking the walls), converted, if the cell under the wall is empty.

        Nothing happens once the walls' active steps are spent; the falling element then
        waits on the wall until the wall's own update has made it an expired one.
        """
        if self.magic_steps <= 0:
            return
        self.magic_active = True
        under_wall = index + 2 * self.cols
        if under_wall < len(self.grid) and self.grid[under_wall] == EMPTY:
            self.put(index, EMPTY)
            self.put(under_wall, converted)

    def creature(self, index: int, heading: int, codes: dict[int, int], turn: int, explosion: int) -> None:
        """A firefly (prefers turning left, `turn` 3) or a butterfly (prefers turning right, `turn` 1).

        Next to the agent or a blob it explodes. Otherwise it moves into an empty cell
        after turning, or else straight on, or else turns the other way and stays (a
        butterfly with `butterfly_move_ver` 2 also moves that way: `instant_move`).
        """
        if self.adjacent(index, (AGENT, BLOB)):
            self.explode(index, explosion)
            return
        moves, grid = self.moves, self.grid
        for direction in ((heading + turn) % 4, heading):
            target = moves[direction][index]
            if target >= 0 and grid[target] == EMPTY:
                self.put(index, codes[direction])
                self.move(index, target)
                return
        other = (heading - turn) % 4
        self.put(index, codes[other])
        if codes is _BUTTERFLY_OF and self.rules.butterfly_move_ver == 2:
            self.instant_move(index, other)

    def instant_move(self, index: int, direction: int) -> None:
        """The move of a butterfly that turns and moves at once: one step of the flat index, onto whatever is there.

        The official move adds the direction's offset to the row-major index and neither
        looks at the cell nor checks the bounds. At the left or right edge it therefore
        wraps, to the last cell of the row above or the first cell of the row below, and
        may land on the agent there, which the neighbour test (bounded to the grid) did
        not see: officially the agent is then still alive (`Hidden`), and the cell the
        agent's moves start from holds the butterfly. Beyond the first or last cell of the
        grid (up from the top row, down from the bottom row, left from the first cell,
        right from the last) the official move writes outside the grid, which is
        undefined; there the butterfly stays where it is.
        """
        target = index + (-self.cols, 1, self.cols, -1)[direction]
        if 0 <= target < len(self.grid):
            self.move(index, target)

    def blob(self, index: int) -> None:
        """A blob grows into an empty or dirt cell with chance blob_chance/256, in a random direction.

        Once the blob swap is set (the whole blob enclosed, or larger than its maximum),
        every blob turns into the swap element instead.
        """
        if self.blob_swap != NO_SWAP:
            self.put(index, self.blob_swap)
            return
        self.blob_size += 1
        if self.adjacent(index, (EMPTY, DIRT)):
            self.blob_enclosed = False
        grows = self.next_random() % 256 < self.rules.blob_chance
        target = self.moves[self.next_random() % 4][index]
        if grows and target >= 0 and self.grid[target] in (EMPTY, DIRT):
            self.put(target, BLOB)

    def end(self) -> None:
        """The official end of a scan: set the blob swap, count down the active magic walls."""
        if self.blob_swap == NO_SWAP:
            if self.blob_enclosed:
                self.blob_swap = DIAMOND
            if self.blob_size > blob_max_size(self.rows * self.cols, self.rules.blob_max_percentage):
                self.blob_swap = STONE
        if self.magic_active:
            self.magic_steps = max(self.magic_steps - 1, 0)
        self.magic_active = self.magic_active and self.magic_steps > 0


#: The update of each scanned code (resting stones, diamonds, nuts and bombs only with gravity on).
_UPDATES: dict[int, Callable[[Scan, int], None]] = {
    STONE: lambda scan, index: scan.fall_from_rest(index, STONE_FALLING, STONE_FALLING),
    STONE_FALLING: Scan.stone_falling,
    DIAMOND: lambda scan, index: scan.fall_from_rest(index, DIAMOND_FALLING, DIAMOND_FALLING),
    DIAMOND_FALLING: Scan.diamond_falling,
    NUT: lambda scan, index: scan.fall_from_rest(index, NUT_FALLING, NUT_FALLING),
    NUT_FALLING: Scan.nut_falling,
    BOMB: lambda scan, index: scan.fall_from_rest(index, BOMB_FALLING, BOMB),  # a rolling bomb stays a resting one
    BOMB_FALLING: Scan.bomb_falling,
    EXIT_CLOSED: Scan.open_exit,
    BLOB: Scan.blob,
    **dict.fromkeys(FIREFLIES, Scan.firefly),
    **dict.fromkeys(BUTTERFLIES, Scan.butterfly),
    **dict.fromkeys(ORANGES, Scan.orange),
    **dict.fromkeys((MAGIC_DORMANT, MAGIC_ON, MAGIC_EXPIRED), Scan.magic_wall),
    **dict.fromkeys((EXPLOSION_DIAMOND, EXPLOSION_STONE, EXPLOSION), Scan.explosion),
}
