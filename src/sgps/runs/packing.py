"""A run folder as an archive (`sgps pack RUN`, `sgps unpack`): the way a run moves to another machine.

Packing takes a consistent snapshot of the run folder, even while the run trains: the
checkpoint files first (trainer.pt holds the loop state and the metrics row counts it
saw; resuming cuts the metrics back to them), then everything else, and then checks that
no checkpoint was written meanwhile (else it reads again). A run trained with ``sgps
train`` was given its problems, so they travel with it: ``--problems`` (and
``--validation``) are checked against the problem digests the checkpoint recorded and
stored as ``problems/train.txt`` (and ``problems/validation.txt``) inside the run folder.
Unpacked elsewhere, the run goes on with::

    sgps train --problems RUN/problems/train.txt --out RUN --resume

and its rows and weights are those of a run that was never stopped (a test checks this).
What the archive holds is `sgps.runs.archive`'s format.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from sgps.domains.levels import read_levels, states_digest
from sgps.errors import CheckpointError, ConfigError, RunLockedError
from sgps.fileio import open_regular
from sgps.runs.archive import DEFAULT_PART_BYTES, ArchiveIndex, Member, extract_to_new_folder, write_archive
from sgps.runs.run import CONFIG, Run
from sgps.runs.rundir import RunDirectory
from sgps.runs.runner import check_checkpoint
from sgps.runs.trainer_state import decode_trainer_state
from sgps.training.config import parse_toml
from sgps.training.setup import split_problems, training_and_validation

RUN_KIND = "run"
#: Where the given problem files travel inside an archived run folder.
PROBLEM_FILES = {"train": "problems/train.txt", "validation": "problems/validation.txt"}
#: Read in this order. A checkpoint writes latest.safetensors, then trainer.pt (`Bootstrap.checkpoint`);
#: best.safetensors is written when a validation pass improves, before that pass's checkpoint, so a
#: snapshot's best weights may be a pass ahead of its trainer state (a resume writes them again alike).
CHECKPOINT_FILES = ("checkpoints/trainer.pt", "checkpoints/latest.safetensors", "checkpoints/best.safetensors")
#: How often, and how long apart, a snapshot of a training run is tried before giving up.
SNAPSHOT_ATTEMPTS = 20
SNAPSHOT_WAIT_SECONDS = 3.0


def pack_run(
    run: Path,
    archive: Path,
    problems: Path,
    validation: Path | None = None,
    *,
    part_bytes: int = DEFAULT_PART_BYTES,
    overwrite: bool = False,
) -> ArchiveIndex:
    """Pack the run folder `run`, with the problem files it was trained on, into the archive `archive`."""
    files = run_snapshot(run)
    progress = checkpoint_progress(run, files)
    members = [Member(path, data) for path, data in files.items()]
    given = {"train": problems, "validation": validation}
    fingerprint = progress.pop("fingerprint", {})
    opened = Run.from_document(run, parse_toml(files[CONFIG], run / CONFIG))  # the snapshot's config, not read again
    check_problems(opened, problems, validation, fingerprint)
    for name, path in given.items():
        if path is None:
            continue
        data = read_problem_file(path)
        member = PROBLEM_FILES[name]
        if member in files and files[member] != data:
            raise ConfigError(f"{run / member}: the run folder already holds other {name} problems than {path}")
        if member not in files:
            members.append(Member(member, data))
    resume = (
        f"sgps train --problems RUN/{PROBLEM_FILES['train']}"
        + (f" --validation RUN/{PROBLEM_FILES['validation']}" if validation is not None else "")
        + " --out RUN --resume"
    )
    about = {"run": run.name, "progress": progress, "resume": resume}
    return write_archive(archive, RUN_KIND, about, members, part_bytes=part_bytes, overwrite=overwrite)


def unpack_run(archive: Path, out: Path) -> ArchiveIndex:
    """Unpack a run archive into the new folder `out`; returns its index (`about.resume` says how to go on)."""

    def complete(index: ArchiveIndex, folder: Path) -> None:
        if index.kind != RUN_KIND:
            raise ConfigError(f"{archive}: holds a {index.kind}, not a run; unpack it with `sgps unpack`")
        if not RunDirectory(folder).is_run_directory():
            raise ConfigError(f"{archive}: holds no run folder (no config.toml and metrics)")

    return extract_to_new_folder(archive, out, complete)


def run_snapshot(
    run: Path, *, attempts: int = SNAPSHOT_ATTEMPTS, wait: float = SNAPSHOT_WAIT_SECONDS, prefix: str = ""
) -> dict[str, bytes]:
    """The files of the run folder `run` (member path under `prefix` -> bytes), read consistently.

    An idle run is locked while it is read. A run that is training is read as it is: its
    checkpoint files first, then the rest, and the snapshot is kept only if no checkpoint
    file changed meanwhile and none was being written (latest.safetensors newer than
    trainer.pt). Left out: the lock and temporary files. A symbolic link or a special file
    in the folder is refused: an archive holds regular files, and silently leaving one out
    would lose part of the run.
    """
    if not RunDirectory(run).is_run_directory():
        raise ConfigError(f"{run}: not a run folder (no config.toml beside metrics or checkpoints)")
    with contextlib.ExitStack() as stack:
        idle = _hold_if_idle(stack, run)
        for _ in range(attempts):
            before = _checkpoint_stamps(run)
            if idle or not _checkpoint_in_progress(before):
                files = {name: _read(run, name) for name in CHECKPOINT_FILES if name in before}
                for path in _run_files(run):
                    name = path.relative_to(run).as_posix()
                    if name not in CHECKPOINT_FILES:
                        files[name] = _read(run, name)
                if _checkpoint_stamps(run) == before:
                    return {f"{prefix}{name}": data for name, data in _in_write_order(files).items()}
            time.sleep(wait)
    raise ConfigError(f"{run}: a checkpoint was written each time the run was read ({attempts} tries); "
                      "pack it again, or stop the run first")  # fmt: skip


def _hold_if_idle(stack: contextlib.ExitStack, run: Path) -> bool:
    """Take the run's training lock for the snapshot if no process holds it; whether it was taken.

    A run that is training is read as it is (False). A folder where the lock cannot be made
    (read-only) is read as it is too, checked as a training run would be.
    """
    try:
        stack.enter_context(RunDirectory(run).lock())
    except (RunLockedError, OSError):
        return False
    return True


def _in_write_order(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The snapshot's files with the checkpoint's weights before its trainer state, the order a checkpoint
    writes them, so that an unpacked run's file times look like a whole checkpoint's."""
    order = (CHECKPOINT_FILES[1], CHECKPOINT_FILES[2], CHECKPOINT_FILES[0])
    return {**{name: files[name] for name in order if name in files},
            **{name: data for name, data in files.items() if name not in order}}  # fmt: skip


