"""An example of a user-defined domain: a grid maze with one exit.

It implements the whole `sgps.domains.Domain` protocol in a few lines and registers
itself as ``maze``, after which level files, the exact solver, the search and the
command line can use it::

    sgps --plugin maze_domain generate maze --count 5 --out mazes.txt
    sgps --plugin maze_domain solve mazes.txt --index 2

(with this folder on PYTHONPATH). Cell codes: 0 floor, 1 wall, 2 agent, 3 exit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from sgps.domains import Domain, register_domain
from sgps.domains.base import Board, check_codes, count_exactly, one_hot, split_level, stack_grids
from sgps.domains.render import Sprite, draw_cells

FLOOR, WALL, AGENT, EXIT = range(4)


class MazeState(NamedTuple):
    """States are immutable, hashable values; equal states are duplicates."""

    grid: bytes  # the cell codes, row-major
    agent: int  # the agent's cell index
    board: Board  # size and move table, shared by all states of a level; extra = exit cell


class Maze(Domain[MazeState]):
    """Walk to the exit. Actions: the four moves of every grid domain."""

    name = "maze"
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {"standard": {"size": 9, "wall_probability": 0.3}}

    def parse(self, fields: Sequence[int]) -> MazeState:
        (rows, cols), cells = split_level(fields, self.header_fields)
        check_codes(cells, range(4), self.name, cols)
        (agent,) = count_exactly(cells, {AGENT}, 1, "agent (code 2)")
        (exit_cell,) = count_exactly(cells, {EXIT}, 1, "exit (code 3)")
        return MazeState(bytes(cells), agent, Board.of(rows, cols, exit_cell))

    def encode(self, state: MazeState) -> list[int]:
        return [state.board.rows, state.board.cols, *state.grid]

    def grid_codes(self, state: MazeState) -> list[int]:
        return list(state.grid)

    def step(self, state: MazeState, action: int) -> MazeState:
        target = state.board.moves[action][state.agent]
        if target < 0 or state.grid[target] == WALL:
            return state
        grid = bytearray(state.grid)
        grid[state.agent] = EXIT if state.agent == state.board.extra else FLOOR
        grid[target] = AGENT
        return MazeState(bytes(grid), target, state.board)

    def is_goal(self, state: MazeState) -> bool:
        return state.agent == state.board.extra

    def heuristic(self, state: MazeState) -> float:
        (ar, ac), (er, ec) = divmod(state.agent, state.board.cols), divmod(state.board.extra, state.board.cols)
        return float(abs(ar - er) + abs(ac - ec))

    def observation_shape(self, state: MazeState) -> tuple[int, int, int]:
        return (4, state.board.rows, state.board.cols)

    def observe(self, states: Sequence[MazeState]) -> np.ndarray:
        board = states[0].board
        return one_hot(stack_grids([s.grid for s in states], board.rows, board.cols), 4)

    def render_text(self, state: MazeState) -> str:
        chars = " #@E"
        cols = state.board.cols
        return "\n".join(
            "".join(chars[c] for c in state.grid[r * cols : (r + 1) * cols]) for r in range(state.board.rows)
        )

    def render_image(self, state: MazeState, cell: int = 16) -> np.ndarray:
        sprites = (
            Sprite((240, 240, 240)),
            Sprite((60, 60, 60)),
            Sprite((240, 240, 240), "circle"),
            Sprite((90, 200, 90)),
        )
        plane = np.frombuffer(state.grid, dtype=np.uint8).reshape(state.board.rows, state.board.cols)
        return draw_cells(plane, sprites, cell)

    def generate(self, seed: int, *, size: int = 9, wall_probability: float = 0.3) -> MazeState:
        """Random walls; the agent in the top-left corner, the exit in the bottom-right.

        Not every maze is solvable; the exact solver tells which are.
        """
        rng = np.random.default_rng(seed)
        cells = np.where(rng.random(size * size) < wall_probability, WALL, FLOOR)
        cells[0], cells[-1] = AGENT, EXIT
        return self.parse([size, size, *cells.tolist()])


register_domain("maze", Maze, replace=True)
