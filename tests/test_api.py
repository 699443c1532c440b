"""The Python API: the README example on a tiny run, loading, solving, errors, and `sgps test --gif`."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

import sgps
from sgps.cli import main
from sgps.domains import get_domain, read_levels
from sgps.domains.animation import trajectory
from sgps.errors import CheckpointError, ConfigError

from conftest import REPO


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    """Run the README's "Use from Python" blocks (shell, then Python) in a fresh folder."""
    folder = tmp_path_factory.mktemp("readme")
    section = (REPO / "README.md").read_text().split("## Use from Python", 1)[1].split("\n## ", 1)[0]
    (commands,) = re.findall(r"```\n(.*?)```", section, re.DOTALL)
    (snippet,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    printed = io.StringIO()
    namespace: dict = {}
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.chdir(folder)
        for line in commands.splitlines():
            argv = shlex.split(line)
            assert argv[0] == "sgps" and main(argv[1:]) == 0
        exec(snippet, namespace)
    return folder, namespace, printed.getvalue()


def test_the_readme_example_trains_loads_and_solves(readme_run):
    folder, namespace, printed = readme_run
    run, result = namespace["run"], namespace["result"]
    assert (run.domain, run.algorithm, run.iterations) == ("tsp", "phs", 1)
    assert (folder / run.path / "checkpoints" / "latest.safetensors").is_file()
    assert isinstance(result, sgps.SearchOutcome) and result.solved and result.length == len(result.actions)
    assert printed.splitlines()[-1].startswith(f"True {result.length} {result.expansions} ")
    start = read_levels(folder / "test.txt").states()[0]
    assert trajectory(get_domain("tsp"), start, result.actions) == list(result.states)
    assert get_domain("tsp").is_goal(result.states[-1])


def found(outcome: sgps.SearchOutcome) -> sgps.SearchOutcome:
    """The outcome without its wall time, which differs from run to run."""
    return dataclasses.replace(outcome, seconds=0.0)


@pytest.fixture
def searcher(readme_run):
    return sgps.load(readme_run[0] / "runs" / "tsp")


def test_a_level_can_be_a_file_and_index_a_level_or_a_state(readme_run, searcher):
    levels = read_levels(readme_run[0] / "test.txt")
    by_file = searcher.solve(levels.levels[2].path, index=2, budget=2000)
    assert found(searcher.solve(levels.levels[2], budget=2000)) == found(by_file)
    assert found(searcher.solve(levels.states()[2], budget=2000)) == found(by_file)
    assert found(searcher.solve_many(levels.states()[:3], budget=2000)[2]) == found(by_file)
    assert by_file.generated >= by_file.expansions > 0 and by_file.seconds > 0


def test_solve_many_searches_as_many_levels_at_once_as_fit_and_finds_the_same(readme_run, searcher, monkeypatch):
    levels = read_levels(readme_run[0] / "test.txt").states()[:5]
    together = [found(outcome) for outcome in searcher.solve_many(levels, budget=2000)]
    budgets, calls = [], []
    search_lockstep = sgps.api.search_lockstep
    monkeypatch.setattr(sgps.api, "concurrent_searches", lambda budget: budgets.append(budget) or 2)
    monkeypatch.setattr(sgps.api, "search_lockstep", lambda domain, roots, *args, **kwargs:
                        calls.append((len(roots), kwargs["concurrency"]))
                        or search_lockstep(domain, roots, *args, **kwargs))  # fmt: skip
    assert [found(outcome) for outcome in searcher.solve_many(levels, budget=2000)] == together
    assert budgets == [2000] and calls == [(5, 2)]  # 2 at a time, the next starting as one ends


def test_other_algorithms_and_budgets(readme_run, searcher):
    level = readme_run[0] / "test.txt"
    levin = searcher.solve(level, index=1, budget=4000, algorithm="levin")
    assert levin.solved and get_domain("tsp").is_goal(levin.states[-1])
    starved = searcher.solve(level, index=1, budget=2)
    assert (starved.solved, starved.status, starved.actions, starved.length) == (False, "budget", None, None)


def test_load_a_checkpoint_file(readme_run, searcher):
    weights = readme_run[0] / "runs" / "tsp" / "checkpoints" / "latest.safetensors"
    by_file = sgps.load(weights, device="cpu")
    assert by_file.checkpoint == weights and by_file.algorithm == "phs"
    level = readme_run[0] / "test.txt"
    last = sgps.load(weights.parents[1], checkpoint="last")
    assert found(by_file.solve(level, index=4)) == found(last.solve(level, index=4))


def test_errors_users_can_act_on(readme_run, searcher, tmp_path):
    run = readme_run[0] / "runs" / "tsp"
    with pytest.raises(ConfigError, match="not a run directory"):
        sgps.load(tmp_path)
    with pytest.raises(ConfigError, match=r"test.txt: not a run directory or a checkpoint \(.safetensors\) file"):
        sgps.load(readme_run[0] / "test.txt")  # a level file, not "`.`: not a run directory"
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        sgps.load(run, checkpoint=str(tmp_path / "absent.safetensors"))
    level = readme_run[0] / "test.txt"
    with pytest.raises(ConfigError, match="has 10 levels; index 10 is out of range"):
        searcher.solve(level, index=10)
    with pytest.raises(ConfigError, match="unknown search algorithm 'dfs'"):
        searcher.solve(level, algorithm="dfs")
    with pytest.raises(ConfigError, match="the budget must be at least 1"):
        searcher.solve(level, budget=0)
    document = {**searcher.run.document, "run": {**searcher.run.document["run"], "algorithm": "levin"}}
    policy_only = dataclasses.replace(searcher.run, document=document)
    with pytest.raises(ConfigError, match="phs needs a heuristic, and the network of this levin run has none"):
        sgps.Searcher(policy_only, searcher.checkpoint).solve(level, algorithm="phs")
    tsp = get_domain("tsp")
    with pytest.raises(CheckpointError, match="saved from another architecture"):  # trained on 10x10, not 16x16
        searcher.solve(tsp.generate(0, **tsp.variants["large"]))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda s, level: s.solve(level, index=1.5), "index"),
        (lambda s, level: s.solve(level, budget="100"), "budget"),
        (lambda s, level: s.solve(level, budget=True), "budget"),
        (lambda s, level: s.solve(level, budget=float("nan")), "budget"),
        (lambda s, level: s.solve(level, epsilon="0.1"), "epsilon"),
        (lambda s, level: s.solve(None), "level"),
        (lambda s, level: s.solve(get_domain("sokoban").generate(0)), "level"),
        (lambda s, level: s.solve_many([level]), "levels"),
        (lambda s, level: s.solve_many(7), "levels"),
        (lambda s, level: sgps.load(None), "path"),
        (lambda s, level: sgps.load(level.parent / "runs" / "tsp", checkpoint=None), "checkpoint"),
    ],
)
def test_arguments_of_the_wrong_kind_are_refused_where_they_enter(readme_run, searcher, call, name):
    with pytest.raises(TypeError, match=f"^{re.escape(name)}"):
        call(searcher, readme_run[0] / "test.txt")


