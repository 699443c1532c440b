"""`sgps train` / `sgps test`: a tiny end-to-end run, resume, configs and errors users can act on."""

from __future__ import annotations

import pytest

from sgps.cli import main
from sgps.errors import ConfigError
from sgps.runs.rundir import to_toml
from sgps.training.config import applicable_settings, resolve_config


@pytest.fixture
def level_files(tmp_path, capsys):
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    assert main(["generate", "tsp", "--count", "40", "--seed", "0", "--out", str(train)]) == 0
    assert main(["generate", "tsp", "--count", "10", "--seed", "9000", "--out", str(test)]) == 0
    capsys.readouterr()
    return train, test


def test_train_then_test_then_resume(tmp_path, level_files, capsys):
    train, test = level_files
    run = tmp_path / "run"
    argv = ["train", "--problems", str(train), "--out", str(run), "--preset", "tiny", "--quiet"]
    assert main([*argv, "--max-iterations", "1", "--seed", "5"]) == 0
    assert "trained phs on tsp: 1 iterations" in capsys.readouterr().out
    assert "max_iterations = 1" in (run / "config.toml").read_text()
    assert main(["test", str(run), "--problems", str(test), "--rounds", "2"]) == 0
    said, row = capsys.readouterr().out.splitlines()
    assert said.startswith(f"testing {run} with its ") and " weights" in said  # which weights it tested
    assert row.startswith("solved ") and "/10 | mean expansions" in row
    record = (run / "metrics" / "test-test.csv").read_text()
    assert record.startswith("round,problem,solved")
    every_search = sum(int(line.split(",")[3]) for line in record.splitlines()[1:])  # failed rounds included
    assert f"| all rounds' expansions {every_search:,} |" in row
    assert main(argv) == 2
    assert "already holds a run; pass --resume" in capsys.readouterr().err
    assert main(["train", "--problems", str(train), "--out", str(run), "--resume", "--quiet"]) == 0
    assert "1 iterations" in capsys.readouterr().out  # the stopping rule had already fired


