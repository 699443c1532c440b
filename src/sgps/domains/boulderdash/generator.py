"""The paper's BoulderDash level generator (spec section 3.6), with optional stones and creatures.

A 14x14 map of five rooms (four corner rooms and a central ring); the draws are the
reference generator's, so seeds reproduce the official test sets bit for bit. Stones,
fireflies and butterflies are drawn after everything else, so levels without them are
unchanged.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sgps.domains.boulderdash.elements import (
    AGENT,
    BRICK_WALL,
    BUTTERFLIES,
    CLOSED_GATES,
    DIAMOND,
    DIRT,
    EMPTY,
    EXIT_CLOSED,
    FIREFLIES,
    KEYS,
    OPEN_GATES,
    STONE,
)

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


class Extras(NamedTuple):
    """Elements beyond the paper's levels, placed on free cells after every other draw."""

    stones: int = 0
    fireflies: int = 0
    butterflies: int = 0


def generate_cells(seed: int, keys: int, diamonds: int, decoy: bool, dirt: float, extras: Extras) -> list[int]:
    """The cells of one generated level, drawing exactly as the reference generator, then the extras."""
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
    if any(extras):
        _place_extras(rng, cells, blocked.union(drawn), drawn[0], extras)
    return cells


def _place_extras(rng: np.random.Generator, cells: list[int], taken: set[int], agent: int, extras: Extras) -> None:
    """Stones on free cells, then creatures (random headings) on free cells out of the agent's reach.

    A creature next to the agent explodes in the first step, so creatures keep at least
    two cells (in rows and in columns) away from it.
    """
    free = [i for i in range(SIZE * SIZE) if i not in taken and cells[i] in (EMPTY, DIRT)]
    if len(free) < sum(extras):
        raise ValueError(f"{sum(extras)} stones and creatures do not fit in the {len(free)} free cells")
    for index in rng.choice(free, size=extras.stones, replace=False):
        cells[int(index)] = STONE
    ar, ac = divmod(agent, SIZE)
    away = [i for i in free if cells[i] != STONE and max(abs(i // SIZE - ar), abs(i % SIZE - ac)) > 2]
    creatures = [*[FIREFLIES] * extras.fireflies, *[BUTTERFLIES] * extras.butterflies]
    if len(away) < len(creatures):
        raise ValueError(f"{len(creatures)} creatures do not fit in the {len(away)} free cells away from the agent")
    for index, kind in zip(rng.choice(away, size=len(creatures), replace=False), creatures, strict=True):
        cells[int(index)] = kind[int(rng.integers(4))]
