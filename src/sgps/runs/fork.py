"""Forking a run (`sgps fork`): a new run folder that goes on from another's last checkpoint with other budgets.

A run that has learned for hours at one budget can be carried on at another without
starting again, and without touching the original, which may go on as it was: the fork
holds the parent's files as they stood at its last checkpoint (metrics cut back to the rows
that checkpoint saw, the log to its lines), the same weights, optimiser states, generators
and pass order, and a config.toml with the changed settings. Its first batch is the one the
parent would have searched next, under the fork's budget. Its metrics keep the parent's
rows, so its curves count the expansions the parent spent: a fork is compared with other
runs at equal total expansions.

What a fork may change is the budget schedule, how often it checkpoints, the limits and the
solution memory (`FORK_SETTINGS`); the networks, the learner and the problems are the parent's.
A fork's solution memory holds what the parent's held (the latest `bootstrap.solution_memory`
of it; none where the parent had none): a fork that turns the memory on at a checkpoint before
its parent's first solve goes on exactly as a run that had it from the start. A changed
``bootstrap.initial_budget`` is the budget of the fork's next searches (training and
validation) and its schedule's B_0 from then on, as if the run had started with it; a
``bootstrap.max_budget`` caps the budget in effect at once. The log's first new line says
where the fork came from and what changed; its problem files travel inside it
(``problems/train.txt``, ``problems/validation.txt``), checked against the digests the
parent's checkpoint recorded, so it goes on, and packs, like an unpacked run::

    sgps train --problems FORK/problems/train.txt --out FORK --resume

A fork that keeps the budget schedule is the parent itself: trained on, it writes the
parent's rows and bit-identical weights, however often it checkpoints (a test checks this).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.errors import CheckpointError, ConfigError
from sgps.fileio import atomic_write_bytes, atomic_write_text, open_regular
from sgps.outputs import FOLDER, RUN, Output, check_outputs
from sgps.runs.archive import build_new_folder, write_member
from sgps.runs.packing import CHECKPOINT_FILES, PROBLEM_FILES, check_problems, read_problem_file, run_snapshot
from sgps.runs.run import CONFIG, Run
from sgps.runs.rundir import RunDirectory, to_toml
from sgps.runs.runner import check_checkpoint
from sgps.runs.trainer_state import decode_trainer_state, encode_trainer_state
from sgps.training.bootstrap import LIMIT_SETTINGS, LIMIT_STOPS
from sgps.training.config import TrainConfig, parse_toml
from sgps.training.schema import check_value
from sgps.version import sgps_version

#: What a fork may change and a resume may not: the budget schedule (spec/algorithms.md 6.4), and how
#: often it checkpoints (a batch at a larger budget takes longer; when checkpoints are written changes
#: no result, as a resumed run equals one never stopped), the solution memory (which, until the
#: first solve, changes nothing either), and the validations that choose the best weights (which
#: change no training search).
FORK_ONLY_SETTINGS = (("bootstrap", "initial_budget"), ("bootstrap", "max_budget"), ("bootstrap", "schedule"),
                      ("bootstrap", "checkpoint_every"), ("bootstrap", "solution_memory"),
                      ("bootstrap", "validate_every"))  # fmt: skip
#: Everything a fork may change: those and the limits. The rest is the parent's run.
FORK_SETTINGS = (*FORK_ONLY_SETTINGS, *(("bootstrap", key) for key in LIMIT_SETTINGS))
TRAINER = CHECKPOINT_FILES[0]


def fork_changes(
    *,
    initial_budget: int | None = None,
    max_budget: int | None = None,
    schedule: str | None = None,
    checkpoint_every: int | None = None,
    solution_memory: int | None = None,
    validate_every: int | None = None,
    max_iterations: int | None = None,
    time_limit: float | None = None,
    max_expansions: int | None = None,
) -> dict[str, dict[str, Any]]:
    """The `changes` of `fork_run` from the options of ``sgps fork`` (None keeps the parent's value).

    The command line and the Python API both call it, so an option reaches the same setting
    (``--time-limit`` minutes are ``bootstrap.time_limit_minutes``) whichever way a fork is made.
    """
    settings = {"initial_budget": initial_budget, "max_budget": max_budget, "schedule": schedule,
                "checkpoint_every": checkpoint_every, "solution_memory": solution_memory,
                "validate_every": validate_every, "max_iterations": max_iterations,
                "time_limit_minutes": time_limit, "max_expansions": max_expansions}  # fmt: skip
    return {"bootstrap": {key: value for key, value in settings.items() if value is not None}}


@dataclass(frozen=True)
class Fork:
    """A fork just made: where it is, where it came from and what changed."""

    path: Path
    parent: Path
    expansions: int  # the parent's expansions at the checkpoint forked from
    iteration: int  # the pass the fork goes on with
    next_batch: int  # its next batch in that pass
    changes: tuple[str, ...]  # "section.key old -> new", one per changed setting
    budget: int  # the budget of the fork's next training searches
    validation: bool  # whether it was given a validation file

    def resume_command(self) -> str:
        """The command that trains the fork on."""
        validation = f" --validation {self.path / PROBLEM_FILES['validation']}" if self.validation else ""
        return f"sgps train --problems {self.path / PROBLEM_FILES['train']}{validation} --out {self.path} --resume"


def fork_run(
    parent: Path,
    out: Path,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    problems: Path | None = None,
    validation: Path | None = None,
) -> Fork:
    """Fork the run folder `parent` at its last checkpoint into the new folder `out`, with `changes`
    (``{section: {key: value}}``, among `FORK_SETTINGS`) applied.

    `problems` (and `validation`): the level files the parent was trained on; by default those
    it holds itself (an unpacked run, or a fork). Nothing is written unless everything checks
    out, the parent's checkpoint among it (its own, under its config.toml as it stands:
    `runner.check_checkpoint`), and `out` appears whole or not at all. The parent may be
    training meanwhile: it is read as `sgps pack` reads it, and left as it was.
    """
    changes = {section: dict(entries) for section, entries in (changes or {}).items() if entries}
    refused = [f"{section}.{key}" for section, entries in changes.items() for key in entries
               if (section, key) not in FORK_SETTINGS]  # fmt: skip
    if refused:
        allowed = ", ".join(f"{section}.{key}" for section, key in FORK_SETTINGS)
        raise ConfigError(f"{', '.join(refused)} cannot change in a fork, which goes on with the parent's networks, "
                          f"learner and problems (a fork may change {allowed})")  # fmt: skip
    for section, entries in changes.items():  # each value alone, before the parent is read (and locked)
        for key, value in entries.items():
            check_value(section, key, value)
    check_outputs([Output("--out", out, FOLDER, owner=RUN, apart=True)], (("RUN", parent), ("--problems", problems),
                                                   ("--validation", validation)))  # fmt: skip
    files = run_snapshot(parent)
    document = parse_toml(files[CONFIG], parent / CONFIG)
    parent_run = Run.from_document(parent, document)
    old = parent_run.config
    new = Run.from_document(parent, document, changes).config  # the changed values checked as any setting is
    if TRAINER not in files:
        raise ConfigError(f"{parent}: no checkpoint yet (checkpoints/trainer.pt); train it until one is written "
                          "(every `bootstrap.checkpoint_every` batches), then fork it")  # fmt: skip
    payload = decode_trainer_state(files[TRAINER], parent / TRAINER)
    check_checkpoint(parent, old, files, payload)  # the parent's own, under its config.toml: else no fork resumes
    loop = payload["loop"]
    if loop.get("finished") and loop.get("stop_reason", "") not in LIMIT_STOPS:
        raise ConfigError(f"{parent}: finished by its {loop.get('stop_reason') or 'stopping rule'}; a fork of it "
                          "would train no further")  # fmt: skip
    given = _problem_files(parent, files, problems, validation)
    check_problems(parent_run, given["train"][0],
                   given["validation"][0] if "validation" in given else None,
                   dict(payload.get("fingerprint") or {}))  # fmt: skip
    described = _describe_changes(old, new)
    budget = _apply_budgets(loop, old, new)
    capacity = new.bootstrap.solution_memory
    loop["remembered"] = list(loop.get("remembered", []))[-capacity:] if capacity else []
    payload["fingerprint"] = _forked_fingerprint(dict(payload.get("fingerprint") or {}), new)
    line = (f"sgps {sgps_version()}: forked from {parent.absolute()} at {int(loop['cumulative_expansions'])} "
            f"expansions (iteration {loop['iteration']}, batch {loop['next_batch']}): "
            f"{'; '.join(described) or 'no setting changed'}; next training budget {budget}")  # fmt: skip

    def fill(building: Path) -> None:
        for name, data in files.items():
            if name not in (CONFIG, TRAINER, *PROBLEM_FILES.values()):
                write_member(building, name, data)
        for name, (_, data) in given.items():
            write_member(building, PROBLEM_FILES[name], data)
        atomic_write_text(building / CONFIG, to_toml(new.as_dict()))
        run_dir = RunDirectory(building, _learning_columns(building))
        run_dir.truncate(payload["rows"])
        if "log_lines" in payload:
            run_dir.truncate_log(int(payload["log_lines"]))
        run_dir.log(line)
        if "log_lines" in payload:
            payload["log_lines"] = run_dir.log_lines()
        atomic_write_bytes(building / TRAINER, encode_trainer_state(payload))

    build_new_folder(out, fill, "fork")
    return Fork(out, parent, int(loop["cumulative_expansions"]), int(loop["iteration"]), int(loop["next_batch"]),
                tuple(described), budget, "validation" in given)  # fmt: skip


def _problem_files(
    parent: Path, files: Mapping[str, bytes], problems: Path | None, validation: Path | None
) -> dict[str, tuple[Path, bytes]]:
    """The fork's problem files (name -> (path read, bytes)): those given, else those the parent holds."""
    given: dict[str, tuple[Path, bytes]] = {}
    for name, path in (("train", problems), ("validation", validation)):
        member = PROBLEM_FILES[name]
        if path is not None:
            data = read_problem_file(path)
            if member in files and files[member] != data:
                raise ConfigError(f"{parent / member}: the run holds other {name} problems than {path}")
            given[name] = (path, data)
        elif member in files:
            given[name] = (parent / member, files[member])
    if "train" not in given:
        raise ConfigError(f"{parent}: give the level file it was trained on (--problems, and --validation if it had "
                          "one; a comparison's run was trained on COMPARISON/problems/train.txt): it travels with "
                          "the fork, checked against the run's checkpoint")  # fmt: skip
    return given


