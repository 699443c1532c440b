"""Run and comparison archives: pack mid-run, unpack elsewhere, resume as if never stopped; damaged archives refused."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.errors import ConfigError
from sgps.experiments import compare
from sgps.experiments.packing import pack, unpack
from sgps.runs import runner
from sgps.runs.archive import MIN_PART_BYTES, Member, read_members, write_archive
from sgps.runs.packing import run_snapshot
from sgps.runs.rundir import RunDirectory
from sgps.runs.trainer_state import encode_trainer_state, read_trainer_state
from sgps.training.config import load_run_config, parse_toml

from conftest import REPO

#: PHS*(π^SG) learning from failed trees (tiny networks, budget 150: few problems solved at first).
SETTINGS = {"run": {"algorithm": "phs-sg", "device": "cpu"},
            "bootstrap": {"initial_budget": 150, "max_iterations": 2, "checkpoint_every": 1}}  # fmt: skip


def levels(path: Path, count: int = 40, seed: int = 0) -> Path:
    domain = get_domain("tsp")
    write_levels(path, domain, [domain.generate(seed + k) for k in range(count)])
    return path


def train(problems: Path, out: Path, **options) -> None:
    runner.train(problems, out, preset="tiny", overrides=SETTINGS, quiet=True, threads=1, **options)


def without_time(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def learning_columns(run: Path) -> list[str]:
    return (run / "metrics" / "learning.csv").read_text().splitlines()[0].split(",")[2:]


def test_a_run_packed_mid_run_and_resumed_elsewhere_equals_one_never_stopped(tmp_path):
    problems = levels(tmp_path / "train.txt")
    whole = tmp_path / "whole"
    train(problems, whole)
    here = tmp_path / "laptop"
    here.mkdir()
    moved_problems = str(shutil.copy(problems, here / "levels.txt"))
    train(Path(moved_problems), here / "run", max_batches=2)
    assert main(["pack", str(here / "run"), "--out", str(tmp_path / "archive"), "--problems", moved_problems]) == 0
    shutil.rmtree(here)  # the first machine is gone: only the archive is left
    elsewhere = tmp_path / "gpu-box" / "run"
    assert main(["unpack", str(tmp_path / "archive"), "--out", str(elsewhere)]) == 0
    runner.train(elsewhere / "problems" / "train.txt", elsewhere, resume=True, quiet=True, threads=1)
    columns = learning_columns(whole)
    for name in ("train", "validate", "outstanding", "learning"):
        expected = without_time(RunDirectory(whole, columns).read(name))
        assert without_time(RunDirectory(elsewhere, columns).read(name)) == expected, name
    assert len(RunDirectory(whole, columns).read("outstanding")) > 3  # start + 2 batches: it went on past the pack
    for name in ("latest.safetensors", "best.safetensors"):
        a, b = load_file(whole / "checkpoints" / name), load_file(elsewhere / "checkpoints" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    assert "resumed on cpu at" in (elsewhere / "log.txt").read_text()


def test_unpack_says_how_to_go_on_and_a_resume_records_a_change_of_device(tmp_path, capsys):
    problems = levels(tmp_path / "train.txt", count=24)
    run = tmp_path / "run"
    train(problems, run, max_batches=1)
    trainer = run / "checkpoints" / "trainer.pt"
    state = read_trainer_state(trainer)
    assert state["device"] == "cpu"
    trainer.write_bytes(encode_trainer_state({**state, "device": "cuda"}))  # as if it had trained on a GPU
    pack(run, tmp_path / "archive", problems=problems)
    capsys.readouterr()
    assert main(["unpack", str(tmp_path / "archive"), "--out", str(tmp_path / "back")]) == 0
    printed = capsys.readouterr().out
    command = f"sgps train --problems {tmp_path / 'back' / 'problems' / 'train.txt'} --out {tmp_path / 'back'} --resume"
    assert command in printed and "last on cuda" in printed
    runner.train(tmp_path / "back" / "problems" / "train.txt", tmp_path / "back", resume=True, quiet=True,
                 threads=1, max_batches=1)  # fmt: skip
    assert "resumed on cpu, moved from cuda" in (tmp_path / "back" / "log.txt").read_text()


def test_packing_refuses_other_problems_an_archive_inside_the_run_and_a_link(tmp_path):
    problems = levels(tmp_path / "train.txt", count=24)
    run = tmp_path / "run"
    train(problems, run, max_batches=1)
    with pytest.raises(ConfigError, match="give the level file it was trained on"):
        pack(run, tmp_path / "a")
    with pytest.raises(ConfigError, match="not the train problems"):
        pack(run, tmp_path / "a", problems=levels(tmp_path / "other.txt", count=24, seed=100))
    with pytest.raises(ConfigError, match="lies inside"):
        pack(run, run / "metrics" / "archive", problems=problems)
    (run / "metrics" / "link.csv").symlink_to(problems)
    with pytest.raises(ConfigError, match="a symbolic link in the run folder"):
        pack(run, tmp_path / "a", problems=problems)
    assert not (tmp_path / "a").exists()


def test_an_archive_is_replaced_only_when_asked_and_split_into_parts(tmp_path):
    payload = os.urandom(MIN_PART_BYTES * 5 // 2)  # incompressible: three parts of at most 1 MiB
    members = [Member("runs/a/big.bin", payload), Member("compare.toml", b"x = 1\n")]
    index = write_archive(tmp_path / "archive", "comparison", {}, members, part_bytes=MIN_PART_BYTES)
    assert len(index.parts) == 3 and all(int(part["bytes"]) <= MIN_PART_BYTES for part in index.parts)
    with pytest.raises(ConfigError, match="pass --overwrite"):
        write_archive(tmp_path / "archive", "comparison", {}, members)
    write_archive(tmp_path / "archive", "comparison", {}, members[1:], overwrite=True)
    _, read = read_members(tmp_path / "archive")
    assert [member.path for member in read] == ["compare.toml"]
    assert sorted(p.name for p in (tmp_path / "archive").iterdir()) == ["archive.json", "part-000.tar.xz"]
    (tmp_path / "folder").mkdir()
    with pytest.raises(ConfigError, match=r"already exists; choose another name$"):
        write_archive(tmp_path / "folder", "comparison", {}, members, overwrite=True)  # not an archive: kept


@pytest.mark.parametrize("damage", ["missing part", "edited part", "edited index"])
def test_a_damaged_archive_is_named_and_nothing_is_unpacked(tmp_path, damage):
    problems = levels(tmp_path / "train.txt", count=24)
    run = tmp_path / "run"
    train(problems, run, max_batches=1)
    archive = tmp_path / "archive"
    pack(run, archive, problems=problems, part_bytes=MIN_PART_BYTES)
    part = archive / "part-000.tar.xz"
    if damage == "missing part":
        part.unlink()
        expected = "part-000.tar.xz: missing"
    elif damage == "edited part":
        data = bytearray(part.read_bytes())
        data[len(data) // 2] ^= 1
        part.write_bytes(bytes(data))
        expected = "its bytes differ"
    else:
        (archive / "archive.json").write_text("{")
        expected = "not a readable archive index"
    with pytest.raises(ConfigError, match=expected):
        unpack(archive, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive", "run", "train.txt"]


def test_a_training_run_is_packed_from_a_whole_checkpoint(tmp_path):
    problems = levels(tmp_path / "train.txt", count=24)
    run = tmp_path / "run"
    train(problems, run, max_batches=1)
    with RunDirectory(run).lock():  # as if it were training now: packed all the same
        files = run_snapshot(run)
    assert "checkpoints/trainer.pt" in files and ".lock" not in files
    latest = run / "checkpoints" / "latest.safetensors"
    os.utime(latest, ns=(latest.stat().st_atime_ns, (run / "checkpoints" / "trainer.pt").stat().st_mtime_ns + 10**9))
    with RunDirectory(run).lock(), pytest.raises(ConfigError, match="a checkpoint was written each time"):
        run_snapshot(run, attempts=2, wait=0)  # training, weights newer than the trainer state: half written
    assert run_snapshot(run, attempts=1, wait=0) == files  # idle (stopped between the two writes): as it is


def test_an_unpacked_run_packs_again(tmp_path):
    problems = levels(tmp_path / "train.txt", count=24)
    run = tmp_path / "run"
    train(problems, run, max_batches=1)
    pack(run, tmp_path / "first", problems=problems)
    unpack(tmp_path / "first", tmp_path / "moved")
    checkpoints = tmp_path / "moved" / "checkpoints"
    assert (checkpoints / "trainer.pt").stat().st_mtime_ns >= (checkpoints / "latest.safetensors").stat().st_mtime_ns
    moved_problems = tmp_path / "moved" / "problems" / "train.txt"
    pack(tmp_path / "moved", tmp_path / "second", problems=moved_problems)
    (tmp_path / "second" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"notes\.txt: not a file of the archive"):
        pack(tmp_path / "moved", tmp_path / "second", problems=moved_problems, overwrite=True)
    assert (tmp_path / "second" / "notes.txt").read_text() == "mine"


def test_a_comparison_travels_without_the_sets_it_generated(tmp_path):
    config = tmp_path / "compare.toml"
    config.write_text(
        '[compare]\ndomain = "tsp"\nalgorithms = ["phs-sg"]\nseeds = [0]\npreset = "tiny"\n'
        '[problems.train]\nvariant = "standard"\nseed = 0\ncount = 24\nvalidation = 4\n'
        '[tests.test]\nvariant = "standard"\nseed = 9000\ncount = 4\nbudget = 300\n'
        '[train.bootstrap]\nmax_iterations = 1\ninitial_budget = 150\ncheckpoint_every = 1\n'
    )
    folder = tmp_path / "cmp"
    # One thread for its one run (the planner would give it both cores: two torch threads beside the other test
    # worker can take minutes over a batch).
    compare(config, folder, jobs=1, threads=1, max_batches=1, stream=io.StringIO())
    assert main(["pack", str(folder), "--out", str(tmp_path / "archive")]) == 0
    _, members = read_members(tmp_path / "archive")
    names = {member.path for member in members}
    assert "problems/train.txt" not in names and "problems/tests/test.txt" not in names
    assert {"compare.toml", "problems/digests.json", "runs/phs-sg-s0/checkpoints/trainer.pt"} <= names
    moved = tmp_path / "elsewhere"
    unpack(tmp_path / "archive", moved)
    for name in ("train.txt", "tests/test.txt"):
        assert (moved / "problems" / name).read_bytes() == (folder / "problems" / name).read_bytes()
    outcome = compare(moved / "compare.toml", moved, jobs=1, threads=1, stream=io.StringIO())
    assert outcome.failure() is None
    assert (moved / "runs" / "phs-sg-s0" / "metrics" / "test-test.csv").is_file()


@pytest.mark.parametrize("archive", sorted((REPO / "results" / "runs").glob("*/archive.json")),
                         ids=lambda path: path.parent.name)  # fmt: skip
def test_every_run_archived_on_main_loads_its_configuration_with_this_code(archive, tmp_path):
    """The logs of docs/results/ resume these archives with the current code: a setting added since they were
    packed must be one of `LATER_SETTINGS` (with the behaviour the run had), or the resume would be refused as
    incomplete."""
    _, members = read_members(archive.parent)
    configs = [member for member in members if member.path == "config.toml"  # a run's archive, or a comparison's
               or (member.path.startswith("runs/") and member.path.endswith("/config.toml"))]  # fmt: skip
    assert configs
    for member in configs:
        file = tmp_path / member.path
        loaded = load_run_config(file, document=parse_toml(member.data, file))
        assert loaded.run.algorithm in member.data.decode()
