"""Output paths checked in one place: refusals leave the disk as it was, special files never block.

Each case here failed before `sgps.outputs` existed: an output over an input, a FIFO
where a file goes, a refusal after files were created, or a wait on a FIFO forever.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pytest

import sgps
from fuzzing import deadline
from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.errors import ConfigError
from sgps.outputs import FILE, FOLDER, Output, check_outputs
from sgps.runs.run import loop_state
from sgps.training.config import TRAIN_OPTIONS, option_flag
from sgps.training.schema import ALGORITHMS

ALL_ALGORITHMS = (*ALGORITHMS, "hips-eps")


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with the bytes of its regular files (None for others)."""
    return {str(path.relative_to(folder)): path.read_bytes() if path.is_file() and not path.is_fifo() else None
            for path in sorted(folder.rglob("*"))}  # fmt: skip


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("sgps: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def levels(tmp_path: Path) -> Path:
    domain = get_domain("tsp")
    path = tmp_path / "t.txt"
    write_levels(path, domain, [domain.generate(seed) for seed in range(10)])
    return path


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    domain = get_domain("tsp")
    write_levels(folder / "t.txt", domain, [domain.generate(seed) for seed in range(10)])
    run = folder / "run"
    assert main(["train", "--problems", str(folder / "t.txt"), "--out", str(run), "--preset", "tiny", "--quiet",
                 "--device", "cpu", "--max-iterations", "1"]) == 0  # fmt: skip
    return run


# -- the check itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (Output("--out", Path("")), "needs a file name, not the current folder"),
        (Output("--out", Path(".")), "needs a file name, not the current folder"),
        (Output("--out", Path("/")), "a folder, not a file name"),
        (Output("--out", Path("a/..")), "a folder, not a file name"),
        (Output("--out", Path("/"), FOLDER), "the root of the file system"),
    ],
)
def test_names_that_are_no_file(tmp_path, monkeypatch, output, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=message):
        check_outputs([output])


def test_what_stands_at_the_path_must_be_what_is_written(tmp_path):
    fifo, folder, file = tmp_path / "fifo", tmp_path / "folder", tmp_path / "file"
    os.mkfifo(fifo)
    folder.mkdir()
    file.write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    cases = [
        (Output("--png", fifo), "a FIFO (named pipe), not a regular file"),
        (Output("--png", folder), "a folder stands there"),
        (Output("--out", file, FOLDER), "a file stands there; name a folder"),
        (Output("--out", fifo, FOLDER), "a FIFO (named pipe) stands there"),
        (Output("--out", file / "x"), f"{file} is a file, so nothing can be created under it"),
        (Output("--out", tmp_path / "dangling"), "a symbolic link to nothing"),
        (Output("--out", file, result=True), "already holds a finished result; pass --overwrite"),
    ]
    for output, message in cases:
        with pytest.raises(ConfigError, match=re.escape(message)) as caught:
            check_outputs([output])
        assert output.option in str(caught.value)
    check_outputs([Output("--out", file, result=True)], overwrite=True)
    check_outputs([Output("--out", folder, FOLDER), Output("--png", file, FILE), Output("--out", tmp_path / "new")])


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_folder_without_write_permission_is_named(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ConfigError, match=f"no permission to write in {locked}"):
        check_outputs([Output("--out", locked / "new" / "file.txt")])


def test_outputs_are_not_inputs_and_not_each_other(tmp_path):
    level = tmp_path / "t.txt"
    level.write_text("x")
    with pytest.raises(ConfigError, match=r"--out .* is also the --problems input"):
        check_outputs([Output("--out", tmp_path / "." / "t.txt")], [("--problems", level)])
    (tmp_path / "link.txt").symlink_to(level)
    with pytest.raises(ConfigError, match="is also the --problems input"):
        check_outputs([Output("--out", tmp_path / "link.txt")], [("--problems", level)])
    run = tmp_path / "run"
    (run / "metrics").mkdir(parents=True)
    (run / "metrics" / "mine.toml").write_text("")
    with pytest.raises(ConfigError, match=r"--config .* lies in .*metrics, which --out .* replaces"):
        check_outputs([Output("--out", run, FOLDER, replaces=("metrics",))],
                      [("--config", run / "metrics" / "mine.toml")])
    with pytest.raises(ConfigError, match="--out and --tensorboard name the same path"):
        check_outputs([Output("--out", run, FOLDER), Output("--tensorboard", run, FOLDER)])


