"""Sokoban (Boxoban levels): push every box onto a goal.

Rules (spec/domains.md section 4, checked against the reference traces): the agent
moves into a cell that is neither wall nor box; moving into a box pushes it if the
cell beyond is in the grid and neither wall nor box; boxes are never pulled. The goal
is reached when no goal cell lacks a box. Dead ends are not detected.

Cell codes: 0 agent, 1 wall, 2 box, 3 goal, 4 floor, 5 agent on a goal, 6 box on a
goal. The reference loader rejects 5 and 6 (an off-by-one), so the official level
format has codes 0-4 only; this one accepts 5 and 6 as an extension, so that every
position can be written as a level. The generator writes official-format levels
unless asked for the agent to be allowed to start on a goal.

Observations: the compact 4-channel form the paper uses (agent, wall, box, goal; a box
or the agent on a goal also sets the goal channel; floor is all zero), or the
7-channel form of the reference binding (one-hot over the codes, except that the
agent on a goal sets channels 5 and 3).

The generator is an own reverse-play generator in the style of Racanière et al. (2017)
and gym-sokoban (spec section 4.6), so the project works without the Boxoban files.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np

from sgps.domains.base import (
    MOVE_DELTAS,
    Board,
    Domain,
    channels_first,
    check_codes,
    check_generator_size,
    check_probability,
    count_exactly,
    split_level,
    stack_grids,
)
from sgps.domains.invariants import count, unchanged
from sgps.domains.render import Sprite, draw_cells
from sgps.errors import LevelFormatError

AGENT, WALL, BOX, GOAL, FLOOR, AGENT_ON_GOAL, BOX_ON_GOAL = range(7)
NUM_CODES = 7

#: Generator bounds that keep one level's generation to seconds: a room walk longer than
#: ten steps per cell has long since carved what it will, and the reverse search and the
#: room retries are bounded so that a typo cannot run for hours or exhaust memory.
WALK_STEPS_PER_CELL = 10
MAX_REVERSE_STATES = 1_000_000
MAX_TRIES = 1_000

#: Boxoban ASCII characters and the codes they stand for.
ASCII_CODES = {"@": AGENT, "#": WALL, "$": BOX, ".": GOAL, " ": FLOOR, "+": AGENT_ON_GOAL, "*": BOX_ON_GOAL}
_ASCII = {code: char for char, code in ASCII_CODES.items()}

_COMPACT = np.zeros((NUM_CODES, 4), dtype=np.float32)
for _code, _channels in {
    AGENT: (0,),
    WALL: (1,),
    BOX: (2,),
    GOAL: (3,),
    AGENT_ON_GOAL: (0, 3),
    BOX_ON_GOAL: (2, 3),
}.items():
    _COMPACT[_code, list(_channels)] = 1.0
_FULL = np.eye(NUM_CODES, dtype=np.float32)
_FULL[AGENT_ON_GOAL, GOAL] = 1.0

_FLOOR_RGB = (235, 235, 225)
_SPRITES = (
    Sprite(_FLOOR_RGB, "circle", (30, 60, 200)),
    Sprite((110, 75, 55)),
    Sprite(_FLOOR_RGB, "square", (205, 145, 40)),
    Sprite(_FLOOR_RGB, "dot", (220, 40, 40)),
    Sprite(_FLOOR_RGB),
    Sprite((245, 195, 195), "circle", (30, 60, 200)),
    Sprite(_FLOOR_RGB, "square", (60, 170, 60)),
)


class SokobanLayout(NamedTuple):
    """Static facts of a level: its goals and each cell's push distance to a goal."""

    goals: tuple[int, ...]
    push_distance: tuple[float, ...]


class SokobanState(NamedTuple):
    """A Sokoban position; `board.extra` is the level's `SokobanLayout`."""

    grid: bytes
    agent: int
    board: Board