def test_a_search_outcome_prints_short(readme_run, searcher):
    outcome = searcher.solve(readme_run[0] / "test.txt", index=1, budget=4000)
    text = repr(outcome)
    assert text.startswith("SearchOutcome(status='solved', length=") and len(text) < 120


def test_sgps_test_gif_animates_solved_problems(readme_run, tmp_path, capsys):
    folder = readme_run[0]
    run, problems, gifs = folder / "runs" / "tsp", folder / "test.txt", tmp_path / "gifs"
    argv = ["test", str(run), "--problems", str(problems), "--budget", "2000", "--gif", str(gifs), "--gif-limit", "3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"wrote 3 GIFs to {gifs}" in out
    solved = [int(n) for n in re.findall(r"^\d+,(\d+),1,", (run / "metrics" / "test-test.csv").read_text(), re.M)]
    assert sorted(path.name for path in gifs.iterdir()) == [f"test-{k}.gif" for k in solved[:3]]
    searcher = sgps.load(run)
    for k in solved[:3]:
        with Image.open(gifs / f"test-{k}.gif") as image:
            assert image.n_frames == searcher.solve(problems, index=k, budget=2000).length + 1

    assert main([*argv[:-1], "-1"]) == 2
    assert "sgps: error: --gif-limit must be at least 0, got -1" in capsys.readouterr().err


def test_importing_the_domains_or_the_environments_does_not_import_torch():
    code = "import sys, sgps.domains, sgps.gym; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(REPO))


def test_the_api_and_the_command_take_the_same_training_options():
    """`sgps.train` and `sgps train` share one mapping of options to settings (TRAIN_OPTIONS)."""
    from sgps.cli import build_parser
    from sgps.training.config import TRAIN_OPTIONS, option_overrides

    assert set(TRAIN_OPTIONS) <= set(inspect.signature(sgps.train).parameters)
    args = build_parser().parse_args(["train", "--problems", "levels.txt", "--out", "run"])
    assert set(TRAIN_OPTIONS) <= set(vars(args))
    assert option_overrides({"time_limit": 5.0, "seed": None, "failed_trees": False}) == {
        "bootstrap": {"time_limit_minutes": 5.0}, "subgoal": {"failed_trees": False},
    }  # fmt: skip


def test_the_api_refuses_a_bad_training_option_before_anything_is_written(tmp_path):
    problems = tmp_path / "levels.txt"
    assert main(["generate", "tsp", "--count", "4", "--out", str(problems)]) == 0
    with pytest.raises(ConfigError, match=r"run.workers must be an integer from 0 to 1,024 .*got '3'"):
        sgps.train(problems, tmp_path / "run", workers="3", preset="tiny")
    assert not (tmp_path / "run").exists()