def _checkpoint_stamps(run: Path) -> dict[str, tuple[int, int, int]]:
    stamps = {}
    for name in CHECKPOINT_FILES:
        try:
            info = (run / name).stat()
        except FileNotFoundError:
            continue
        stamps[name] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return stamps


def _checkpoint_in_progress(stamps: Mapping[str, tuple[int, int, int]]) -> bool:
    """Whether the weights of a checkpoint are written but its trainer state is not yet."""
    latest, trainer = stamps.get(CHECKPOINT_FILES[1]), stamps.get(CHECKPOINT_FILES[0])
    return latest is not None and trainer is not None and latest[2] > trainer[2]


def _run_files(run: Path) -> list[Path]:
    files = []
    for path in sorted(run.rglob("*")):
        if left_out(path.name):
            continue
        if path.is_symlink():
            raise ConfigError(f"{path}: a symbolic link in the run folder; an archive holds regular files only "
                              "(replace the link by the file, or move it out of the folder)")  # fmt: skip
        if path.is_dir():
            continue
        if not path.is_file():
            raise ConfigError(f"{path}: not a regular file (a FIFO, device or socket); move it out of the run folder")
        files.append(path)
    return files


def _read(run: Path, name: str) -> bytes:
    return read_bytes(run / PurePosixPath(name))


