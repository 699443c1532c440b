"""Inputs a user may give: each is either done right or refused in one line naming what is wrong.

Grouped by root cause: HIPS-ε's data (levels at their goal, damaged dataset arrays, a
level file given as a dataset, levels given twice, its seed and its config sections), the
Python API's arguments (checked where they are given), level files (a folder as a test
set, a byte-order mark) and resumed or overwritten runs (an edited seed, TensorBoard).
"""

from __future__ import annotations

import io
import shutil
import zipfile

import numpy as np
import pytest

import sgps
from sgps.cli import main
from sgps.domains import get_domain, read_levels, write_levels
from sgps.domains.generation import generate_levels
from sgps.errors import ConfigError
from sgps.training.methods.hips import run as hips_run
from sgps.training.methods.hips.dataset import build_dataset, read_dataset, write_dataset

SMALL_TSP = {"size": 6, "cities": 2, "walls": True}
#: Sokoban levels: the first starts at its goal (its box on the target), the others take one or two moves.
SOKOBAN = """; sgps domain=sokoban count=3 params={}
5|5|01|01|01|01|01|01|00|04|06|01|01|04|04|04|01|01|04|04|04|01|01|01|01|01|01
5|5|01|01|01|01|01|01|00|02|03|01|01|04|04|04|01|01|04|04|04|01|01|01|01|01|01
5|5|01|01|01|01|01|01|00|04|04|01|01|04|02|04|01|01|04|03|04|01|01|01|01|01|01
"""


@pytest.fixture(scope="module")
def tsp():
    return get_domain("tsp")


def tsp_levels(tmp_path, name: str, seed: int, count: int):
    path = tmp_path / name
    tsp = get_domain("tsp")
    states = generate_levels(tsp, SMALL_TSP, seed, count)
    write_levels(path, tsp, states, variant="standard", seed=seed, params=SMALL_TSP)
    return path


@pytest.fixture
def no_learning(monkeypatch):
    """HIPS-ε's learner replaced by one that records the trajectories it was given (the tests here are
    about what reaches it, not about learning)."""
    given: list[tuple[str, ...]] = []

    def record(self, dataset, report):
        given.append(tuple(trajectory.name for trajectory in dataset.trajectories))

    monkeypatch.setattr(hips_run.HipsLearner, "train", record)
    return given