# -- every command that writes --------------------------------------------------------------


def hostile_commands(tmp: Path, levels: Path, run: Path) -> list[list[str]]:
    """One command line per output option of the command line, each aimed at a FIFO named `tmp`/fifo."""
    fifo = str(tmp / "fifo")
    return [
        ["generate", "tsp", "--out", fifo],
        ["show", str(levels), "--png", fifo],
        ["solve", str(levels), "--gif", fifo],
        ["dataset", "tsp", "--problems", str(levels), "--out", fifo],
        ["train", "--problems", str(levels), "--out", fifo, "--preset", "tiny"],
        ["train", "--problems", str(levels), "--out", str(tmp / "r"), "--preset", "tiny", "--tensorboard", fifo],
        ["train", "--problems", str(levels), "--out", fifo, "--algorithm", "hips-eps"],
        ["test", str(run), "--problems", str(levels), "--gif", fifo],
        ["subgoals", str(run), "--problems", str(levels), "--png", fifo],
        ["compare", str(levels), "--out", fifo],
        ["demo", "--out", fifo, "--no-train"],
    ]


def test_every_output_option_refuses_a_fifo_and_creates_nothing(tmp_path, levels, finished_run, capsys):
    os.mkfifo(tmp_path / "fifo")
    for argv in hostile_commands(tmp_path, levels, finished_run):
        before, run_before = snapshot(tmp_path), snapshot(finished_run)
        with deadline():
            assert main(argv) == 2, argv
        assert "fifo" in one_error(capsys), argv
        assert snapshot(tmp_path) == before and snapshot(finished_run) == run_before, argv


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["dataset", "tsp", "--problems", "{t}", "--out", "{t}"], "--out {t} is also the --problems input"),
        (["dataset", "tsp", "--problems", "{t}", "--out", ".."], "--out ..: a folder, not a file name"),
        (["show", "{t}", "--png", "{t}"], "--png {t} is also the level file input"),
        (["generate", "tsp", "--out", "{t}/x"], "is a file, so nothing can be created under it"),
        (["train", "--problems", "{t}", "--out", "{d}/run", "--preset", "tiny", "--tensorboard", "{t}"],
         "--tensorboard {t}: a file stands there"),
        (["train", "--problems", "{t}", "--out", "{d}/run", "--preset", "tiny", "--tensorboard", ""],
         "--tensorboard needs a folder for the event files, not an empty name"),
        (["train", "--problems", "{t}", "--out", "{d}/run", "--tensorboard", "{d}/run"], "name the same path"),
    ],
)  # fmt: skip
def test_refusals_name_the_option_and_leave_the_disk_as_it_was(tmp_path, levels, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    fill = {"{t}": str(levels), "{d}": str(tmp_path)}
    argv = [fill.get(arg, arg).replace("{d}", str(tmp_path)).replace("{t}", str(levels)) for arg in argv]
    before = snapshot(tmp_path)
    assert main(argv) == 2
    expected = message.replace("{t}", str(levels))
    assert expected in one_error(capsys)
    assert snapshot(tmp_path) == before


def test_an_empty_path_option_is_refused_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["dataset", "tsp", "--problems", "x", "--out", ""])
    assert exited.value.code == 2 and "an empty path" in capsys.readouterr().err