def test_max_iterations_0_means_no_limit(tmp_path, level_files, capsys):
    """Documented as "0: no limit", it once ended the run before its first batch."""
    train, _ = level_files
    run = tmp_path / "run"
    config = tmp_path / "c.toml"
    config.write_text("[bootstrap]\nmax_iterations = 0\nmax_expansions = 3000\ninitial_budget = 200\n")
    assert main(["train", "--problems", str(train), "--out", str(run), "--preset", "tiny", "--quiet",
                 "--config", str(config)]) == 0  # fmt: skip
    outstanding = (run / "metrics" / "outstanding.csv").read_text().splitlines()
    assert len(outstanding) > 2 and "stopping: expansion limit reached" in (run / "log.txt").read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[network]\nchanels = 3\n", "unknown key network.chanels (keys: channels, blocks, batch_norm)"),
        ("[bootstrap]\nbatch_size = 'many'\n", "bootstrap.batch_size must be an integer from 1 to"),
        ("[optimizer]\nlr = 1\n", "unknown section [optimizer]"),
        ("[bootstrap]\nschedule = 'triple'\n", "bootstrap.schedule must be one of double, lts-cm"),
        ("[network\n", "not valid TOML"),
    ],
)
def test_bad_config_files_name_the_key(tmp_path, level_files, capsys, text, message):
    train, _ = level_files
    config = tmp_path / "bad.toml"
    config.write_text(text)
    assert main(["train", "--problems", str(train), "--out", str(tmp_path / "r"), "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_presets_and_overrides():
    assert resolve_config("tiny").network.channels == 16  # compute-matched: twice each π^SG network's width
    assert resolve_config("paper").network.channels == 128 and resolve_config("paper").network.blocks == 8
    config = resolve_config("cpu", overrides={"learner": {"epochs": 2}, "bootstrap": {"validation_ratio": 1}})
    assert config.learner.epochs == 2 and config.bootstrap.validation_ratio == 1.0
    with pytest.raises(ConfigError, match="unknown preset 'huge'"):
        resolve_config("huge")
    with pytest.raises(ConfigError, match="validation_ratio must be in"):
        resolve_config("cpu", overrides={"bootstrap": {"validation_ratio": 2.0}})


@pytest.mark.parametrize("threads", ["0", "1000000"])
def test_threads_beyond_the_machine_are_refused_before_anything_is_written(tmp_path, level_files, capsys, threads):
    train, _ = level_files
    argv = ["train", "--problems", str(train), "--out", str(tmp_path / "run"), "--preset", "tiny", "--threads", threads]
    assert main(argv) == 2
    assert "--threads must be from 1 to" in capsys.readouterr().err and not (tmp_path / "run").exists()
    assert main([*argv[:-2], "--algorithm", "hips-eps", "--threads", threads]) == 2
    assert "--threads must be from 1 to" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("algorithm", "text", "unused"),
    [
        ("phs", '[subgoal]\ntree_rng = "per-search"\n', "subgoal.tree_rng"),
        ("phs-sg", "[network]\nchannels = 8\n", "network.channels"),
        ("phs", "[search]\nlevin_plus_one = true\n", "search.levin_plus_one"),
        ("wastar", '[learner]\nloss = "improved-levin"\n', "learner.loss"),
    ],
)
def test_a_settings_file_key_the_algorithm_does_not_use_is_refused(tmp_path, level_files, capsys, algorithm,
                                                                    text, unused):  # fmt: skip
    config = tmp_path / "settings.toml"
    config.write_text(text)
    out = tmp_path / "run"
    argv = ["train", "--problems", str(level_files[0]), "--out", str(out), "--algorithm", algorithm,
            "--config", str(config), "--preset", "tiny", "--quiet"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert f"{config}: {unused}: not used by the {algorithm} algorithm" in error and error.count("\n") == 1
    assert not out.exists()


def test_settings_that_apply_are_kept_and_a_written_runs_settings_file_is_accepted(tmp_path):
    config = tmp_path / "settings.toml"
    config.write_text("[search]\nlevin_plus_one = true\n[subgoal]\ntree_rng = \"per-search\"\n")
    resolved = resolve_config("tiny", config, {"run": {"algorithm": "levin-sg"}}, file_keys_apply=True)
    assert resolved.search.levin_plus_one and resolved.subgoal.tree_rng == "per-search"
    for algorithm in ("phs", "levin", "wastar", "phs-sg", "levin-sg"):  # what `sgps compare` writes for its runs
        settings = resolve_config("tiny", overrides={"run": {"algorithm": algorithm}}).as_dict()
        written = applicable_settings(settings, algorithm)
        assert ("subgoal" in written) == algorithm.endswith("-sg") and ("network" in written) != ("subgoal" in written)
        dump = tmp_path / f"{algorithm}.toml"
        dump.write_text(to_toml(written))
        resolved = resolve_config("tiny", dump, file_keys_apply=True).as_dict()
        assert all(resolved[section] == entries | resolved[section] for section, entries in written.items())


def test_a_resumed_runs_progress_bar_shows_this_commands_rate(monkeypatch):
    """The bar's expansions a second count this command's expansions over its seconds: a run resumed at
    69 M expansions showed 1.6 M a second after its first batch (69 M over 42 s)."""
    from types import SimpleNamespace

    from sgps.runs import runner

    shown: list[dict] = []

    class Bar:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, count):
            pass

        def set_postfix(self, **values):
            shown.append(values)

    clock = iter([100.0, 110.0, 120.0])
    monkeypatch.setattr(runner, "tqdm", Bar)
    monkeypatch.setattr(runner.time, "perf_counter", lambda: next(clock))

    class Resumed:
        state = SimpleNamespace(cumulative_expansions=69_000_000)

        def run(self, max_batches, on_batch, session):
            for total in (69_020_000, 69_050_000):
                on_batch(SimpleNamespace(cumulative_expansions=total, iteration=1, train_budget=16000, solved={1}))
            return "state"

    assert runner._run_with_progress(Resumed(), 10, False, None, None) == "state"
    assert [row["exp_per_s"] for row in shown] == ["2,000", "2,500"]
