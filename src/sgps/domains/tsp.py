"""Grid TSP: visit every city, then return to the first city entered.

Rules (spec/domains.md section 5, checked against the reference traces):

- The agent moves one cell per action; walls and the grid edge block it. Cities are
  walkable, revisits included, and every move costs 1.
- Entering an unvisited city marks it visited. The first city entered becomes the
  start city.
- Goal: every city visited and the agent standing on the start city.

Cell codes: 0 empty, 1 agent, 2 wall, 3 unvisited city (the only codes in files);
4 visited city, 5 start city, 6 agent on a city, 7 agent on the start city (codes that
arise during play). The observation is the one-hot of these 8 codes, shape (8, R, C).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from functools import lru_cache
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
from sgps.domains.invariants import count, only_cleared, only_set, unchanged
from sgps.domains.render import Sprite, draw_cells
from sgps.errors import LevelFormatError

EMPTY, AGENT, WALL, CITY, VISITED, START, AGENT_AT_CITY, AGENT_AT_START = range(8)
NUM_CODES = 8

#: The code a cell shows once the agent leaves it.
_LEFT_BEHIND = {AGENT: EMPTY, AGENT_AT_CITY: VISITED, AGENT_AT_START: START}
#: The code a cell shows when the agent enters it (unvisited cities handled apart).
_ENTERED = {EMPTY: AGENT, VISITED: AGENT_AT_CITY, START: AGENT_AT_START}

_TEXT = {
    EMPTY: " ",
    AGENT: "@",
    WALL: "#",
    CITY: "o",
    VISITED: "*",
    START: "S",
    AGENT_AT_CITY: "&",
    AGENT_AT_START: "$",
}
_SPRITES = (
    Sprite((250, 250, 250)),
    Sprite((250, 250, 250), "circle", (20, 20, 20)),
    Sprite((120, 120, 120)),
    Sprite((250, 250, 250), "square", (220, 40, 40)),
    Sprite((250, 250, 250), "frame", (220, 40, 40)),
    Sprite((250, 250, 250), "square", (40, 90, 230)),
    Sprite((250, 200, 200), "circle", (20, 20, 20)),
    Sprite((180, 200, 250), "circle", (20, 20, 20)),
)


class TspLayout(NamedTuple):
    """Static facts of a level: the city cells and a wall mask (1 = wall)."""

    cities: tuple[int, ...]
    walls: bytes


class TspState(NamedTuple):
    """A TSP position. `grid` holds codes 0-7; `board.extra` is the level's `TspLayout`."""

    grid: bytes
    agent: int
    start: int  # index of the start city, -1 until the first city is entered
    remaining: int  # cities not yet visited
    board: Board


