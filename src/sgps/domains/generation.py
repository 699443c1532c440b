"""Level-set generation: variants, parameter checking, and per-level seeds.

Level k of a set generated with seed S uses seed S + k, as the reference's official
sets do (e.g. the Box-World test set is seeds 50000-50099), so a set can be extended
or regenerated level by level.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

from sgps.domains.base import Domain
from sgps.errors import ConfigError

#: The most levels one generated set may hold: 100 times the paper's 10,000 training
#: problems, and about a day of generation for the slowest generator.
MAX_LEVELS = 1_000_000


def generator_defaults(domain: Domain[Any]) -> dict[str, Any]:
    """The generator's keyword parameters and their defaults."""
    if type(domain).generate is Domain.generate:
        raise ConfigError(f"domain {domain.name!r} has no level generator")
    signature = inspect.signature(domain.generate)
    return {
        name: parameter.default
        for name, parameter in signature.parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }


def resolve_params(domain: Domain[Any], variant: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The full generator parameters of `variant` with `overrides` applied.

    String values (from the command line) are converted to the type of the default.
    """
    if variant not in domain.variants:
        known = ", ".join(domain.variants) or "none"
        raise ConfigError(f"{domain.name} has no generator variant {variant!r} (variants: {known})")
    params = generator_defaults(domain)
    params.update(domain.variants[variant])
    for key, value in (overrides or {}).items():
        if key not in params:
            raise ConfigError(
                f"unknown {domain.name} generator parameter {key!r} (parameters: {', '.join(sorted(params))})"
            )
        params[key] = _coerce(key, value, params[key])
    return params


def _coerce(key: str, value: Any, default: Any) -> Any:
    if not isinstance(value, str) or isinstance(default, str):
        return value
    text = value.strip().lower()
    if isinstance(default, bool):
        if text in ("true", "yes", "1", "on"):
            return True
        if text in ("false", "no", "0", "off"):
            return False
        raise ConfigError(f"generator parameter {key!r} must be true or false, not {value!r}")
    kind = "an integer" if isinstance(default, int) else "a number"
    pattern = r"-?[0-9]{1,4000}" if isinstance(default, int) else r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([e][+-]?[0-9]+)?"
    special = isinstance(default, float) and value.lower().lstrip("+-") in ("nan", "inf", "infinity")
    if not special and not re.fullmatch(pattern, value.lower()):  # int() would also take '٣', ' 3' or '1_0'
        raise ConfigError(f"generator parameter {key!r} must be {kind} in ASCII digits, not {value!r}")
    return type(default)(text)


def generate_levels(domain: Domain[Any], params: Mapping[str, Any], seed: int, count: int) -> list[Any]:
    """`count` levels; level k is generated from seed `seed + k`."""
    if not 0 <= count <= MAX_LEVELS:
        raise ConfigError(f"the level count must be between 0 and {MAX_LEVELS:,}, not {count:,}")
    states = []
    for k in range(count):
        try:
            states.append(domain.generate(seed + k, **params))
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{domain.name} generator, seed {seed + k}: {error}") from None
    return states
