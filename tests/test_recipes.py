"""Training recipes (`run.recipe`): one word for a set of settings, chosen by the set the training levels were
generated as."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from sgps.domains import get_domain
from sgps.domains.levels import generated_set, write_levels
from sgps.errors import ConfigError
from sgps.experiments.comparison import _refuse_changes as refuse_changes
from sgps.experiments.plan import changed_keys, parse_plan, read_plan
from sgps.runs import runner
from sgps.runs.archive import read_members
from sgps.runs.fork import fork_run
from sgps.training.config import load_run_config, resolve_config
from sgps.training.recipes import RECIPES

from conftest import REPO

#: A tiny flat run: budget 150, one batch of 16.
SETTINGS = {"run": {"algorithm": "phs", "device": "cpu"},
            "bootstrap": {"initial_budget": 150, "max_iterations": 1, "checkpoint_every": 1}}  # fmt: skip


def generated(path: Path, domain_name: str = "boulderdash", variant: str = "hard", count: int = 20) -> Path:
    """Levels written as `sgps generate DOMAIN --variant VARIANT` writes them (its header names the set)."""
    domain = get_domain(domain_name)
    states = [domain.generate(seed, **domain.variants[variant]) for seed in range(count)]
    write_levels(path, domain, states, variant=variant, seed=0, params=domain.variants[variant])
    return path


def bootstrap(config) -> tuple[str, int, int]:
    return config.run.recipe, config.bootstrap.initial_budget, config.bootstrap.solution_memory


def test_auto_takes_the_recipe_measured_fastest_on_the_set_and_the_papers_loop_elsewhere():
    assert RECIPES["hard"] == {"bootstrap": {"initial_budget": 16_000, "solution_memory": 32}}
    assert RECIPES["memory"] == {"bootstrap": {"solution_memory": 32}}
    assert bootstrap(resolve_config("cpu", generated_as=("boulderdash", "hard"))) == ("hard", 16_000, 32)
    # Hard TSP: the budget of 16,000 measured slower, the memory alone faster (docs/results/recipes.md).
    assert bootstrap(resolve_config("cpu", generated_as=("tsp", "hard"))) == ("memory", 2000, 32)
    for generated_as in (("craftworld", "hard"), ("boulderdash", "standard"), ("tsp", "standard"), None):
        assert bootstrap(resolve_config("cpu", generated_as=generated_as)) == ("paper", 2000, 0)
    paper = resolve_config("cpu", overrides={"run": {"recipe": "paper"}}, generated_as=("boulderdash", "hard"))
    assert bootstrap(paper) == ("paper", 2000, 0)
    assert bootstrap(resolve_config("tiny", overrides={"run": {"recipe": "hard"}})) == ("hard", 16_000, 32)
    assert bootstrap(resolve_config("cpu", overrides={"run": {"recipe": "memory"}})) == ("memory", 2000, 32)


def test_a_recipe_gives_way_to_the_file_and_the_command_line(tmp_path):
    file = tmp_path / "settings.toml"
    file.write_text('[run]\nrecipe = "hard"\n\n[bootstrap]\ninitial_budget = 8000\n')
    assert bootstrap(resolve_config("tiny", file)) == ("hard", 8000, 32)
    assert bootstrap(resolve_config("tiny", file, {"bootstrap": {"solution_memory": 4}})) == ("hard", 8000, 4)
    with pytest.raises(ConfigError, match=r"command line: run\.recipe must be one of auto, paper, memory, hard, got"):
        resolve_config("tiny", overrides={"run": {"recipe": "fast"}})


def test_the_set_is_read_from_the_header_of_the_first_file(tmp_path):
    assert generated_set(generated(tmp_path / "hard.txt", count=2)) == ("boulderdash", "hard")
    domain = get_domain("tsp")
    write_levels(tmp_path / "own.txt", domain, [domain.generate(0)])  # no generator settings: no variant
    assert generated_set(tmp_path / "own.txt") is None
    folder = tmp_path / "set"
    folder.mkdir()
    generated(folder / "a.txt", "tsp", count=2)
    generated(folder / "b.txt", count=2)
    assert generated_set(folder) == ("tsp", "hard")
    assert generated_set(tmp_path / "missing.txt") is None  # read_levels names the problem


def test_a_run_on_hard_boulderdash_records_the_hard_recipe_and_keeps_it_when_resumed(tmp_path):
    problems, out = generated(tmp_path / "hard.txt"), tmp_path / "run"
    runner.train(problems, out, preset="tiny", overrides=SETTINGS, quiet=True, threads=1, max_batches=1)
    written = tomllib.loads((out / "config.toml").read_text())
    assert written["run"]["recipe"] == "hard"
    assert (written["bootstrap"]["initial_budget"], written["bootstrap"]["solution_memory"]) == (150, 32)
    assert "recipe hard: bootstrap.initial_budget = 16000, bootstrap.solution_memory = 32" in (
        out / "log.txt").read_text()
    with pytest.raises(ConfigError, match=r"run\.recipe cannot change when a run is resumed"):
        runner.train(problems, out, overrides={"run": {"recipe": "paper"}}, resume=True, quiet=True, threads=1)
    config, _ = runner.train(problems, out, resume=True, quiet=True, threads=1, max_batches=1)
    assert bootstrap(config) == ("hard", 150, 32)
    fork_run(out, tmp_path / "fork", {"bootstrap": {"solution_memory": 8}}, problems=problems)
    assert bootstrap(load_run_config(tmp_path / "fork" / "config.toml")) == ("hard", 150, 8)  # the settings it changed
    paper, _ = runner.train(problems, tmp_path / "paper", preset="tiny", quiet=True, threads=1, max_batches=1,
                            overrides={**SETTINGS, "run": {**SETTINGS["run"], "recipe": "paper"}})  # fmt: skip
    assert bootstrap(paper) == ("paper", 150, 0)


def test_a_run_started_before_recipes_had_names_loads_as_the_papers_loop(tmp_path):
    file = tmp_path / "config.toml"
    config = resolve_config("tiny", overrides={"bootstrap": {"initial_budget": 16_000, "solution_memory": 32}})
    lines = []
    for section, entries in config.as_dict().items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {tomllib_value(value)}" for key, value in entries.items() if key != "recipe"]
    file.write_text("\n".join(lines) + "\n")
    assert bootstrap(load_run_config(file)) == ("paper", 16_000, 32)  # its values as written, named by no recipe


def tomllib_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)


COMPARISON = """
[compare]
domain = "boulderdash"
algorithms = ["phs"]
preset = "tiny"