def hips_train(*extra: str) -> int:
    return main(["train", "--algorithm", "hips-eps", "--preset", "tiny", "--threads", "1", *extra])


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A finished tiny PHS* run on TSP, and its training levels."""
    folder = tmp_path_factory.mktemp("run")
    problems = tsp_levels(folder, "train.txt", 0, 8)
    run = folder / "run"
    assert main(["train", "--problems", str(problems), "--out", str(run), "--preset", "tiny", "--quiet",
                 "--device", "cpu", "--max-iterations", "1"]) == 0  # fmt: skip
    return run, problems


# -- HIPS-ε: its levels, its dataset, its seed and its settings ------------------------------------------------


def test_hips_skips_levels_already_at_their_goal_and_refuses_when_none_is_left(tmp_path, no_learning, capsys):
    levels = tmp_path / "sokoban.txt"
    levels.write_text(SOKOBAN)
    assert hips_train("--problems", str(levels), "--out", str(tmp_path / "run")) == 0
    out = capsys.readouterr().out
    assert "skipped sokoban:0: it starts at its goal" in out
    assert no_learning == [("sokoban:1", "sokoban:2")]
    solved = tmp_path / "solved.txt"
    solved.write_text("\n".join(SOKOBAN.splitlines()[:2]) + "\n")
    assert hips_train("--problems", str(solved), "--out", str(tmp_path / "none")) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "start at their goal" in error and "nothing to learn" in error
    assert not (tmp_path / "none").exists()  # refused before anything was created
    data = tmp_path / "solved.npz"  # a dataset that holds only such levels (`sgps dataset` keeps them)
    assert main(["dataset", "sokoban", "--problems", str(solved), "--out", str(data), "--workers", "1"]) == 0
    assert hips_train("--dataset", str(data), "--out", str(tmp_path / "from-data")) == 2
    assert "nothing to learn" in capsys.readouterr().err
    assert not (tmp_path / "from-data").exists()


def damage_dataset(path, array: str, damage) -> None:
    """Replace one array of a dataset file by `damage(arrays)` (the others kept as written)."""
    with np.load(path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    arrays[array] = damage(arrays)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path.write_bytes(buffer.getvalue())


DAMAGES = {
    "level_offsets": [lambda a: a["level_offsets"].astype(np.float64), lambda a: a["level_offsets"][::-1].copy(),
                      lambda a: a["level_offsets"] + 1, lambda a: a["level_offsets"].reshape(1, -1)],
    "action_offsets": [lambda a: a["action_offsets"].astype(np.float32), lambda a: a["action_offsets"] * 100,
                       lambda a: a["action_offsets"][::-1].astype(np.uint64)],
    "levels": [lambda a: a["levels"].reshape(1, -1), lambda a: a["levels"].astype(np.float64)],
    "actions": [lambda a: a["actions"].astype(np.float64), lambda a: a["actions"].reshape(1, -1)],
    "names": [lambda a: np.arange(len(a["names"])), lambda a: a["names"].reshape(1, -1)],
    "format": [lambda a: np.array(["sgps-hips-dataset-1", "x"])],
    "domain": [lambda a: np.array([1, 2])],
}  # fmt: skip


@pytest.mark.parametrize(("array", "damage"), [(k, d) for k, ds in DAMAGES.items() for d in ds])
def test_damaged_dataset_arrays_are_refused_naming_the_file_and_the_array(tmp_path, array, damage):
    tsp = get_domain("tsp")
    built = build_dataset(tsp, read_levels(tsp_levels(tmp_path, "train.txt", 0, 2)).levels)
    data = tmp_path / "data.npz"
    write_dataset(data, built.dataset)
    damage_dataset(data, array, damage)
    with pytest.raises(ConfigError, match=rf"data\.npz: .*\b{array}\b"):
        read_dataset(data)


@pytest.mark.parametrize("kind", ["level file", "npy", "zip"])
def test_a_file_that_is_not_a_dataset_is_named_so(tmp_path, kind, capsys):
    given = tmp_path / "given"
    if kind == "level file":
        shutil.copy(tsp_levels(tmp_path, "train.txt", 0, 2), given)
    elif kind == "npy":
        np.save(tmp_path / "array.npy", np.arange(3))
        shutil.copy(tmp_path / "array.npy", given)
    else:
        with zipfile.ZipFile(given, "w") as archive:
            archive.writestr("readme.txt", "hello")
    assert hips_train("--dataset", str(given), "--out", str(tmp_path / "run")) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "allow_pickle" not in error
    assert f"{given}: not a dataset written by `sgps dataset`" in error


def test_extra_levels_also_in_the_training_levels_are_learnt_once(tmp_path, no_learning, capsys):
    problems = tsp_levels(tmp_path, "train.txt", 0, 3)
    extra = tsp_levels(tmp_path, "extra.txt", 1, 4)  # seeds 1-4: levels 1 and 2 are also in train.txt
    assert hips_train("--problems", str(problems), "--extra-problems", str(extra), "--out", str(tmp_path / "r")) == 0
    assert "dropped 2 of the 4 --extra-problems levels" in capsys.readouterr().out
    assert no_learning == [("train:0", "train:1", "train:2", "extra:2", "extra:3")]


@pytest.mark.parametrize("seed", ["99999999999999999999", "18446744073709551616"])
def test_a_hips_seed_out_of_range_is_refused_with_the_range(tmp_path, seed, capsys):
    problems = tsp_levels(tmp_path, "train.txt", 0, 2)
    assert hips_train("--problems", str(problems), "--seed", seed, "--out", str(tmp_path / "run")) == 2
    error = capsys.readouterr().err.strip()
    assert "--seed must be an integer from 0 to 18,446,744,073,709,551,615" in error and len(error.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_hips_section_that_is_not_a_table_is_named(tmp_path, capsys):
    problems = tsp_levels(tmp_path, "train.txt", 0, 2)
    config = tmp_path / "hips.toml"
    config.write_text("hips = 5\n")
    assert hips_train("--problems", str(problems), "--config", str(config), "--out", str(tmp_path / "run")) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and f"{config}: hips must be a table" in error
    run = tmp_path / "edited"  # a run's own config.toml, edited
    run.mkdir()
    (run / "config.toml").write_text('hips = 5\n[run]\nalgorithm = "hips-eps"\ndomain = "tsp"\n')
    assert main(["test", str(run), "--problems", str(problems)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and f"{run / 'config.toml'}: hips must be a table" in error


# -- the Python API: arguments checked where they are given -----------------------------------------------------


@pytest.mark.parametrize("domain", [5, None, 2.5, ["tsp"]])
def test_an_environment_of_a_domain_that_is_not_a_name_or_domain_names_the_argument(domain):
    gym = pytest.importorskip("sgps.gym")
    with pytest.raises(TypeError, match="domain must be a domain name"):
        gym.SgpsEnv(domain)


@pytest.mark.parametrize(("argument", "value"), [("level_file", 5), ("reward", 5)])
def test_an_environment_checks_its_file_and_reward_where_they_are_given(argument, value):
    gym = pytest.importorskip("sgps.gym")
    with pytest.raises(TypeError, match=rf"^{argument} must be .*, not int"):
        gym.SgpsEnv("tsp", **{argument: value})


@pytest.mark.parametrize(("device", "error", "message"), [
    ("gpu", ConfigError, "device must be cpu, cuda or auto, got 'gpu'"),
    (5, TypeError, "device must be 'cpu', 'cuda', 'auto' or None, not int"),
])  # fmt: skip
def test_load_checks_the_device_where_it_is_given(trained_run, device, error, message):
    run, _ = trained_run
    with pytest.raises(error, match=message):
        sgps.load(run, device=device)


def test_load_refuses_cuda_at_once_on_a_machine_without_it(trained_run, tmp_path, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(ConfigError, match="device is 'cuda' but no CUDA device is available; pass device='cpu'"):
        sgps.load(trained_run[0], device="cuda")
    run = tmp_path / "trained-on-a-gpu"
    shutil.copytree(trained_run[0], run)
    config = run / "config.toml"
    config.write_text(config.read_text().replace('device = "cpu"', 'device = "cuda"'))
    with pytest.raises(ConfigError, match="device is 'cuda' but no CUDA device is available; pass device='cpu'"):
        sgps.load(run)
    assert sgps.load(run, device="cpu").solve(trained_run[1], budget=10).expansions > 0


def test_solve_honours_the_index_of_a_file_and_refuses_it_for_one_level(trained_run):
    run, problems = trained_run
    searcher = sgps.load(run)
    levels = read_levels(problems)
    by_index, by_level = searcher.solve(problems, index=3, budget=50), searcher.solve(levels.levels[3], budget=50)
    assert (by_index.status, by_index.expansions, by_index.actions) == (by_level.status, by_level.expansions,
                                                                        by_level.actions)  # fmt: skip
    assert searcher.solve(problems, budget=50).expansions == searcher.solve(levels.levels[0], budget=50).expansions
    for level in (levels.levels[0], levels.levels[0].state):
        with pytest.raises(ConfigError, match="index picks a level of a level file or folder"):
            searcher.solve(level, index=5)


@pytest.mark.parametrize("argument", ["tensorboard", "problems", "out", "validation", "config"])
def test_train_checks_its_path_arguments_before_creating_anything(tmp_path, monkeypatch, argument):
    monkeypatch.chdir(tmp_path)  # where a folder named "5" would go
    problems = tsp_levels(tmp_path, "train.txt", 0, 2)
    given = {"problems": problems, "out": tmp_path / "run", argument: 5}
    with pytest.raises(TypeError, match=rf"^{argument} must be .*, not int 5"):
        sgps.train(given.pop("problems"), given.pop("out"), preset="tiny", **given)
    assert not (tmp_path / "run").exists() and not (tmp_path / "5").exists()


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"limit": "3"}, TypeError, "^limit must be a whole number, not str"),
    ({"limit": -1}, ConfigError, "^the GIF limit must be at least 0, got -1"),
    ({"problems": 5}, TypeError, "^problems must be a level file or folder .*, not int 5"),
    ({"out": None}, TypeError, "^out must be a folder .*, not NoneType None"),
])  # fmt: skip
def test_animating_test_solutions_checks_its_arguments(trained_run, tmp_path, arguments, error, message):
    run, problems = trained_run
    given = {"problems": problems, "out": tmp_path / "gifs", **arguments}
    with pytest.raises(error, match=message):
        sgps.api.animate_test_solutions(run, given.pop("problems"), given.pop("out"), **given)


# -- level files ----------------------------------------------------------------------------------------------------


def test_a_folder_of_level_files_is_a_test_set(trained_run, tmp_path, capsys, monkeypatch):
    run, problems = trained_run
    folder = tmp_path / "tests"
    folder.mkdir()
    shutil.copy(problems, folder / "a.txt")
    shutil.copy(tsp_levels(tmp_path, "other.txt", 100, 3), folder / "b.txt")
    assert main(["test", str(run), "--problems", str(folder), "--budget", "50"]) == 0
    assert "/11" in capsys.readouterr().out
    assert (run / "metrics" / "test-tests.csv").is_file()
    monkeypatch.chdir(folder)  # the folder as `.`: its record is named after it too
    assert main(["test", str(run), "--problems", ".", "--budget", "50"]) == 0
    assert not (run / "metrics" / "test-.csv").exists()


def test_a_byte_order_mark_is_read_as_utf8(tmp_path, tsp):
    plain = tsp_levels(tmp_path, "plain.txt", 0, 3)
    marked = tmp_path / "marked.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    levels = read_levels(marked)
    assert levels.domain.name == "tsp" and levels.metadata["seed"] == 0
    assert [tsp.encode(s) for s in levels.states()] == [tsp.encode(s) for s in read_levels(plain).states()]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"|00|", b"|\xff|", 1))
    with pytest.raises(sgps.errors.LevelFormatError, match=r"bad\.txt:2: not a text level file"):
        read_levels(bad)


def test_a_byte_order_mark_is_read_in_a_config_file(tmp_path, no_learning):
    problems = tsp_levels(tmp_path, "train.txt", 0, 2)
    config = tmp_path / "hips.toml"
    config.write_bytes(b"\xef\xbb\xbf[hips]\nepochs = 1\n")
    assert hips_train("--problems", str(problems), "--config", str(config), "--out", str(tmp_path / "run")) == 0
    assert "epochs = 1" in (tmp_path / "run" / "config.toml").read_text()


# -- resumed and overwritten runs ------------------------------------------------------------------------------------


def test_an_edited_seed_is_named_on_resume(trained_run, tmp_path, capsys):
    source, problems = trained_run
    run = tmp_path / "run"
    shutil.copytree(source, run)
    config = run / "config.toml"
    config.write_text(config.read_text().replace("\nseed = 0\n", "\nseed = 7\n"))
    assert main(["train", "--problems", str(problems), "--out", str(run), "--resume", "--quiet",
                 "--max-iterations", "2"]) == 2  # fmt: skip
    error = capsys.readouterr().err.strip()
    assert "bootstrap.seed (0 -> 7)" in error and "problems differ" not in error


def test_overwriting_a_run_removes_its_own_old_tensorboard_events_only(tmp_path):
    pytest.importorskip("tensorboard")
    problems = tsp_levels(tmp_path, "train.txt", 0, 8)
    board = tmp_path / "tb"
    board.mkdir()
    foreign = [board / "notes.txt", board / "events.out.tfevents.1.host.1"]  # another writer's event file
    for path in foreign:
        path.write_text("kept")
    argv = ["train", "--problems", str(problems), "--preset", "tiny", "--quiet", "--device", "cpu",
            "--max-iterations", "1", "--tensorboard", str(board)]  # fmt: skip
    assert main([*argv, "--out", str(tmp_path / "other")]) == 0  # another run logging to the same folder
    others = set(board.iterdir()) - set(foreign)
    assert main([*argv, "--out", str(tmp_path / "run")]) == 0
    first = set(board.iterdir()) - set(foreign) - others
    assert len(first) == 1
    assert main([*argv, "--out", str(tmp_path / "run"), "--overwrite"]) == 0
    now = set(board.iterdir())
    assert not first & now  # the run's own earlier events are gone
    assert set(foreign) | others <= now and len(now - set(foreign) - others) == 1
