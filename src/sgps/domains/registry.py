"""The domain registry: names to domain factories.

The five built-in domains are registered under their paper names. A user's own
domain is added with `register_domain` (see docs/domains.md), after which every
part of sgps (level files, solver, search, training, the CLI through
``--plugin``) can use it by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sgps.domains.base import Domain
from sgps.domains.boulderdash import BoulderDash
from sgps.domains.boxworld import BoxWorld
from sgps.domains.craftworld import CraftWorld
from sgps.domains.sokoban import Sokoban
from sgps.domains.tsp import Tsp
from sgps.errors import UnknownDomainError

DomainFactory = Callable[..., Domain[Any]]

_REGISTRY: dict[str, DomainFactory] = {
    "boulderdash": BoulderDash,
    "boxworld": BoxWorld,
    "craftworld": CraftWorld,
    "sokoban": Sokoban,
    "tsp": Tsp,
}


def register_domain(name: str, factory: DomainFactory, *, replace: bool = False) -> None:
    """Make `factory` (a `Domain` subclass or a function returning one) known as `name`.

    Raises `ValueError` if the name is taken, unless `replace` is true.
    """
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"domain names are letters, digits, '-' and '_'; got {name!r}")
    if name in _REGISTRY and not replace:
        raise ValueError(f"a domain named {name!r} is already registered (pass replace=True to override it)")
    _REGISTRY[name] = factory


def unregister_domain(name: str) -> None:
    """Remove a registered domain (mainly for tests of user domains)."""
    _REGISTRY.pop(name, None)


def get_domain(name: str, **options: Any) -> Domain[Any]:
    """A domain object by registry name; `options` go to its factory."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownDomainError(f"unknown domain {name!r}; known domains: {', '.join(domain_names())}") from None
    domain = factory(**options)
    if domain.name != name:
        raise ValueError(f"the factory registered as {name!r} made a domain named {domain.name!r}")
    return domain


def domain_names() -> list[str]:
    """The registered domain names, sorted."""
    return sorted(_REGISTRY)