[problems.train]
variant = "hard"
count = 20

[tests.test]
variant = "hard"
seed = 100
count = 4
"""


def test_a_comparison_records_the_recipe_it_chose_and_one_from_before_recipes_reads_as_the_papers(tmp_path):
    chosen = parse_plan(tomllib.loads(COMPARISON), "config", tmp_path)
    assert chosen.resolved["train"]["run"]["recipe"] == "hard"
    assert bootstrap(chosen.runs[0].config) == ("hard", 16_000, 32)
    paper = parse_plan(tomllib.loads(COMPARISON + '[train.run]\nrecipe = "paper"\n'), "config", tmp_path)
    assert bootstrap(paper.runs[0].config) == ("paper", 500, 0)  # the tiny preset's budget
    tsp = parse_plan(tomllib.loads(COMPARISON.replace("boulderdash", "tsp")), "config", tmp_path)
    assert bootstrap(tsp.runs[0].config) == ("memory", 500, 32)
    older = parse_plan(tomllib.loads(COMPARISON), "compare.toml", tmp_path, recorded=True)
    assert older.resolved["train"]["run"]["recipe"] == "paper"
    assert changed_keys(older.resolved, paper.resolved) == []
    assert changed_keys(older.resolved, chosen.resolved) == ["train.run.recipe"]  # refused: another recipe


@pytest.mark.parametrize("archive", sorted(path.parent for path in (REPO / "results" / "runs").glob("*/archive.json")
                                           if (REPO / "configs" / f"{path.parent.name}.toml").is_file()),
                         ids=lambda path: path.name)  # fmt: skip
def test_every_comparison_archived_on_main_is_resumed_by_its_config(archive, tmp_path):
    """A config in configs/ that made an archived comparison still describes it: its recipe too."""
    _, members = read_members(archive)
    (stored,) = [member for member in members if member.path == "compare.toml"]
    (tmp_path / "compare.toml").write_bytes(stored.data)
    config = REPO / "configs" / f"{archive.name}.toml"
    refuse_changes(config, tmp_path, read_plan(config, check_files=False))  # raises naming the keys that differ