class Tsp(Domain[TspState]):
    """Grid TSP with a return to the first city visited."""

    name = "tsp"
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "standard": {"size": 10, "cities": 2, "walls": True},
        "hard": {"size": 10, "cities": 6, "walls": True},
        "large": {"size": 16, "cities": 8, "walls": True},
    }

    def parse(self, fields: Sequence[int]) -> TspState:
        (rows, cols), cells = split_level(fields, self.header_fields)
        check_codes(cells, range(4), self.name, cols)
        (agent,) = count_exactly(cells, {AGENT}, 1, "agent (code 1)")
        cities = tuple(i for i, code in enumerate(cells) if code == CITY)
        if not cities:
            raise LevelFormatError("a TSP level needs at least one city (code 3)")
        board = Board.of(rows, cols, TspLayout(cities, bytes(code == WALL for code in cells)))
        return TspState(bytes(cells), agent, -1, len(cities), board)

    def encode(self, state: TspState) -> list[int]:
        if state.start != -1:
            raise ValueError("only initial TSP states (no city entered yet) can be written as levels")
        return [state.board.rows, state.board.cols, *state.grid]

    def grid_codes(self, state: TspState) -> list[int]:
        return list(state.grid)

    def step(self, state: TspState, action: int) -> TspState:
        target = state.board.moves[action][state.agent]
        if target < 0:
            return state
        grid = state.grid
        code = grid[target]
        if code == WALL:
            return state
        new = bytearray(grid)
        new[state.agent] = _LEFT_BEHIND[grid[state.agent]]
        start, remaining = state.start, state.remaining
        if code == CITY:
            remaining -= 1
            if start < 0:
                start = target
                new[target] = AGENT_AT_START
            else:
                new[target] = AGENT_AT_CITY
        else:
            new[target] = _ENTERED[code]
        return TspState(bytes(new), target, start, remaining, state.board)

    def is_goal(self, state: TspState) -> bool:
        return state.remaining == 0 and state.agent == state.start

    def may_reach(self, starts: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """Walls and cities stay where they are, a visited city stays visited, the start city once chosen stays
        the start, and there is one agent."""
        return (
            unchanged(starts, goals, (WALL,))
            & unchanged(starts, goals, (CITY, VISITED, START, AGENT_AT_CITY, AGENT_AT_START))
            & only_cleared(starts, goals, (CITY,))
            & only_set(starts, goals, (START, AGENT_AT_START))
            & (count(goals, (AGENT, AGENT_AT_CITY, AGENT_AT_START)) == 1)
        )

    def heuristic(self, state: TspState) -> float:
        """A consistent lower bound from shortest-path distances D on the grid.

        With the start city s known and U the unvisited cities, the rest of the tour is
        a path from the agent through U ending at s, so it is at least the weight of a
        minimum spanning tree of U + {agent, s} under D, and at least D(agent, c) + D(c, s)
        for every c in U. Before any city is entered, the tour reaches some city s and
        then closes a cycle through all cities: at least min_s D(agent, s) + MST(cities).
        Each bound changes by at most 1 per move, so A* with it is optimal.
        """
        layout: TspLayout = state.board.extra
        distance = city_distances(state.board)
        agent = state.agent
        if state.start < 0:
            nearest = min(distance[k][agent] for k in range(len(layout.cities)))
            return float(nearest + _mst_weight(list(range(len(layout.cities))), distance, layout.cities))
        grid = state.grid
        s = layout.cities.index(state.start)
        unvisited = [k for k, city in enumerate(layout.cities) if grid[city] == CITY]
        detour = distance[s][agent]
        for k in unvisited:
            detour = max(detour, distance[k][agent] + distance[k][layout.cities[s]])
        tree = _mst_weight([s, *unvisited], distance, layout.cities) + min(distance[k][agent] for k in [s, *unvisited])
        return float(max(detour, tree))

    def observation_shape(self, state: TspState) -> tuple[int, int, int]:
        return (NUM_CODES, state.board.rows, state.board.cols)

    def observe(self, states: Sequence[TspState]) -> np.ndarray:
        board = states[0].board
        return one_hot(stack_grids([s.grid for s in states], board.rows, board.cols), NUM_CODES)

    def render_text(self, state: TspState) -> str:
        cols = state.board.cols
        rows = ["".join(_TEXT[c] for c in state.grid[r * cols : (r + 1) * cols]) for r in range(state.board.rows)]
        border = "+" + "-" * cols + "+"
        legend = "@ agent  o city  * visited  S start city  & or $ agent on a city / the start  # wall"
        visited = len(state.board.extra.cities) - state.remaining
        status = f"visited {visited}/{len(state.board.extra.cities)} cities"
        return "\n".join([border, *(f"|{row}|" for row in rows), border, status, legend])

    def render_image(self, state: TspState, cell: int = 16) -> np.ndarray:
        plane = np.frombuffer(state.grid, dtype=np.uint8).reshape(state.board.rows, state.board.cols)
        return draw_cells(plane, _SPRITES, cell)

    def describe(self, state: TspState) -> str:
        return f"tsp {state.board.rows}x{state.board.cols}, {len(state.board.extra.cities)} cities"

    def generate(self, seed: int, *, size: int = 10, cities: int = 2, walls: bool = True) -> TspState:
        """A level from the reference generator's procedure (spec section 5.6).

        Walls fill both diagonals except the central 2x2; cities and then the agent
        are drawn uniformly from the free cells, with `numpy.random.default_rng(seed)`
        making the same draws as the reference, so its sets are reproduced exactly.
        """
        check_generator_size(size, 2)
        if cities < 1:
            raise ValueError("a TSP level needs at least one city")
        rng = np.random.default_rng(seed)
        cells = [EMPTY] * (size * size)
        blocked: set[int] = set()
        if walls:
            for i in range(size // 2 - 1):
                for index in (
                    i * size + i,
                    (i + 1) * size - i - 1,
                    (size - 1 - i) * size + i,
                    (size - i) * size - i - 1,
                ):
                    cells[index] = WALL
                    blocked.add(index)
        free = [i for i in range(size * size) if i not in blocked]
        if cities + 1 > len(free):
            raise ValueError(f"{cities} cities and an agent do not fit in a {size}x{size} grid")
        for index in rng.choice(free, size=cities, replace=False):
            cells[int(index)] = CITY
            blocked.add(int(index))
        agent = int(rng.choice([i for i in range(size * size) if i not in blocked]))
        cells[agent] = AGENT
        return self.parse([size, size, *cells])


@lru_cache(maxsize=4096)
def city_distances(board: Board) -> tuple[tuple[float, ...], ...]:
    """Shortest-path lengths from each city to every cell (inf where walled off)."""
    layout: TspLayout = board.extra
    tables = []
    for city in layout.cities:
        distance = [math.inf] * (board.rows * board.cols)
        distance[city] = 0
        queue = deque([city])
        while queue:
            cell = queue.popleft()
            for targets in board.moves:
                nxt = targets[cell]
                if nxt >= 0 and distance[nxt] == math.inf and not layout.walls[nxt]:
                    distance[nxt] = distance[cell] + 1
                    queue.append(nxt)
        tables.append(tuple(distance))
    return tuple(tables)


def _mst_weight(nodes: list[int], distance: tuple[tuple[float, ...], ...], cities: tuple[int, ...]) -> float:
    """Weight of a minimum spanning tree over some cities (by index) under D (Prim)."""
    if len(nodes) < 2:
        return 0
    first, rest = nodes[0], nodes[1:]
    best = [distance[first][cities[k]] for k in rest]
    total = 0
    while rest:
        i = min(range(len(rest)), key=best.__getitem__)
        total += best[i]
        row = distance[rest.pop(i)]
        best.pop(i)
        for j, k in enumerate(rest):
            if row[cities[k]] < best[j]:
                best[j] = row[cities[k]]
    return total
