"""Run directories a user can trust: no silent overwrite, one trainer at a time, plain files, an honest log."""

from __future__ import annotations

import io
import os
import stat

import pytest

from sgps.cli import main
from sgps.domains import get_domain, write_levels
from sgps.fileio import atomic_write_text
from sgps.runs.rundir import RunDirectory


@pytest.fixture
def problems(tmp_path):
    domain = get_domain("tsp")
    path = tmp_path / "train.txt"
    write_levels(path, domain, [domain.generate(seed) for seed in range(10)])
    return path


def train(problems, run, *extra):
    return main(["train", "--problems", str(problems), "--out", str(run), "--preset", "tiny", "--quiet",
                 "--device", "cpu", "--max-iterations", "1", *extra])  # fmt: skip


def resume(problems, run, *extra):
    return main(["train", "--problems", str(problems), "--out", str(run), "--resume", "--quiet", *extra])


def test_a_fresh_run_refuses_a_folder_holding_a_run_unless_told_to_overwrite(problems, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(problems, run) == 0
    (run / "checkpoints" / "trainer.pt").unlink()  # even without its trainer state the run's files are kept
    before = (run / "metrics" / "train.csv").read_bytes()
    capsys.readouterr()
    assert train(problems, run, "--seed", "5") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "already holds a run; pass --resume to continue it, --overwrite" in error
    assert (run / "metrics" / "train.csv").read_bytes() == before
    (run / "notes.txt").write_text("mine")
    assert train(problems, run, "--seed", "5", "--overwrite") == 0
    assert 'seed = 5' in (run / "config.toml").read_text() and (run / "notes.txt").read_text() == "mine"
    assert resume(problems, run, "--overwrite") == 2


def test_a_second_trainer_on_a_locked_run_exits_at_once_naming_the_holder(problems, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    rows = len(RunDirectory(run).read("train"))
    capsys.readouterr()
    with RunDirectory(run).lock():
        assert resume(problems, run) == 2
    assert f"is being trained by process {os.getpid()}" in capsys.readouterr().err
    assert len(RunDirectory(run).read("train")) == rows  # nothing written by the refused process
    (run / ".lock").write_text("999999")  # left by a killed process: nobody holds the lock
    assert resume(problems, run) == 0


def test_resume_cuts_the_log_back_with_the_metrics_and_files_are_plain(problems, tmp_path):
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    with open(run / "log.txt", "a") as handle:
        handle.write("a line written after the last checkpoint\n")
    assert resume(problems, run) == 0
    log = (run / "log.txt").read_text()
    assert log.startswith("sgps ") and "after the last checkpoint" not in log
    for csv_file in (run / "metrics").glob("*.csv"):
        assert b"\r" not in csv_file.read_bytes(), csv_file.name  # one line ending everywhere


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_honour_the_umask(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "file.txt", "text")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "file.txt").stat().st_mode) == mode


