"""Search problems: rules, level formats, observations, rendering, generators, solvers.

Built-in domains (spec/domains.md): ``boulderdash``, ``boxworld``, ``craftworld``,
``sokoban``, ``tsp``. Use
`get_domain(name)` for a domain object and `read_levels(path)` for a level set.
"""

from sgps.domains.base import Domain
from sgps.domains.boulderdash import BoulderDash
from sgps.domains.boxworld import BoxWorld
from sgps.domains.craftworld import CraftWorld
from sgps.domains.levels import Level, LevelSet, format_level, read_levels, write_levels
from sgps.domains.registry import domain_names, get_domain, register_domain, unregister_domain
from sgps.domains.sokoban import Sokoban
from sgps.domains.solver import SolveResult, solve
from sgps.domains.tsp import Tsp

__all__ = [
    "BoulderDash",
    "BoxWorld",
    "CraftWorld",
    "Domain",
    "Level",
    "LevelSet",
    "Sokoban",
    "SolveResult",
    "Tsp",
    "domain_names",
    "format_level",
    "get_domain",
    "read_levels",
    "register_domain",
    "solve",
    "unregister_domain",
    "write_levels",
]