def test_a_finished_dataset_is_replaced_only_with_overwrite(tmp_path, levels, capsys):
    out = tmp_path / "d.npz"
    assert main(["dataset", "tsp", "--problems", str(levels), "--out", str(out), "--workers", "1"]) == 0
    before = out.read_bytes()
    assert main(["dataset", "tsp", "--problems", str(levels), "--out", str(out), "--workers", "1"]) == 2
    assert "already holds a finished result; pass --overwrite" in one_error(capsys)
    assert out.read_bytes() == before
    assert main(["dataset", "tsp", "--problems", str(levels), "--out", str(out), "--workers", "1",
                 "--overwrite"]) == 0  # fmt: skip


def test_hips_on_levels_it_cannot_solve_leaves_no_run_folder(tmp_path, capsys):
    walled = tmp_path / "walled.txt"
    walled.write_text("2|3|1|2|3|0|2|0\n2|3|1|2|3|0|2|0\n")  # the only city behind a wall
    before = snapshot(tmp_path)
    assert main(["train", "--problems", str(walled), "--domain", "tsp", "--out", str(tmp_path / "hips"),
                 "--algorithm", "hips-eps"]) == 2  # fmt: skip
    assert "finished none of the 2 levels" in one_error(capsys)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", [".lock", "log.txt", "metrics/outstanding.csv"])
def test_a_fifo_inside_a_run_is_refused_not_waited_on(tmp_path, finished_run, capsys, name):
    run = tmp_path / "run"
    os.system(f"cp -r {finished_run} {run}")
    (run / name).unlink()
    os.mkfifo(run / name)
    problems = finished_run.parent / "t.txt"
    with deadline():
        status = main(["train", "--problems", str(problems), "--out", str(run), "--resume", "--quiet",
                       "--max-iterations", "2"])  # fmt: skip
    assert status == 2 and name.split("/")[-1] in one_error(capsys)


def test_a_fifo_as_the_dataset_journal_is_refused_not_waited_on(tmp_path, levels, capsys):
    os.mkfifo(tmp_path / "d.npz.journal")
    with deadline():
        assert main(["dataset", "tsp", "--problems", str(levels), "--out", str(tmp_path / "d.npz")]) == 2
    assert "d.npz.journal" in one_error(capsys)


# -- options that do not apply ----------------------------------------------------------------

#: A value of each option that the parser and the settings accept.
OPTION_VALUES = {
    "algorithm": None, "device": "cpu", "workers": "1", "evaluator": "auto", "tensorboard": "tb", "seed": "3",
    "max_iterations": "2", "time_limit": "1", "max_expansions": "1000", "levin_plus_one": None, "duplicates": "eager",
    "evaluation_batch": "1", "precision": "float32", "learning_precision": "float32", "loss": "levin",
    "failed_trees": None, "codebook_size": "3", "recipe": "hard",
    "cluster_level": "1", "conditioning": "code-vector", "codebook": "restart", "mixture": "geometric",
}  # fmt: skip


def not_applying() -> list[tuple[str, str]]:
    return [(name, algorithm) for name, option in TRAIN_OPTIONS.items() for algorithm in ALL_ALGORITHMS
            if algorithm not in option.algorithms]  # fmt: skip


@pytest.mark.parametrize(("name", "algorithm"), not_applying())
def test_an_option_that_does_not_apply_is_refused_for_every_algorithm(tmp_path, levels, capsys, name, algorithm):
    flag = option_flag(name)
    value = OPTION_VALUES[name]
    argv = ["train", "--problems", str(levels), "--out", str(tmp_path / "run"), "--algorithm", algorithm,
            "--preset", "tiny", flag, *([] if value is None else [value])]  # fmt: skip
    assert main(argv) == 2
    assert f"{flag}: not used by the {algorithm} algorithm" in one_error(capsys)
    assert not (tmp_path / "run").exists()


def test_the_api_names_its_own_argument(tmp_path, levels):
    with pytest.raises(ConfigError, match="levin_plus_one=: not used by the wastar algorithm"):
        sgps.train(levels, tmp_path / "run", algorithm="wastar", levin_plus_one=True, preset="tiny")


