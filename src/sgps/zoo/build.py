"""Making a pretrained model from a trained run: its weights, its configuration and a card whose test
table comes from the run's own test records of exactly those weights.

The card's numbers are never typed in: `build_model` reads each named test set's record
(``RUN/metrics/test-*.csv``, written by ``sgps test RUN --problems FILE --checkpoint W``),
checks that it is a whole record of the test procedure (spec/algorithms.md 6.7: every
attempt, every solution replayed in its level, searched in exact best-first order) made
with the weights being shipped on that very level file, and sums it up.
``tools/make_model.py`` is the command around it.
"""

from __future__ import annotations

import datetime
import hashlib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.domains import read_levels
from sgps.errors import ConfigError
from sgps.experiments.tomlfile import dumps
from sgps.fileio import atomic_write_text
from sgps.models.checkpoint import stored_precision, weights_digest
from sgps.runs.run import Run
from sgps.runs.testing import fault_in_test_record, level_set_digest, record_path
from sgps.version import sgps_version
from sgps.zoo.cards import CARD, FILES, MODELS, is_model_name, read_card


@dataclass(frozen=True)
class CardLevels:
    """A level set a model's card reports: its name in the card, its file, and what it is in words."""

    name: str
    problems: Path
    levels: str
    budget: int
    rounds: int


def build_model(
    run: Path,
    name: str,
    *,
    weights: Path,
    tests: Sequence[CardLevels],
    summary: str,
    recipe: str,
    training_problems: str,
    version: int,
    preset: str,
    root: Path = MODELS,
) -> Path:
    """Write the model `name` into `root` from `run`'s `weights` and its test records of `tests`.

    The folder is written beside its place and renamed into it, so a refused or failed
    build leaves the models as they were; an older version of the same name is replaced.
    """
    if not is_model_name(name):
        raise ConfigError(f"{name!r}: a model name is lower-case words joined by hyphens")
    opened = Run.open(run)
    digest = weights_digest(weights)
    rows = {test.name: _test_row(opened, test, digest) for test in tests}
    levels = read_levels(tests[0].problems, opened.domain) if tests else None
    if levels is None:
        raise ConfigError("a model's card needs at least one test set")
    shape = levels.observation_shape()
    precision, rounded_from = stored_precision(weights)
    loop = opened.loop_state() or {}
    config = (run / "config.toml").read_text()
    document: dict[str, Any] = {
        "name": name,
        "version": version,
        "summary": summary,
        "domain": opened.domain.name,
        "variant": str(levels.metadata.get("variant", "")),
        "observation_shape": list(shape),
        "algorithm": opened.algorithm,
        "preset": preset,
        "precision": precision,
        "recipe": recipe,
        "sgps_version": sgps_version(),
        "made": datetime.date.today().isoformat(),
        "training": {
            "problems": training_problems,
            "expansions": int(loop.get("cumulative_expansions", 0)),
            "solved": len(loop.get("solved", ())),
            "weights": digest,
            **({"trained_weights": rounded_from} if rounded_from else {}),
        },
        "test": rows,
        "files": {
            "config.toml": hashlib.sha256(config.encode()).hexdigest(),
            "checkpoints/latest.safetensors": hashlib.sha256(weights.read_bytes()).hexdigest(),
        },
    }
    root.mkdir(parents=True, exist_ok=True)
    building = root / f".{name}.building"
    shutil.rmtree(building, ignore_errors=True)  # what a killed build left
    (building / "checkpoints").mkdir(parents=True)
    try:
        (building / "config.toml").write_text(config)
        shutil.copyfile(weights, building / FILES[1])
        atomic_write_text(building / CARD, dumps(document))
        read_card(building).check_files()
        final = root / name
        if final.exists():
            shutil.rmtree(final)
        building.rename(final)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return final


def _test_row(run: Run, test: CardLevels, digest: str) -> dict[str, Any]:
    """The card's table row of `test`, from `run`'s whole record of it made with the weights `digest`."""
    record = record_path(run.path, test.problems)
    if not record.is_file():
        raise ConfigError(f"{record}: no test record; run `sgps test {run.path} --problems {test.problems} "
                          f"--budget {test.budget} --rounds {test.rounds} --checkpoint WEIGHTS` first")  # fmt: skip
    rows = run.directory.read(record.stem)
    levels = read_levels(test.problems, run.domain)
    fault = fault_in_test_record(rows, len(levels), test.budget, test.rounds, domain=run.domain,
                                 starts=levels.states(), level_set=level_set_digest(test.problems))  # fmt: skip
    if fault is not None:
        raise ConfigError(f"{record}: {fault}")
    if any(row.get("weights") != digest for row in rows):
        raise ConfigError(f"{record}: made with other weights than those being shipped; test them again")
    if rows and rows[0].get("evaluation_batch") != "1":
        order = rows[0].get("evaluation_batch")
        why = "made before records named their search order" if order is None else f"searched with an evaluation " \
              f"batch of {order}"  # fmt: skip
        raise ConfigError(f"{record}: {why}, not the test procedure's exact order; test the weights again with "
                          "`sgps test` (exact order by default)")  # fmt: skip
    solved = [row for row in rows if row["solved"] == "1"]
    row: dict[str, Any] = {
        "levels": test.levels,
        "budget": test.budget,
        "rounds": test.rounds,
        "solved": len(solved),
        "total": len(levels),
        "within_first_budget": sum(row["round"] == "1" for row in solved),
    }
    if solved:
        row["mean_expansions"] = round(sum(int(r["expanded"]) for r in solved) / len(solved), 2)
        row["mean_length"] = round(sum(int(r["length"]) for r in solved) / len(solved), 2)
    return row