def _describe_changes(old: TrainConfig, new: TrainConfig) -> list[str]:
    """The "section.key old -> new" of every fork setting whose value changed."""
    before, after = old.as_dict(), new.as_dict()
    return [f"{section}.{key} {before[section][key]!r} -> {after[section][key]!r}" for section, key in FORK_SETTINGS
            if before[section][key] != after[section][key]]  # fmt: skip


def _apply_budgets(loop: dict[str, Any], old: TrainConfig, new: TrainConfig) -> int:
    """Set the loop's budgets to the fork's schedule (see the module's docstring); the training budget now."""
    if new.bootstrap.initial_budget != old.bootstrap.initial_budget:
        loop["train_budget"] = loop["validation_budget"] = new.bootstrap.initial_budget
    cap = new.bootstrap.max_budget
    if cap:
        loop["train_budget"] = min(int(loop["train_budget"]), cap)
        loop["validation_budget"] = min(int(loop["validation_budget"]), cap)
    return int(loop["train_budget"])


def _forked_fingerprint(saved: dict[str, str], new: TrainConfig) -> dict[str, str]:
    """The checkpoint's fingerprint (`runner.run_fingerprint`) with the fork's `FORK_ONLY_SETTINGS`, so
    that the fork resumes under them; the limits are not in it (a resume may change them)."""
    if not saved:
        return saved
    settings = new.as_dict()
    return {**saved, **{f"{section}.{key}": repr(settings[section][key]) for section, key in FORK_ONLY_SETTINGS}}


def _learning_columns(run: Path) -> tuple[str, ...]:
    """The method's columns in the run's metrics/learning.csv header (after iteration and batch)."""
    file = run / "metrics" / "learning.csv"
    try:
        with open_regular(file, newline="") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise CheckpointError(f"{file}: unreadable metrics ({error})") from None
    return tuple(header[2:])
