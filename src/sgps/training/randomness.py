"""Random-generator states in a form a weights-only checkpoint can hold."""

from __future__ import annotations

from typing import Any

import numpy as np


def numpy_state(rng: np.random.Generator) -> dict[str, Any]:
    """The generator's state with its 128-bit integers as strings (for a weights-only checkpoint)."""
    state = rng.bit_generator.state
    return {
        "bit_generator": state["bit_generator"],
        "state": str(state["state"]["state"]),
        "inc": str(state["state"]["inc"]),
        "has_uint32": state["has_uint32"],
        "uinteger": state["uinteger"],
    }


def restore_numpy_state(rng: np.random.Generator, saved: dict[str, Any]) -> None:
    """Put `rng` back in the state `numpy_state` recorded."""
    rng.bit_generator.state = {
        "bit_generator": saved["bit_generator"],
        "state": {"state": int(saved["state"]), "inc": int(saved["inc"])},
        "has_uint32": saved["has_uint32"],
        "uinteger": saved["uinteger"],
    }