class Sokoban(Domain[SokobanState]):
    """Sokoban with unit-cost moves and pushes."""

    name = "sokoban"
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "standard": {"size": 10, "boxes": 4, "walk_steps": 34, "turn_probability": 0.35, "max_states": 20000},
    }

    def __init__(self, observation: Literal["compact", "full"] = "compact"):
        if observation not in ("compact", "full"):
            raise ValueError("Sokoban observation must be 'compact' (4 channels) or 'full' (7 channels)")
        self.observation = observation
        self._lut = _COMPACT if observation == "compact" else _FULL

    def parse(self, fields: Sequence[int]) -> SokobanState:
        (rows, cols), cells = split_level(fields, self.header_fields)
        check_codes(cells, range(NUM_CODES), self.name, cols)
        (agent,) = count_exactly(cells, {AGENT, AGENT_ON_GOAL}, 1, "agent (code 0 or 5)")
        boxes = sum(code in (BOX, BOX_ON_GOAL) for code in cells)
        goals = tuple(i for i, code in enumerate(cells) if code in (GOAL, AGENT_ON_GOAL, BOX_ON_GOAL))
        if boxes != len(goals):
            raise LevelFormatError(
                f"a Sokoban level needs as many boxes as goals, found {boxes} boxes and {len(goals)} goals"
            )
        if boxes == 0:
            raise LevelFormatError("a Sokoban level needs at least one box")
        walls = [code == WALL for code in cells]
        layout = SokobanLayout(goals, push_distances(walls, goals, rows, cols))
        return SokobanState(bytes(cells), agent, Board.of(rows, cols, layout))

    def encode(self, state: SokobanState) -> list[int]:
        return [state.board.rows, state.board.cols, *state.grid]

    def grid_codes(self, state: SokobanState) -> list[int]:
        return list(state.grid)

    def step(self, state: SokobanState, action: int) -> SokobanState:
        moves = state.board.moves[action]
        target = moves[state.agent]
        if target < 0:
            return state
        grid = state.grid
        code = grid[target]
        if code in (FLOOR, GOAL):
            new = bytearray(grid)
        elif code in (BOX, BOX_ON_GOAL):
            beyond = moves[target]
            if beyond < 0:
                return state
            behind = grid[beyond]
            if behind != FLOOR and behind != GOAL:
                return state
            new = bytearray(grid)
            new[beyond] = BOX if behind == FLOOR else BOX_ON_GOAL
            code = FLOOR if code == BOX else GOAL
        else:
            return state
        new[state.agent] = FLOOR if grid[state.agent] == AGENT else GOAL
        new[target] = AGENT if code == FLOOR else AGENT_ON_GOAL
        return SokobanState(bytes(new), target, state.board)

    def is_goal(self, state: SokobanState) -> bool:
        return GOAL not in state.grid and AGENT_ON_GOAL not in state.grid

    def may_reach(self, starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """Walls and goals never move, boxes are neither made nor lost, and there is one agent."""
        if self.observation == "compact":  # agent 0, wall 1, box 2, goal 3 (set under a box or the agent too)
            agent, walls, goal_cells, boxes = (0,), (1,), (3,), (2,)
        else:  # one channel per code; the agent on a goal also sets the goal channel
            agent, walls, goal_cells, boxes = (AGENT, AGENT_ON_GOAL), (WALL,), (GOAL, BOX_ON_GOAL), (BOX, BOX_ON_GOAL)
        return (
            unchanged(starts, goals, walls)
            & unchanged(starts, goals, goal_cells)
            & (count(goals, boxes) == count(starts, boxes))
            & (count(goals, agent) == 1)
        )

    def heuristic(self, state: SokobanState) -> float:
        """Sum over boxes of the fewest pushes to any goal, ignoring the other boxes.

        Every action moves at most one box by one cell, so this is a consistent lower
        bound; a box on a cell from which no goal can be reached gives infinity.
        """
        distance = state.board.extra.push_distance
        grid = state.grid
        total = 0.0
        index = grid.find(BOX)
        while index >= 0:
            total += distance[index]
            index = grid.find(BOX, index + 1)
        return total

    def boxes(self, state: SokobanState) -> list[int]:
        """Indices of the boxes, on goals or not."""
        return [i for i, code in enumerate(state.grid) if code in (BOX, BOX_ON_GOAL)]

    def observation_shape(self, state: SokobanState) -> tuple[int, int, int]:
        return (self._lut.shape[1], state.board.rows, state.board.cols)

    def observe(self, states: Sequence[SokobanState]) -> np.ndarray:
        board = states[0].board
        codes = stack_grids([s.grid for s in states], board.rows, board.cols)
        return channels_first(self._lut[codes])

    def render_text(self, state: SokobanState) -> str:
        cols = state.board.cols
        lines = ["".join(_ASCII[c] for c in state.grid[r * cols : (r + 1) * cols]) for r in range(state.board.rows)]
        legend = "@ agent  + agent on goal  $ box  * box on goal  . goal  # wall"
        return "\n".join([*lines, legend])

    def render_image(self, state: SokobanState, cell: int = 16) -> np.ndarray:
        plane = np.frombuffer(state.grid, dtype=np.uint8).reshape(state.board.rows, state.board.cols)
        return draw_cells(plane, _SPRITES, cell)

    def describe(self, state: SokobanState) -> str:
        return f"sokoban {state.board.rows}x{state.board.cols}, {len(state.board.extra.goals)} boxes"

    def generate(
        self,
        seed: int,
        *,
        size: int = 10,
        boxes: int = 4,
        walk_steps: int = 34,
        turn_probability: float = 0.35,
        max_depth: int = 300,
        max_states: int = 20000,
        tries: int = 20,
        agent_on_goal: bool = False,
    ) -> SokobanState:
        """A solvable level by reverse play (spec section 4.6).

        1. Carve a room: a random walk of `walk_steps` steps through an all-wall grid,
           turning with `turn_probability`, stamps a random 3x3 floor shape at every
           step; the outer ring stays wall.
        2. Put the agent and `boxes` goals on random floor cells, a box on each goal.
        3. Explore backwards from this solved position by depth-first search over
           moves and *pulls* (the agent steps away and drags the box behind it),
           at most `max_depth` deep and `max_states` positions. Each position scores
           (number of times the pulled box changed) x (sum of Manhattan distances of
           the boxes from their goals), and 0 while any box stands on a goal. The
           best position becomes the level: reversing its pulls gives pushes, so
           every level is solvable by construction.

        Positions with the agent on a goal are passed over as the level unless
        `agent_on_goal` is set: the official level format cannot express them (code
        5 is an extension), so by default every level can be read by the reference
        tools. A room where no position scores above zero is discarded and a new one
        carved, up to `tries` times. The box-change count is tracked per path
        (gym-sokoban miscounts it by passing the previous pull forward).
        """
        check_generator_size(size, 4)
        check_probability("turn_probability", turn_probability)
        if boxes < 1:
            raise ValueError("a Sokoban level needs at least one box")
        if not 0 <= walk_steps <= WALK_STEPS_PER_CELL * size * size:
            raise ValueError(
                f"walk_steps must be between 0 and {WALK_STEPS_PER_CELL} x size x size "
                f"({WALK_STEPS_PER_CELL * size * size}), not {walk_steps}"
            )
        for name, value, largest in (("max_states", max_states, MAX_REVERSE_STATES), ("tries", tries, MAX_TRIES)):
            if not 1 <= value <= largest:
                raise ValueError(f"{name} must be between 1 and {largest:,}, not {value}")
        rng = np.random.default_rng(seed)
        for _ in range(tries):
            floor = _carve_room(rng, size, walk_steps, turn_probability)
            cells = [i for i, open_ in enumerate(floor) if open_]
            if len(cells) < boxes + 1:
                continue
            picks = [int(i) for i in rng.choice(cells, size=boxes + 1, replace=False)]
            agent, goals = picks[0], tuple(picks[1:])
            found = _reverse_play(floor, size, agent, goals, max_depth, max_states, agent_on_goal)
            if found is not None:
                agent, box_cells = found
                level = [FLOOR if open_ else WALL for open_ in floor]
                for goal in goals:
                    level[goal] = GOAL
                for box in box_cells:
                    level[box] = BOX
                level[agent] = AGENT_ON_GOAL if level[agent] == GOAL else AGENT
                return self.parse([size, size, *level])
        raise ValueError(f"seed {seed}: no room gave a non-trivial Sokoban level in {tries} tries")


def push_distances(walls: Sequence[bool], goals: Sequence[int], rows: int, cols: int) -> tuple[float, ...]:
    """For each cell, the fewest pushes that bring a box there to some goal.

    Other boxes are ignored. A push from x to y = x + d needs the agent at x - d, so a
    backward search from the goals steps from y to x when x and x - d are both free.
    """
    moves = Board.of(rows, cols).moves
    distance = [math.inf] * (rows * cols)
    queue = deque()
    for goal in goals:
        distance[goal] = 0.0
        queue.append(goal)
    while queue:
        y = queue.popleft()
        for action in range(4):
            back = moves[(action + 2) % 4]
            x = back[y]
            if x < 0 or walls[x] or distance[x] != math.inf:
                continue
            pusher = back[x]
            if pusher < 0 or walls[pusher]:
                continue
            distance[x] = distance[y] + 1
            queue.append(x)
    return tuple(distance)


_STAMPS = (
    ((0, 0, 0), (1, 1, 1), (0, 0, 0)),
    ((0, 1, 0), (0, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (1, 1, 0)),
    ((0, 0, 0), (0, 1, 1), (0, 1, 0)),
)


def _carve_room(rng: np.random.Generator, size: int, steps: int, turn_probability: float) -> list[bool]:
    """A floor mask carved by a random walk that stamps 3x3 shapes (outer ring wall)."""
    floor = np.zeros((size, size), dtype=bool)
    dr, dc = MOVE_DELTAS[int(rng.integers(4))]
    r, c = int(rng.integers(1, size - 1)), int(rng.integers(1, size - 1))
    for _ in range(steps):
        if rng.random() < turn_probability:
            dr, dc = MOVE_DELTAS[int(rng.integers(4))]
        r = min(max(r + dr, 1), size - 2)
        c = min(max(c + dc, 1), size - 2)
        stamp = np.array(_STAMPS[int(rng.integers(len(_STAMPS)))], dtype=bool)
        floor[r - 1 : r + 2, c - 1 : c + 2] |= stamp
    floor[[0, -1], :] = False
    floor[:, [0, -1]] = False
    return floor.ravel().tolist()


def _reverse_play(
    floor: list[bool],
    size: int,
    agent: int,
    goals: tuple[int, ...],
    max_depth: int,
    max_states: int,
    agent_on_goal: bool,
) -> tuple[int, tuple[int, ...]] | None:
    """The best-scoring (agent, boxes) position reachable by moves and pulls, or None.

    Positions with the agent on a goal are explored but only chosen if `agent_on_goal`.
    """
    moves = Board.of(size, size).moves
    goal_rc = [divmod(g, size) for g in goals]
    goal_set = frozenset(goals)
    explored: set[tuple[int, tuple[int, ...]]] = set()
    best_score, best = 0, None
    # Each stack entry: (agent, boxes by goal of origin, pulled box or -1, box changes, depth).
    stack = [(agent, goals, -1, 0, 0)]
    while stack and len(explored) < max_states:
        player, boxes, last, changes, depth = stack.pop()
        if (player, boxes) in explored:
            continue
        explored.add((player, boxes))
        if changes and not goal_set.intersection(boxes) and (agent_on_goal or player not in goal_set):
            displacement = sum(
                abs(br - gr) + abs(bc - gc)
                for (br, bc), (gr, gc) in zip((divmod(b, size) for b in boxes), goal_rc, strict=True)
            )
            if changes * displacement > best_score:
                best_score, best = changes * displacement, (player, boxes)
        if depth + 1 >= max_depth:
            continue
        children = []
        for action in range(4):
            step = moves[action][player]
            if step < 0 or not floor[step] or step in boxes:
                continue
            children.append((step, boxes, last, changes, depth + 1))
            behind = moves[(action + 2) % 4][player]
            if behind >= 0 and behind in boxes:
                pulled = boxes.index(behind)
                moved = (*boxes[:pulled], player, *boxes[pulled + 1 :])
                children.append((step, moved, pulled, changes + (pulled != last), depth + 1))
        stack.extend(reversed(children))
    return best
