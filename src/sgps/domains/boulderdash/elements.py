"""The 50 BoulderDash cell codes of the official simulator, their properties and observation channels.

Codes, properties and channels are the official ones (tuero/boulderdash_cpp,
`definitions.h` and `util.h`), including two quirks of its element table that the
traces confirm: codes 20 (dormant magic wall) and 21 (active magic wall) show in each
other's observation channel, and codes 47-49 (pebble, stone and void in dirt) map to
its null element, whose property mask has every bit set. sgps observes 47-49 in their
own channels 31-33 (the official observation of them writes outside its buffer).
"""

from __future__ import annotations

import numpy as np

AGENT, EMPTY, DIRT = 0, 1, 2
STONE, STONE_FALLING = 3, 4
DIAMOND, DIAMOND_FALLING = 5, 6
EXIT_CLOSED, EXIT_OPEN, AGENT_IN_EXIT = 7, 8, 9
#: Fireflies and butterflies, one code per heading (up, left, down, right).
FIREFLIES = (10, 11, 12, 13)
BUTTERFLIES = (14, 15, 16, 17)
BRICK_WALL, STEEL_WALL = 18, 19
MAGIC_DORMANT, MAGIC_ON, MAGIC_EXPIRED = 20, 21, 22
BLOB = 23
#: Explosions: each turns into a diamond, a stone or an empty cell in the next step.
EXPLOSION_DIAMOND, EXPLOSION_STONE = 24, 25
#: The explosion that turns into an empty cell (what killed agents and fireflies leave).
EXPLOSION = 26
#: Gate and key codes per colour (red, blue, green, yellow): closed gate, open gate, key.
COLOUR_NAMES = ("red", "blue", "green", "yellow")
CLOSED_GATES = (27, 30, 33, 36)
OPEN_GATES = (28, 31, 34, 37)
KEYS = (29, 32, 35, 38)
#: Key -> (its colour's closed gate, open gate): collecting the key opens the closed gates for good.
GATE_OF_KEY = {key: (closed, opened) for key, closed, opened in zip(KEYS, CLOSED_GATES, OPEN_GATES, strict=True)}
NUT, NUT_FALLING, BOMB, BOMB_FALLING = 39, 40, 41, 42
#: Oranges, one code per heading (up, left, down, right).
ORANGES = (43, 44, 45, 46)
PEBBLE_IN_DIRT, STONE_IN_DIRT, VOID_IN_DIRT = 47, 48, 49
NUM_CODES = 50
NUM_CHANNELS = 34

# Property bits of the official element table.
CONSUMABLE, CAN_EXPLODE, ROUNDED, TRAVERSABLE, PUSHABLE = 1, 2, 4, 8, 16
_NULL_PROPERTIES = CONSUMABLE | CAN_EXPLODE | ROUNDED | TRAVERSABLE | PUSHABLE
_PROPERTIES = {
    AGENT: CONSUMABLE | CAN_EXPLODE, EMPTY: CONSUMABLE | TRAVERSABLE, DIRT: CONSUMABLE | TRAVERSABLE,
    STONE: CONSUMABLE | ROUNDED | PUSHABLE, STONE_FALLING: CONSUMABLE,
    DIAMOND: CONSUMABLE | ROUNDED | TRAVERSABLE, DIAMOND_FALLING: CONSUMABLE, EXIT_OPEN: TRAVERSABLE,
    **dict.fromkeys(FIREFLIES + BUTTERFLIES + ORANGES, CONSUMABLE | CAN_EXPLODE),
    BRICK_WALL: CONSUMABLE | ROUNDED, MAGIC_DORMANT: CONSUMABLE, MAGIC_ON: CONSUMABLE, MAGIC_EXPIRED: CONSUMABLE,
    BLOB: CONSUMABLE, **dict.fromkeys(KEYS, TRAVERSABLE),
    NUT: ROUNDED | CONSUMABLE | PUSHABLE, NUT_FALLING: ROUNDED | CONSUMABLE,
    BOMB: ROUNDED | CONSUMABLE | CAN_EXPLODE | PUSHABLE, BOMB_FALLING: ROUNDED | CONSUMABLE | CAN_EXPLODE,
    **dict.fromkeys((PEBBLE_IN_DIRT, STONE_IN_DIRT, VOID_IN_DIRT), _NULL_PROPERTIES),
}  # fmt: skip
#: Property bits by code (codes without an entry have none: exits, agent in exit, steel, explosions, gates).
PROPERTIES = bytes(_PROPERTIES.get(code, 0) for code in range(256))

#: Hidden code -> visible observation channel (255 for codes outside 0-49).
VISIBLE_CHANNEL = np.full(256, 255, dtype=np.uint8)
for _code, _channel in {
    AGENT: 0, EMPTY: 1, DIRT: 2, STONE: 3, STONE_FALLING: 3, DIAMOND: 4, DIAMOND_FALLING: 4, EXIT_CLOSED: 5,
    EXIT_OPEN: 6, AGENT_IN_EXIT: 7, **dict.fromkeys(FIREFLIES, 8), **dict.fromkeys(BUTTERFLIES, 9),
    BRICK_WALL: 10, STEEL_WALL: 11, MAGIC_DORMANT: 13, MAGIC_ON: 12, MAGIC_EXPIRED: 12, BLOB: 14,
    EXPLOSION_DIAMOND: 15, EXPLOSION_STONE: 15, EXPLOSION: 15, **{code: code - 11 for code in range(27, 39)},
    NUT: 28, NUT_FALLING: 28, BOMB: 29, BOMB_FALLING: 29, **dict.fromkeys(ORANGES, 30),
    PEBBLE_IN_DIRT: 31, STONE_IN_DIRT: 32, VOID_IN_DIRT: 33,
}.items():  # fmt: skip
    VISIBLE_CHANNEL[_code] = _channel

#: The codes of the paper's levels, whose rules do not depend on the game parameters with
#: gravity off (26 arises there only when the agent is killed).
STATIC_CODES = frozenset({
    AGENT, EMPTY, DIRT, DIAMOND, DIAMOND_FALLING, EXIT_CLOSED, EXIT_OPEN, AGENT_IN_EXIT, BRICK_WALL, STEEL_WALL,
    *CLOSED_GATES, *OPEN_GATES, *KEYS,
})  # fmt: skip