def test_hips_refuses_a_negative_seed_as_the_bootstrap_methods_do(tmp_path, levels, capsys):
    assert main(["train", "--problems", str(levels), "--out", str(tmp_path / "r"), "--algorithm", "hips-eps",
                 "--seed", "-1"]) == 2  # fmt: skip
    assert "--seed must be an integer from 0" in one_error(capsys)


def test_show_refuses_cell_without_png(levels, capsys):
    assert main(["show", str(levels), "--cell", "8"]) == 2
    assert "--cell applies only with --png FILE" in one_error(capsys)


# -- resuming a finished run ---------------------------------------------------------------------


def finished_tsp_run(tmp_path: Path, *limit: str) -> tuple[Path, list[str]]:
    """A tiny run on 20 small TSP levels, trained until `limit` (e.g. ``--max-iterations 1``) stopped it;
    the run folder and the `sgps train` arguments that resume it (add ``--resume``)."""
    domain = get_domain("tsp")
    problems = tmp_path / "hard.txt"
    write_levels(problems, domain, [domain.generate(seed, size=8, cities=4) for seed in range(20)])
    run = tmp_path / "run"
    train = ["train", "--problems", str(problems), "--out", str(run), "--quiet"]
    assert main([*train, "--preset", "tiny", "--device", "cpu", *limit]) == 0
    return run, train


def test_resuming_a_finished_run_says_that_it_trained_nothing_and_how_to_go_on(tmp_path, capsys):
    run, train = finished_tsp_run(tmp_path, "--max-iterations", "1")
    capsys.readouterr()
    rows = (run / "metrics" / "train.csv").read_text()
    expected = f"{run}: nothing trained: it stopped at its iteration limit; to train on, give --max-iterations above 1"
    with pytest.warns(UserWarning, match=re.escape(expected)):  # printed as `sgps: warning: ...`
        assert main([*train, "--resume"]) == 0  # allowed (it may invalidate test records), and says it did nothing
    assert (run / "metrics" / "train.csv").read_text() == rows
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main([*train, "--resume", "--max-iterations", "2"]) == 0
    assert (run / "metrics" / "train.csv").read_text() != rows


def test_a_run_stopped_at_its_expansion_limit_trains_on_when_the_limit_is_raised(tmp_path, capsys):
    run, train = finished_tsp_run(tmp_path, "--max-expansions", "300")
    capsys.readouterr()
    spent = loop_state(run)["cumulative_expansions"]
    assert loop_state(run)["stop_reason"] == "expansion limit" and spent >= 300
    expected = f"{run}: nothing trained: it stopped at its expansion limit; to train on, give --max-expansions above "
    with pytest.warns(UserWarning, match=re.escape(f"{expected}{spent}")):
        assert main([*train, "--resume", "--max-expansions", str(spent)]) == 0
    assert main([*train, "--resume", "--max-expansions", str(spent + 1)]) == 0
    assert loop_state(run)["cumulative_expansions"] > spent
    assert "max_expansions = " + str(spent + 1) in (run / "config.toml").read_text()


@pytest.mark.parametrize("target", ["config.toml", "checkpoints/best.safetensors", "link"])
def test_subgoals_never_draws_over_a_file_of_the_run_it_reads(tmp_path, levels, finished_run, capsys, target):
    (tmp_path / "link").symlink_to(finished_run / "config.toml")
    png = tmp_path / "link" if target == "link" else finished_run / target
    before = snapshot(finished_run)
    assert main(["subgoals", str(finished_run), "--problems", str(levels), "--png", str(png)]) == 2
    assert f"is a file of the run input {finished_run}" in one_error(capsys)
    assert snapshot(finished_run) == before


# -- nothing written onto a run's files or a level set's record ----------------------------------


@pytest.mark.parametrize("target", ["config.toml", "checkpoints/best.safetensors", "link"])
def test_generate_never_writes_over_a_file_of_a_run(tmp_path, finished_run, capsys, target):
    (tmp_path / "link").symlink_to(finished_run / "config.toml")
    out = tmp_path / "link" if target == "link" else finished_run / target
    before = snapshot(finished_run)
    assert main(["generate", "tsp", "--count", "2", "--out", str(out)]) == 2
    assert f"is a file of the run folder {finished_run.resolve()}" in one_error(capsys)
    assert snapshot(finished_run) == before
    assert main(["generate", "tsp", "--count", "2", "--out", str(finished_run / "more-levels.txt")]) == 0
    (finished_run / "more-levels.txt").unlink()  # a new file in a run folder is the user's to make


