"""How BoulderDash cells look: a sprite and a text character for every one of the 50 codes.

Headings of creatures and falling forms share the picture of their element, as in the
official pictures; the three explosions share one.
"""

from __future__ import annotations

import numpy as np

from sgps.domains.boulderdash.elements import (
    AGENT,
    AGENT_IN_EXIT,
    BLOB,
    BOMB,
    BOMB_FALLING,
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
    FIREFLIES,
    KEYS,
    MAGIC_DORMANT,
    MAGIC_EXPIRED,
    MAGIC_ON,
    NUT,
    NUT_FALLING,
    OPEN_GATES,
    ORANGES,
    PEBBLE_IN_DIRT,
    STEEL_WALL,
    STONE,
    STONE_FALLING,
    STONE_IN_DIRT,
    VOID_IN_DIRT,
)
from sgps.domains.render import Sprite

_COLOURS = ((220, 50, 50), (50, 100, 230), (40, 170, 70), (235, 200, 30))
_GROUND = (30, 30, 30)
_DIRT = (120, 80, 40)
_STONE = Sprite(_GROUND, "circle", (150, 140, 130))
_EXPLOSION = Sprite((240, 120, 30), "x", (250, 220, 60))
SPRITE_OF_CODE = {
    AGENT: Sprite(_GROUND, "circle", (250, 250, 250)),
    EMPTY: Sprite(_GROUND),
    DIRT: Sprite(_DIRT, "dot", (90, 60, 30)),
    DIAMOND: Sprite(_GROUND, "diamond", (90, 230, 240)),
    DIAMOND_FALLING: Sprite(_GROUND, "diamond", (150, 240, 250)),
    EXIT_CLOSED: Sprite((100, 100, 100), "frame", (200, 200, 200)),
    EXIT_OPEN: Sprite((240, 240, 240), "frame", (30, 30, 30)),
    AGENT_IN_EXIT: Sprite((240, 240, 240), "circle", (30, 30, 30)),
    BRICK_WALL: Sprite((160, 70, 50), "bars", (110, 45, 30)),
    STEEL_WALL: Sprite((130, 140, 150)),
    EXPLOSION: _EXPLOSION,
    **{closed: Sprite(rgb, "x", (20, 20, 20)) for closed, rgb in zip(CLOSED_GATES, _COLOURS, strict=True)},
    **{opened: Sprite(_GROUND, "frame", rgb) for opened, rgb in zip(OPEN_GATES, _COLOURS, strict=True)},
    **{key: Sprite(_GROUND, "triangle", rgb) for key, rgb in zip(KEYS, _COLOURS, strict=True)},
    STONE: _STONE,
    STONE_FALLING: _STONE,
    **dict.fromkeys(FIREFLIES, Sprite(_GROUND, "cross", (250, 140, 40))),
    **dict.fromkeys(BUTTERFLIES, Sprite(_GROUND, "x", (200, 110, 240))),
    MAGIC_DORMANT: Sprite((70, 60, 110), "bars", (110, 100, 160)),
    MAGIC_ON: Sprite((120, 60, 200), "bars", (230, 200, 255)),
    MAGIC_EXPIRED: Sprite((60, 55, 70), "bars", (85, 80, 95)),
    BLOB: Sprite((40, 120, 40), "ring", (140, 230, 90)),
    EXPLOSION_DIAMOND: _EXPLOSION,
    EXPLOSION_STONE: _EXPLOSION,
    NUT: Sprite(_GROUND, "ring", (200, 170, 110)),
    NUT_FALLING: Sprite(_GROUND, "ring", (200, 170, 110)),
    BOMB: Sprite(_GROUND, "circle", (200, 40, 40)),
    BOMB_FALLING: Sprite(_GROUND, "circle", (200, 40, 40)),
    **dict.fromkeys(ORANGES, Sprite(_GROUND, "square", (245, 150, 30))),
    PEBBLE_IN_DIRT: Sprite(_DIRT, "dot", (190, 180, 170)),
    STONE_IN_DIRT: Sprite(_DIRT, "circle", (150, 140, 130)),
    VOID_IN_DIRT: Sprite(_DIRT, "square", (20, 15, 10)),
}
#: Sprite index of each code, and the sprites in that order (the first 30 are the paper's).
SPRITE_INDEX = np.zeros(256, dtype=np.intp)
for _i, _code in enumerate(SPRITE_OF_CODE):
    SPRITE_INDEX[_code] = _i
SPRITES = tuple(SPRITE_OF_CODE.values())

TEXT = {
    AGENT: "@", EMPTY: " ", DIRT: ".", DIAMOND: "*", DIAMOND_FALLING: "*", EXIT_CLOSED: "E", EXIT_OPEN: "O",
    AGENT_IN_EXIT: "&", BRICK_WALL: "#", STEEL_WALL: "X", EXPLOSION: "%",
    **dict(zip(CLOSED_GATES, "RBGY", strict=True)), **dict(zip(OPEN_GATES, "rbgy", strict=True)),
    **dict(zip(KEYS, "1234", strict=True)),
    STONE: "o", STONE_FALLING: "o", **dict.fromkeys(FIREFLIES, "F"), **dict.fromkeys(BUTTERFLIES, "W"),
    MAGIC_DORMANT: "M", MAGIC_ON: "m", MAGIC_EXPIRED: "=", BLOB: "A", EXPLOSION_DIAMOND: "%", EXPLOSION_STONE: "%",
    NUT: "+", NUT_FALLING: "+", BOMB: "^", BOMB_FALLING: "^", **dict.fromkeys(ORANGES, "Q"),
    PEBBLE_IN_DIRT: ",", STONE_IN_DIRT: ":", VOID_IN_DIRT: ";",
}  # fmt: skip
LEGEND = (
    "@ agent . dirt * diamond E/O exit closed/open # wall R/B/G/Y closed gate r/b/g/y open gate 1-4 key % explosion"
)
MORE_LEGEND = (
    "o stone F firefly W butterfly M/m/= magic wall dormant/active/expired A blob + nut ^ bomb Q orange"
    " ,/:/; pebble/stone/void in dirt X steel"
)
