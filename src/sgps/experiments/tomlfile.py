"""Writing nested TOML documents (tomllib only reads them).

A comparison's resolved config (``DIR/compare.toml``) nests tables several levels
deep and holds lists, which the run directory's flat writer does not cover. What this
writes, `tomllib` reads back as the same dictionary.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dumps(document: Mapping[str, Any]) -> str:
    """TOML text of `document`: nested tables of str, int, float, bool and lists of them."""
    lines: list[str] = []
    _table(lines, (), document)
    return "\n".join(lines).lstrip("\n") + "\n"


def _table(lines: list[str], path: tuple[str, ...], table: Mapping[str, Any]) -> None:
    scalars = [(key, value) for key, value in table.items() if not isinstance(value, Mapping)]
    tables = [(key, value) for key, value in table.items() if isinstance(value, Mapping)]
    if path and (scalars or not tables):
        lines.extend(["", "[" + ".".join(_key(part) for part in path) + "]"])
    lines.extend(f"{_key(key)} = {_value(value)}" for key, value in scalars)
    for key, value in tables:
        _table(lines, (*path, key), value)


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value!r} to TOML")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"cannot write {value!r} to TOML")
