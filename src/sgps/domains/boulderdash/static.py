"""The paper's BoulderDash rules with gravity off, played without the full scan.

Levels of the paper's elements with the official default parameters (gravity off)
change only through the agent, the exit and falling diamonds, so `BoulderDash.step`
plays them with these helpers instead of `scan.Scan`; both give the same grids (the
traces of shared/reference and tests/data check each).
"""

from __future__ import annotations

from sgps.domains.boulderdash.elements import (
    AGENT,
    BRICK_WALL,
    DIAMOND,
    DIAMOND_FALLING,
    DIRT,
    EMPTY,
    EXIT_CLOSED,
    EXIT_OPEN,
    EXPLOSION,
)

#: Cells a falling diamond rolls off (the official rounded elements among the paper's codes).
_ROUNDED = frozenset({DIAMOND, BRICK_WALL})
#: Cells an explosion destroys (the official consumable elements among the paper's codes).
_CONSUMABLE = frozenset({AGENT, EMPTY, DIRT, DIAMOND, DIAMOND_FALLING, BRICK_WALL})


def open_exit(grid: bytes, gems: int, required: int) -> bytes:
    """The exit part of the end-of-step scan: the closed exit opens once enough diamonds are collected.

    Returns `grid` itself when nothing changes. Falling diamonds treat a closed and an
    open exit alike (neither is empty, the agent or rounded), so this may run after them.
    """
    if gems >= required and EXIT_CLOSED in grid:
        return grid.replace(bytes([EXIT_CLOSED]), bytes([EXIT_OPEN]))
    return grid


def update_falling_diamonds(grid: bytearray, cols: int) -> None:
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
