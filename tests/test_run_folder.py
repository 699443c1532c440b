"""A run folder is opened once per command (`sgps.runs.run.Run`), and every method's runs go
through their plug-in (`sgps.training.plugins`), not through checks of the algorithm's name."""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import sgps
from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.errors import ConfigError
from sgps.runs.run import Run
from sgps.training.plugins import PLUGINS, plugin_for

SOURCES = ("cli.py", "runs/runner.py", "api.py")


@pytest.fixture(scope="module")
def subgoal_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny finished PHS*(π^SG) run on TSP, and its level file."""
    folder = tmp_path_factory.mktemp("run-folder")
    domain = get_domain("tsp")
    problems = folder / "train.txt"
    write_levels(problems, domain, [domain.generate(seed) for seed in range(8)])
    run = folder / "run"
    assert main(["train", "--problems", str(problems), "--out", str(run), "--algorithm", "phs-sg", "--preset", "tiny",
                 "--quiet", "--device", "cpu", "--max-iterations", "1", "--workers", "1",
                 "--threads", "1"]) == 0  # fmt: skip
    return run, problems


@contextlib.contextmanager
def counted_opens(file: Path) -> Iterator[list[str]]:
    """Every opening of `file` meanwhile (through `open`, `io.open` or `os.open`), one entry each; an
    opening made inside another (`Path.read_bytes` calling `io.open`) counts once."""
    target = os.path.realpath(file)
    opens: list[str] = []
    inside = threading.local()
    originals = {"builtins": builtins.open, "io": io.open, "os": os.open}

    def counting(route: str):  # a wrapper of three signatures
        original = originals[route]

        def wrapper(path, *args, **kwargs):
            outer = not getattr(inside, "active", False)
            if outer and isinstance(path, str | os.PathLike) and os.path.realpath(path) == target:
                opens.append(route)
            inside.active = True
            try:
                return original(path, *args, **kwargs)
            finally:
                inside.active = not outer

        return wrapper

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builtins, "open", counting("builtins"))
        patch.setattr(io, "open", counting("io"))
        patch.setattr(os, "open", counting("os"))
        yield opens


def test_each_command_reads_the_run_config_once(subgoal_run, tmp_path, capsys):
    run, problems = subgoal_run
    config = run / "config.toml"
    commands = {
        "test": ["test", str(run), "--problems", str(problems), "--budget", "50"],
        "test --gif": ["test", str(run), "--problems", str(problems), "--budget", "50", "--gif", str(tmp_path / "g")],
        "subgoals": ["subgoals", str(run), "--problems", str(problems), "--png", str(tmp_path / "s.png")],
        "train --resume": ["train", "--problems", str(problems), "--out", str(run), "--resume", "--quiet",
                           "--threads", "1"],
        "pack": ["pack", str(run), "--out", str(tmp_path / "archive"), "--problems", str(problems)],
    }  # fmt: skip
    for name, argv in commands.items():
        with counted_opens(config) as opens, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the resumed run is finished: "nothing trained"
            assert main(argv) == 0, (name, capsys.readouterr().err)
        assert len(opens) == 1, (name, opens)
    with counted_opens(config) as opens:
        searcher = sgps.load(run)
        searcher.solve(problems, budget=50)
        searcher.solve_many(problems, budget=50)
    assert len(opens) == 1, opens


def test_a_run_object_answers_from_one_reading(subgoal_run):
    run, _ = subgoal_run
    opened = Run.open(run)
    assert opened.algorithm == "phs-sg" and opened.domain.name == "tsp" and opened.plugin.draws_subgoals
    assert opened.config.run.algorithm == "phs-sg" and opened.epsilon == opened.config.bootstrap.epsilon
    assert opened.checkpoint("best") in (run / "checkpoints" / "best.safetensors",
                                         run / "checkpoints" / "latest.safetensors")  # fmt: skip
    assert opened.training_finished() and opened.loop_state()["finished"]
    assert Run.of(opened) is opened


def test_every_algorithm_has_one_plug_in_and_the_commands_name_none(tmp_path):
    names = [name for plugin in PLUGINS for name in plugin.algorithms]
    assert sorted(names) == sorted(["phs", "levin", "wastar", "phs-sg", "levin-sg", "hips-eps"])
    assert len(set(names)) == len(names)
    offline = [name for plugin in PLUGINS if not plugin.bootstrap for name in plugin.algorithms]
    assert offline == ["hips-eps"] and not plugin_for("hips-eps").draws_subgoals
    with pytest.raises(ConfigError, match=r"run\.algorithm must be one of"):
        plugin_for("dfs")
    source = Path(sgps.__file__).parent
    for module in SOURCES:
        text = (source / module).read_text()
        assert "hips.ALGORITHM" not in text and "is_hips_run" not in text, module


def test_a_config_with_an_unknown_algorithm_names_the_file(subgoal_run, tmp_path):
    run, _ = subgoal_run
    copy = tmp_path / "copy"
    copy.mkdir()
    text = (run / "config.toml").read_text().replace('algorithm = "phs-sg"', 'algorithm = "dfs"')
    (copy / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"copy/config.toml: run.algorithm must be one of"):
        Run.open(copy)
    (copy / "config.toml").write_text("[run]\n")
    with pytest.raises(ConfigError, match=r"copy/config.toml: the run.s configuration is incomplete \(missing run"):
        Run.open(copy)


def test_the_counter_sees_each_reading(subgoal_run):
    config = subgoal_run[0] / "config.toml"
    with counted_opens(config) as opens:
        config.read_bytes()
        with open(config):
            pass
        os.close(os.open(config, os.O_RDONLY))
    assert opens == ["io", "builtins", "os"]