def test_resume_refuses_changed_settings_and_problems_before_writing_anything(problems, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    before = {path.name: path.read_bytes() for path in (run / "metrics").glob("*.csv")}

    def refused(*extra, problem_file=problems):
        capsys.readouterr()
        assert resume(problem_file, run, *extra) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and "Traceback" not in error
        assert {path.name: path.read_bytes() for path in (run / "metrics").glob("*.csv")} == before
        return error

    assert "bootstrap.seed cannot change when a run is resumed" in refused("--seed", "7")
    assert "run.algorithm, bootstrap.seed cannot change" in refused("--algorithm", "levin", "--seed", "7")
    assert "--preset and --config cannot be given with --resume" in refused("--preset", "paper")
    config = run / "config.toml"
    original = config.read_text()
    config.write_text(original.replace("batch_size = 16", "batch_size = 8"))
    assert "changed since the run started: bootstrap.batch_size (16 -> 8)" in refused()
    config.write_text(original)
    domain = get_domain("tsp")
    other = tmp_path / "other.txt"
    write_levels(other, domain, [domain.generate(seed) for seed in range(100, 110)])
    assert "problems differ from those the run was trained on" in refused(problem_file=other)
    assert resume(problems, run, "--max-iterations", "2", "--time-limit", "30") == 0  # limits may change
    assert "max_iterations = 2" in config.read_text()


def test_a_run_stopped_by_a_limit_goes_on_when_resumed_with_a_higher_one(problems, tmp_path):
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert train(problems, whole, "--max-iterations", "2") == 0
    assert train(problems, split) == 0  # stopped by its limit of one pass
    assert resume(problems, split, "--max-iterations", "2") == 0
    for name in ("train", "validate", "outstanding"):
        rows = [{k: v for k, v in row.items() if k != "seconds"} for row in RunDirectory(split).read(name)]
        expected = [{k: v for k, v in row.items() if k != "seconds"} for row in RunDirectory(whole).read(name)]
        assert rows == expected, name


@pytest.fixture
def finished_run(problems, tmp_path):
    run = tmp_path / "finished"
    assert train(problems, run) == 0
    return run


def damage_weights(path, change):
    """Rewrite a safetensors checkpoint with `change(tensors)` applied, keeping its metadata (and checksum)."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    tensors = load_file(str(path))
    change(tensors)
    save_file(tensors, str(path), metadata=metadata)


def first_weight(tensors):
    return next(name for name, tensor in sorted(tensors.items()) if tensor.is_floating_point() and tensor.numel())


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("nan", "holds NaN or infinite values"),
        ("int64", "the network needs torch.float32"),
        ("flipped", "do not match the checksum"),
        ("fifo", "not a regular file"),
        ("dev-zero", "not a regular file"),
        ("huge", "more than a checkpoint of this run can hold"),
    ],
)
def test_a_damaged_checkpoint_is_refused_in_one_line(finished_run, problems, capsys, damage, message):
    import torch

    best = finished_run / "checkpoints" / "best.safetensors"
    if damage == "nan":
        damage_weights(best, lambda t: t[first_weight(t)].view(-1).__setitem__(0, float("nan")))
    elif damage == "int64":
        damage_weights(best, lambda t: t.__setitem__(first_weight(t), t[first_weight(t)].to(torch.int64)))
    elif damage == "flipped":
        data = bytearray(best.read_bytes())
        data[-5] ^= 0x40  # a byte of tensor data, past the header
        best.write_bytes(bytes(data))
    elif damage == "fifo":
        best.unlink()
        os.mkfifo(best)
    elif damage == "dev-zero":
        best.unlink()
        best.symlink_to("/dev/zero")
    else:
        best.write_bytes(best.read_bytes() + bytes(8 << 20))
    capsys.readouterr()
    assert main(["test", str(finished_run), "--problems", str(problems)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(best) in error and message in error, error


@pytest.mark.parametrize("damage", ["random", "extra-field", "dev-zero", "bad-ids", "nan-weights", "flipped-byte"])
def test_a_damaged_trainer_state_is_refused_without_torch_text(finished_run, problems, capsys, damage):
    from sgps.runs.trainer_state import encode_trainer_state, read_trainer_state

    trainer = finished_run / "checkpoints" / "trainer.pt"
    before = (finished_run / "metrics" / "train.csv").read_bytes()
    if damage == "random":
        trainer.write_bytes(os.urandom(4096))
    elif damage == "dev-zero":
        trainer.unlink()
        trainer.symlink_to("/dev/zero")
    elif damage == "flipped-byte":  # one bit of the optimiser's state: the digest catches it
        data = bytearray(trainer.read_bytes())
        middle = len(data) // 2
        data[middle] ^= 0x01
        trainer.write_bytes(bytes(data))
    else:
        payload = read_trainer_state(trainer)
        if damage == "extra-field":
            payload["loop"]["surprise"] = 1
        elif damage == "bad-ids":
            payload["loop"]["solved"] = [0, 10_000]
        else:
            weights = next(t for t in payload["method"]["network"].values() if t.is_floating_point())
            weights.view(-1)[0] = float("inf")
        trainer.write_bytes(encode_trainer_state(payload))
    capsys.readouterr()
    assert resume(problems, finished_run, "--max-iterations", "2") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(trainer) in error and "weights_only" not in error, error
    assert (finished_run / "metrics" / "train.csv").read_bytes() == before


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("partial-last-line", None),  # a half-written row after the checkpoint: dropped, the batch runs again
        ("carriage-returns", None),  # \r\n line ends lose no rows
        ("lost-rows", "rows were lost"),
        ("duplicated", "repeats an earlier row"),
        ("foreign", "fields, not"),
        ("emptied", "the header is not"),
    ],
)
def test_metrics_are_repaired_by_a_rule_or_the_resume_is_refused(problems, tmp_path, capsys, damage, message):
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    train_csv = run / "metrics" / "train.csv"
    lines = train_csv.read_text().splitlines(keepends=True)
    if damage == "partial-last-line":
        train_csv.write_text("".join(lines) + "0,1,3,1,4")
    elif damage == "carriage-returns":
        train_csv.write_bytes("".join(lines).replace("\n", "\r\n").encode())
    elif damage == "lost-rows":
        train_csv.write_text("".join(lines[:-2]))
    elif damage == "duplicated":
        train_csv.write_text("".join([*lines[:2], lines[1], *lines[3:]]))
    elif damage == "foreign":
        train_csv.write_text("".join([*lines[:2], "7,7,7\n", *lines[3:]]))
    else:
        train_csv.write_text("")
    damaged = train_csv.read_bytes()
    capsys.readouterr()
    status = resume(problems, run)
    error = capsys.readouterr().err
    if message is None:
        assert status == 0, error
        rows = RunDirectory(run).read("train")
        assert len({(r["iteration"], r["batch"], r["problem"]) for r in rows}) == len(rows)
    else:
        assert status == 2 and message in error and str(train_csv) in error and error.count("\n") == 1, error
        assert train_csv.read_bytes() == damaged  # nothing rewritten


def test_a_run_config_with_missing_keys_is_named_not_filled_from_a_preset(finished_run, problems, capsys):
    config = finished_run / "config.toml"
    config.write_text("")
    capsys.readouterr()
    assert main(["test", str(finished_run), "--problems", str(problems)]) == 2
    error = capsys.readouterr().err
    assert f"{config}: the run's configuration is incomplete (missing run.domain" in error and error.count("\n") == 1


def test_a_checkpoint_of_another_search_is_refused_even_with_the_same_architecture(problems, tmp_path, capsys):
    run = tmp_path / "sg"
    assert train(problems, run, "--algorithm", "phs-sg") == 0
    config = run / "config.toml"
    config.write_text(config.read_text().replace('algorithm = "phs-sg"', 'algorithm = "levin-sg"'))
    capsys.readouterr()
    assert main(["test", str(run), "--problems", str(problems)]) == 2
    assert "saved with sgps.search = 'phs', but this run has 'levin'" in capsys.readouterr().err


def test_a_full_disk_stops_with_one_line_naming_the_file_and_resume_matches_an_uninterrupted_run(
    problems, tmp_path, capsys, monkeypatch
):
    import errno

    import sgps.fileio

    whole, broken = tmp_path / "whole", tmp_path / "broken"
    real_fsync, calls = os.fsync, []

    def counting(fd):
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(sgps.fileio.os, "fsync", counting)
    assert train(problems, whole, "--max-iterations", "2") == 0
    writes, calls[:] = len(calls), []

    def fsync_until_full(fd):
        calls.append(fd)
        if len(calls) == writes - 1:  # the last checkpoint: the run resumes from the one before
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(sgps.fileio.os, "fsync", fsync_until_full)
    capsys.readouterr()
    assert train(problems, broken, "--max-iterations", "2") == 2
    error = capsys.readouterr().err
    assert error.startswith(f"sgps: error: {broken}") and "No space left on device" in error
    assert error.count("\n") == 1 and "error::" not in error and ".tmp" not in error
    monkeypatch.setattr(sgps.fileio.os, "fsync", real_fsync)
    assert resume(problems, broken) == 0
    for name in ("train", "validate", "outstanding"):
        rows = [{k: v for k, v in row.items() if k != "seconds"} for row in RunDirectory(broken).read(name)]
        expected = [{k: v for k, v in row.items() if k != "seconds"} for row in RunDirectory(whole).read(name)]
        assert rows == expected, name


def test_a_folder_in_place_of_a_checkpoint_is_named(tmp_path, capsys):
    domain = get_domain("tsp")
    problems = tmp_path / "forty.txt"  # several batches per pass, so the run stops mid-pass
    write_levels(problems, domain, [domain.generate(seed) for seed in range(40)])
    run = tmp_path / "run"
    assert train(problems, run, "--max-batches", "1") == 0
    latest = run / "checkpoints" / "latest.safetensors"
    latest.unlink()
    latest.mkdir()
    capsys.readouterr()
    assert resume(problems, run) == 2
    error = capsys.readouterr().err
    assert f"{latest}: a folder stands where the file should be written" in error and ".tmp" not in error


class _Planted:
    """A pickle payload that would create a file if it were ever executed."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_a_malicious_trainer_state_executes_nothing(finished_run, problems, tmp_path, capsys):
    import pickle

    planted = tmp_path / "planted.txt"
    (finished_run / "checkpoints" / "trainer.pt").write_bytes(pickle.dumps({"loop": _Planted(str(planted))}))
    capsys.readouterr()
    assert resume(problems, finished_run, "--max-iterations", "2") == 2
    assert not planted.exists() and "not a readable trainer checkpoint" in capsys.readouterr().err


def test_a_run_trained_on_a_gpu_resumes_on_a_machine_without_one(finished_run, problems, monkeypatch):
    """A GPU run's trainer state holds optimiser tensors tagged for the GPU: reading it on a CPU maps them there."""
    import torch

    from sgps.runs.trainer_state import encode_trainer_state, read_trainer_state

    if torch.cuda.is_available():
        pytest.skip("the machine has a GPU: nothing to map")
    trainer = finished_run / "checkpoints" / "trainer.pt"
    payload = read_trainer_state(trainer)
    tag_as_gpu = (0, lambda obj: "cuda:0" if obj.device.type == "cpu" else None, lambda obj, location: None)
    monkeypatch.setattr(torch.serialization, "_package_registry", [tag_as_gpu, *torch.serialization._package_registry])
    saved_on_gpu = encode_trainer_state(payload)
    monkeypatch.undo()
    trainer.write_bytes(saved_on_gpu)
    with pytest.raises(RuntimeError, match="CUDA"):  # what reading it without mapping would meet
        torch.load(io.BytesIO(torch.load(io.BytesIO(saved_on_gpu), weights_only=True)["payload"].numpy().tobytes()),
                   weights_only=True)  # fmt: skip
    assert read_trainer_state(trainer)["loop"] == payload["loop"]
    assert resume(problems, finished_run, "--max-iterations", "2") == 0


def test_a_file_name_of_the_longest_valid_length_is_written(tmp_path):
    """Its temporary file is named after a cut-down stem, not refused for a name over 255 bytes."""
    target = tmp_path / ("é" * 100 + "x" * 51 + ".png")  # 255 bytes in UTF-8
    assert len(target.name.encode("utf-8")) == 255
    atomic_write_text(target, "picture")
    assert target.read_text() == "picture" and [p.name for p in tmp_path.iterdir()] == [target.name]
