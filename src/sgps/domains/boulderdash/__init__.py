"""BoulderDash as the official simulator (tuero/boulderdash_cpp) plays it: all 50 cell codes and every game parameter.

`BoulderDash` is the domain (`domain`); `elements` holds the codes and their
properties, `scan` the official step, `static` the fast path of the paper's levels,
`generator` the paper's level generator and `drawing` the pictures.
"""

from sgps.domains.boulderdash.domain import (
    PARAMETER_FIELDS,
    BoulderDash,
    BoulderDashState,
    DynamicState,
    rules_of,
)
from sgps.domains.boulderdash.elements import (
    AGENT,
    AGENT_IN_EXIT,
    BRICK_WALL,
    BUTTERFLIES,
    CLOSED_GATES,
    COLOUR_NAMES,
    DIAMOND,
    DIAMOND_FALLING,
    DIRT,
    EMPTY,
    EXIT_CLOSED,
    EXIT_OPEN,
    EXPLOSION,
    KEYS,
    NUM_CHANNELS,
    NUM_CODES,
    OPEN_GATES,
    PEBBLE_IN_DIRT,
    STEEL_WALL,
    STONE,
    VISIBLE_CHANNEL,
)
from sgps.domains.boulderdash.generator import SIZE
from sgps.domains.boulderdash.scan import Hidden, Rules

__all__ = [
    "AGENT", "AGENT_IN_EXIT", "BRICK_WALL", "BUTTERFLIES", "CLOSED_GATES", "COLOUR_NAMES", "DIAMOND",
    "DIAMOND_FALLING", "DIRT", "EMPTY", "EXIT_CLOSED", "EXIT_OPEN", "EXPLOSION", "KEYS", "NUM_CHANNELS", "NUM_CODES",
    "OPEN_GATES", "PARAMETER_FIELDS", "PEBBLE_IN_DIRT", "SIZE", "STEEL_WALL", "STONE", "VISIBLE_CHANNEL",
    "BoulderDash", "BoulderDashState", "DynamicState", "Hidden", "Rules", "rules_of",
]  # fmt: skip