@pytest.mark.parametrize(
    ("command", "option"),
    [(["solve"], "--gif"), (["show"], "--png"), (["subgoals", "RUN", "--problems"], "--png")],
)
def test_a_picture_is_named_after_its_format(tmp_path, levels, finished_run, capsys, command, option):
    argv = [finished_run.as_posix() if word == "RUN" else word for word in command]
    before = snapshot(tmp_path)
    assert main([*argv, str(levels), option, str(tmp_path / "zz.txt")]) == 2
    suffix = option.replace("--", ".")
    assert f"must end in {suffix} (e.g. {tmp_path / 'zz'}{suffix})" in one_error(capsys)
    assert snapshot(tmp_path) == before


def copied_run(tmp_path: Path, finished_run: Path) -> Path:
    run = tmp_path / "run"
    os.system(f"cp -r {finished_run} {run}")
    return run


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_test_record_that_cannot_be_written_is_refused_before_searching(tmp_path, finished_run, capsys, kind):
    run = copied_run(tmp_path, finished_run)
    record = run / "metrics" / "test-t.csv"
    os.mkfifo(record) if kind == "fifo" else record.mkdir()
    before = snapshot(run)
    with deadline():
        assert main(["test", str(run), "--problems", str(finished_run.parent / "t.txt"), "--budget", "20"]) == 2
    message = one_error(capsys)
    assert f"the test record {record}: " in message
    assert snapshot(run) == before  # no journal left behind: nothing was searched


@pytest.mark.parametrize("name", ["test-t.csv", "test-t.csv.partial"])
def test_a_test_never_writes_through_a_link_onto_its_level_file(tmp_path, finished_run, capsys, name):
    run = copied_run(tmp_path, finished_run)
    levels = tmp_path / "t.txt"
    levels.write_bytes((finished_run.parent / "t.txt").read_bytes())
    (run / "metrics" / name).symlink_to(levels)
    text = levels.read_bytes()
    assert main(["test", str(run), "--problems", str(levels), "--budget", "20"]) == 2
    assert "is also the --problems input" in one_error(capsys)
    assert levels.read_bytes() == text


def test_a_record_of_another_level_set_with_the_same_name_is_never_replaced(tmp_path, finished_run, capsys):
    run = copied_run(tmp_path, finished_run)
    domain = get_domain("tsp")
    (tmp_path / "x").mkdir(), (tmp_path / "y").mkdir()
    write_levels(tmp_path / "x" / "t.txt", domain, [domain.generate(seed) for seed in range(3)])
    write_levels(tmp_path / "y" / "t.txt", domain, [domain.generate(seed) for seed in range(100, 104)])
    test = ["test", str(run), "--budget", "20", "--problems"]
    assert main([*test, str(tmp_path / "x" / "t.txt")]) == 0
    record = run / "metrics" / "test-t.csv"
    first = record.read_text()
    assert main([*test, str(tmp_path / "y" / "t.txt")]) == 2
    assert f"{record} is the record of another level set" in one_error(capsys)
    assert record.read_text() == first
    assert main([*test, str(tmp_path / "x" / "t.txt")]) == 0  # the same set is tested anew
    lines = first.splitlines()  # a record written before records named their level set, of 3 levels:
    older = [",".join(line.split(",")[:-2]) for line in lines]  # no levels nor evaluation_batch column
    record.write_text("\n".join([*older, older[-1].replace("1,2,", "1,3,", 1)]) + "\n")  # ... and a 4th problem
    assert main([*test, str(tmp_path / "x" / "t.txt")]) == 2
    assert "tries problem 3, and this set has 3 levels" in one_error(capsys)
