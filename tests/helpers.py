"""Small builders for hand-made test levels."""

from __future__ import annotations

from typing import Any

from sgps.domains.base import Domain


def level_from_rows(domain: Domain[Any], rows: list[str], legend: dict[str, int], header: tuple[int, ...] = ()) -> Any:
    """Parse a level drawn as text rows, each character mapped to a code by `legend`."""
    cells = [legend[char] for row in rows for char in row]
    return domain.parse([len(rows), len(rows[0]), *header, *cells])


def run(domain: Domain[Any], state: Any, actions: list[int]) -> Any:
    for action in actions:
        state = domain.step(state, action)
    return state
