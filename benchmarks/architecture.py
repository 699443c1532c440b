"""How the package is laid out: each folder's lines and share, the modules, and any import cycle.

The measure of the issue "A house a newcomer can walk" (docs/training.md, "Layout"): before
the split, ``training/`` held 43% of the lines of ``src/sgps`` and four of its modules
imported each other in a circle. Run it before and after a change of layout::

    python benchmarks/architecture.py [--src src]

Nothing of the package is imported: each module is parsed with `ast`, and every ``import``
and ``from ... import`` statement anywhere in it (inside functions and under ``if
TYPE_CHECKING:`` too) is an edge to the module it names. ``from PACKAGE import NAME`` is an
edge to the submodule ``PACKAGE.NAME`` when there is one, else to ``PACKAGE``; the parent
packages that Python initialises on the way are not edges of their own. Lines are the
lines of the ``.py`` files, as ``wc -l`` counts them. `tests/test_architecture.py` asserts
the layout with these same functions.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "sgps"


@dataclass(frozen=True)
class Module:
    """One module of the package: its dotted name, its file, and whether it is a package's ``__init__``."""

    name: str
    path: Path
    is_package: bool


def find_modules(src: Path) -> dict[str, Module]:
    """Every module under ``src/sgps``, by dotted name (``sgps.runs.run``; a package by its own name)."""
    modules = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = Module(".".join(parts), path, is_package)
    return modules


def _known(name: str, modules: Mapping[str, Module]) -> str | None:
    """The module `name` is, or the deepest package of the package that holds it (None: not ours)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: Module, modules: Mapping[str, Module]) -> set[str]:
    """The modules of the package that `module` imports anywhere in its file."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
    here = module.name if module.is_package else module.name.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package `level - 1` above this one's
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in modules else _known(source, modules))
    found.discard(module.name)
    return {name for name in found if name is not None}


def import_graph(src: Path) -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports."""
    modules = find_modules(src)
    return {name: imports_of(module, modules) for name, module in modules.items()}


def cycle_groups(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other in a circle (the strongly connected components of
    more than one module, or of a module importing itself), each sorted; empty when there is no cycle.
    Tarjan's algorithm, O(V + E)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(start: str) -> None:  # iterative, so that a deep graph cannot exhaust the recursion limit
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph.get(node, ()):
                    groups.append(group)

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(sorted(group) for group in groups)


def shortest_cycle(group: list[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest cycle ``[a, b, ..., a]`` through the first module of `group` (breadth first, within it)."""
    start = min(group)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.get(node, ())):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child in group and child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError("a strongly connected group without a cycle")


def folder_of(module: str) -> str:
    """The top-level part of the package that `module` belongs to: a folder (``runs``) or a module (``cli``);
    ``sgps`` for the package's own ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def line_counts(src: Path) -> dict[str, int]:
    """Lines of each top-level folder and module of ``src/sgps`` (``__init__.py`` counted as ``sgps``)."""
    counts: dict[str, int] = {}
    for module in find_modules(src).values():
        lines = module.path.read_bytes().count(b"\n")
        counts[folder_of(module.name)] = counts.get(folder_of(module.name), 0) + lines
    return counts


def folder_shares(src: Path) -> dict[str, tuple[int, float]]:
    """Each top-level folder of ``src/sgps`` (the modules beside them left out): (lines, share of all lines)."""
    counts = line_counts(src)
    total = sum(counts.values())
    folders = {path.name for path in (src / PACKAGE).iterdir() if (path / "__init__.py").is_file()}
    return {name: (counts[name], counts[name] / total) for name in sorted(folders)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the folder holding the sgps package")
    args = parser.parse_args()
    counts = line_counts(args.src)
    total = sum(counts.values())
    graph = import_graph(args.src)
    print(f"{'folder':<14}{'lines':>8}{'share':>8}")
    for name, (lines, share) in sorted(folder_shares(args.src).items(), key=lambda item: -item[1][0]):
        print(f"{name + '/':<14}{lines:>8,}{share:>8.1%}")
    modules = sum(lines for name, lines in counts.items() if name not in folder_shares(args.src))
    print(f"{'(modules)':<14}{modules:>8,}{modules / total:>8.1%}")
    print(f"{'total':<14}{total:>8,}")
    print(f"{len(graph)} modules, {sum(len(edges) for edges in graph.values())} imports between them")
    groups = cycle_groups(graph)
    print(f"{len(groups)} import cycle(s)")
    for group in groups:
        print(f"  {len(group)} modules import each other: {', '.join(group)}")
        print(f"    e.g. {' -> '.join(shortest_cycle(group, graph))}")


if __name__ == "__main__":
    main()
