"""The layout of the package: no import cycle, packages import downwards only, no folder holds too much.

The import graph is read from the source with `ast` (nothing imported; the rules are
those of benchmarks/architecture.py, which prints the same measures): every ``import``
statement anywhere in a module counts, inside functions and under ``if TYPE_CHECKING:``
too. docs/training.md, "Layout", says what each package is for.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"

_spec = importlib.util.spec_from_file_location("architecture", REPO / "benchmarks" / "architecture.py")
assert _spec is not None and _spec.loader is not None
architecture = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = architecture  # its dataclass looks its module up there
_spec.loader.exec_module(architecture)

#: The layers, lowest first: a module may import from its own layer and the layers below, never above.
#: The names are the top-level folders and modules of src/sgps (`sgps` is the package's own __init__).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "fileio", "outputs", "processes", "version"),  # what every layer may use
    ("domains",),
    ("search",),
    ("models",),
    ("training",),  # the Bootstrap loop, the methods, their settings
    ("execution",),  # where searches run: local processes, the shared evaluator, Ray actors
    ("runs",),  # what a run folder is; `sgps train` / `test` / `subgoals`
    ("experiments", "zoo"),  # comparisons and reports; pretrained models
    ("api", "gym"),
    ("cli", "__main__", "sgps"),
)

#: The imports that go up a layer, each with why (also listed in docs/training.md, "Layout").
ALLOWED_UPWARD = {
    # HIPS-ε learns offline: its plug-in's `train_offline` (which `sgps train` calls through the
    # plug-in) writes its run folder itself, checking first that its networks fit in memory.
    ("sgps.training.methods.hips.run", "sgps.runs.rundir"),
    ("sgps.training.methods.hips.run", "sgps.runs.memory"),
}

#: The largest share of the package's lines one top-level folder may hold.
MAX_FOLDER_SHARE = 0.27


def _layer(module: str) -> int:
    folder = architecture.folder_of(module)
    for number, names in enumerate(LAYERS):
        if folder in names:
            return number
    raise AssertionError(f"{module}: its folder {folder!r} has no layer; add it to LAYERS in {__file__}")


def test_no_module_imports_itself_through_others():
    graph = architecture.import_graph(SRC)
    groups = architecture.cycle_groups(graph)
    described = [
        f"{', '.join(group)}; e.g. {' -> '.join(architecture.shortest_cycle(group, graph))}" for group in groups
    ]
    assert not groups, "import cycles:\n" + "\n".join(described)


def test_packages_import_downwards_only():
    graph = architecture.import_graph(SRC)
    upward = sorted((module, imported) for module, imports in graph.items() for imported in imports
                    if _layer(imported) > _layer(module))  # fmt: skip
    unexpected = [f"{module} -> {imported}" for module, imported in upward if (module, imported) not in ALLOWED_UPWARD]
    assert not unexpected, "imports from a layer above (move the shared piece down):\n" + "\n".join(unexpected)
    stale = ALLOWED_UPWARD - set(upward)
    assert not stale, f"allowed upward imports that no longer exist (remove them here and in docs/training.md): {stale}"


def test_no_folder_holds_more_than_its_share():
    shares = architecture.folder_shares(SRC)
    crowded = {name: f"{lines} lines, {share:.1%}" for name, (lines, share) in shares.items()
               if share > MAX_FOLDER_SHARE}  # fmt: skip
    assert not crowded, f"folders above {MAX_FOLDER_SHARE:.0%} of src/sgps: {crowded}"


def test_the_plugin_interface_imports_no_run_folder_code():
    code = (
        "import sys, sgps.training.methods.plugin; "
        "print(sorted(name for name in sys.modules if name == 'sgps.runs' or name.startswith('sgps.runs.')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", f"importing the plug-in interface loaded {loaded}"


def test_the_graph_sees_every_kind_of_import(tmp_path):
    package = tmp_path / "sgps"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("from sgps.low import leaf\n")
    (package / "low" / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sgps.high import Thing\n"
    )
    (package / "low" / "other.py").write_text("def late():\n    from . import leaf\n    import sgps.high.deep\n")
    (package / "high.py").write_text("from sgps.low import other, NAME\n")
    graph = architecture.import_graph(tmp_path)
    assert graph["sgps.low"] == {"sgps.low.leaf"}
    assert graph["sgps.low.leaf"] == {"sgps.high"}  # under TYPE_CHECKING
    assert graph["sgps.low.other"] == {"sgps.low.leaf", "sgps.high"}  # in a function; relative; a missing submodule
    assert graph["sgps.high"] == {"sgps.low.other", "sgps.low"}  # a submodule, and a name of the package
    groups = architecture.cycle_groups(graph)
    assert groups == [["sgps.high", "sgps.low", "sgps.low.leaf", "sgps.low.other"]]
    assert architecture.shortest_cycle(groups[0], graph) == ["sgps.high", "sgps.low.other", "sgps.high"]