def read_bytes(path: Path) -> bytes:
    """The bytes of the regular file `path` (`open_regular`), or one `ConfigError` naming it."""
    try:
        with open_regular(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read it ({error.strerror or error})") from None


def left_out(name: str) -> bool:
    """Whether a file called `name` stays out of an archive: a lock, or a temporary file of a write."""
    return name == ".lock" or (name.startswith(".") and name.endswith((".tmp", ".packing", ".unpacking", ".forking")))


def checkpoint_progress(run: Path, files: Mapping[str, bytes], prefix: str = "") -> dict[str, Any]:
    """What the snapshot's trainer checkpoint says of the run: where it stands, and its fingerprint.

    The checkpoint is checked to be the run's own first (`check_checkpoint`): an archive
    never reports, nor carries, a checkpoint its run could not go on from."""
    data = files.get(f"{prefix}{CHECKPOINT_FILES[0]}")
    if data is None:
        return {"checkpointed": False}
    state = decode_trainer_state(data, run / CHECKPOINT_FILES[0])
    opened = Run.from_document(run, parse_toml(files[f"{prefix}{CONFIG}"], run / CONFIG))
    check_checkpoint(run, opened.config, files, state, prefix)
    try:
        loop = state["loop"]
        progress = {
            "checkpointed": True,
            "iteration": int(loop["iteration"]),
            "next_batch": int(loop["next_batch"]),
            "expansions": int(loop["cumulative_expansions"]),
            "training_solved": len(loop["solved"]),
            "validation_solved": len(loop["validation_solved"]),
            "budget": int(loop["train_budget"]),
            "finished": bool(loop["finished"]),
            "stop_reason": str(loop.get("stop_reason", "")),
            "hours": round(float(loop.get("seconds", 0.0)) / 3600, 3),
            "device": str(state.get("device", "")),
        }
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{run / CHECKPOINT_FILES[0]}: not a trainer checkpoint sgps reads ({error})") from None
    progress["fingerprint"] = dict(state.get("fingerprint") or {})
    return progress


def check_problems(run: Run, problems: Path, validation: Path | None, fingerprint: Mapping[str, str]) -> None:
    """Refuse problem files other than those the run's checkpoint recorded (the run could not resume on them).

    The option to blame is named: a ``--validation`` missing (the training problems are then
    all of `problems`, not a split of it) or given for a run that had none (which split its
    validation problems off `problems`) is named as such, not as other ``--problems``.
    """
    config = run.config
    levels = read_levels(problems, config.run.domain or None)
    train, held_out = training_and_validation(problems, levels, validation, config)
    recorded = fingerprint.get("problems.train")
    if recorded is not None and recorded != states_digest(levels.domain, train):
        states = levels.states()
        if validation is None and recorded == states_digest(levels.domain, states):
            raise ConfigError(f"--validation: {run.path} was trained with a validation file beside {problems} "
                              "(all of whose levels it trained on); give that file with --validation")  # fmt: skip
        split = split_problems(states, config.run.validation_fraction, config.bootstrap.seed)[0]
        if validation is not None and recorded == states_digest(levels.domain, split):
            raise ConfigError(f"--validation {validation}: {run.path} had no validation file (it held its validation "
                              f"problems out of {problems}); drop --validation")  # fmt: skip
    for name, states, path in (("train", train, problems), ("validation", held_out, validation or problems)):
        recorded = fingerprint.get(f"problems.{name}")
        if recorded is not None and recorded != states_digest(levels.domain, states):
            extra = "" if validation is not None or name == "train" else " (give --validation if the run had one)"
            raise ConfigError(f"{path}: not the {name} problems {run.path} was trained on{extra}")


def read_problem_file(path: Path) -> bytes:
    if path.is_dir():
        raise ConfigError(f"{path}: a folder of level files; pack a run trained on one level file")
    return read_bytes(path)
