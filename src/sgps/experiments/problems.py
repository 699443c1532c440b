"""The problem sets of a comparison, written once into its folder as level files.

Every run of a comparison reads the same files, so the sets are generated (or cut
out of the given files) once::

    DIR/problems/train.txt         the training set (and the held-out validation problems)
    DIR/problems/validation.txt    the validation set, when the config gives one
    DIR/problems/hips.txt          more levels for HIPS-ε's offline data, when the config gives them
    DIR/problems/tests/NAME.txt    test set NAME (`sgps test` writes metrics/test-NAME.csv)

A file that is already there is kept: `DIR/compare.toml` guarantees it was made from
the same config. All sets are built and checked before the first file is written
(`pending_problems`, then `write_problems`). ``DIR/problems/digests.json`` holds a SHA-256
digest of each set's levels as written, so that a set edited after its runs searched it
is named (`changed_problem_files`) instead of silently standing beside their results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.domains import get_domain, read_levels, write_levels
from sgps.domains.levels import states_digest
from sgps.errors import ConfigError, SgpsError
from sgps.experiments.plan import ComparePlan, ProblemSource
from sgps.fileio import atomic_write_text, parse_json


@dataclass(frozen=True)
class ProblemFiles:
    """Where a comparison's problem sets are."""

    train: Path
    validation: Path | None
    tests: dict[str, Path]
    hips: Path | None = None  # more levels for HIPS-ε's offline data

    def all(self) -> list[Path]:
        """Every set's path: training, validation and HIPS-ε's extra levels (if any), then the tests."""
        optional = [path for path in (self.validation, self.hips) if path is not None]
        return [self.train, *optional, *self.tests.values()]

    @property
    def digests(self) -> Path:
        return self.train.parent / "digests.json"


def problem_files(plan: ComparePlan, out: Path) -> ProblemFiles:
    """The paths of the problem sets of `plan` in comparison folder `out`."""
    folder = out / "problems"
    return ProblemFiles(
        train=folder / "train.txt",
        validation=None if plan.validation is None else folder / "validation.txt",
        tests={test.name: folder / "tests" / f"{test.name}.txt" for test in plan.tests},
        hips=None if plan.hips_extra is None else folder / "hips.txt",
    )


def pending_problems(
    plan: ComparePlan, files: ProblemFiles, origin: str
) -> list[tuple[Path, ProblemSource, list[Any]]]:
    """The sets that are not written yet, built (generated or read) and checked: (path, source, states).

    `origin` (the config file) prefixes the error of a set that cannot be cut from its file.
    """
    wanted: list[tuple[Path, ProblemSource, str]] = [(files.train, plan.train, f"{origin}: problems.train")]
    if files.validation is not None and plan.validation is not None:
        wanted.append((files.validation, plan.validation, f"{origin}: problems.validation"))
    if files.hips is not None and plan.hips_extra is not None:
        wanted.append((files.hips, plan.hips_extra, f"{origin}: problems.hips"))
    wanted += [(files.tests[test.name], test.source, f"{origin}: tests.{test.name}") for test in plan.tests]
    domain = get_domain(plan.domain)
    return [(path, source, source.load(domain, where)) for path, source, where in wanted if not path.exists()]


def write_problems(domain: str, pending: list[tuple[Path, ProblemSource, list[Any]]]) -> None:
    """Write the sets `pending_problems` built, each atomically."""
    for path, source, states in pending:
        generated = source.file is None
        write_levels(path, get_domain(domain), states, variant=source.variant,
                     seed=source.seed if generated else None, params=source.params)  # fmt: skip


def count_levels(path: Path) -> int:
    """The number of levels in a level file."""
    return len(read_levels(path))


def levels_digest(path: Path) -> str:
    """The `states_digest` of the levels of a level file."""
    levels = read_levels(path)
    return states_digest(levels.domain, levels.states())


def stored_digests(files: ProblemFiles) -> dict[str, str]:
    """The digests ``problems/digests.json`` records, by file name relative to the problems folder."""
    if not files.digests.exists():
        return {}
    try:
        stored = parse_json(files.digests.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:  # JSONDecodeError, DocumentLimitError
        raise ConfigError(f"{files.digests}: not a digest file ({error}); restore it or delete it") from None
    if not isinstance(stored, dict) or not all(isinstance(v, str) for v in stored.values()):
        raise ConfigError(f"{files.digests}: not a digest file (a JSON object of file name to SHA-256); "
                          "restore it or delete it")  # fmt: skip
    return stored


def digest_key(files: ProblemFiles, path: Path) -> str:
    return str(path.relative_to(files.train.parent))


def changed_problem_files(files: ProblemFiles) -> list[Path]:
    """The problem files whose levels differ from the digest recorded when they were written."""
    stored = stored_digests(files)
    recorded = [path for path in files.all() if digest_key(files, path) in stored and path.exists()]
    return [path for path in recorded if _digest_or_none(path) != stored[digest_key(files, path)]]


def _digest_or_none(path: Path) -> str | None:
    """`levels_digest`, or None for a file that no longer reads as levels (it changed too)."""
    try:
        return levels_digest(path)
    except SgpsError:
        return None


def record_problem_digests(files: ProblemFiles) -> None:
    """Record the digest of every problem file that has none yet (new sets, and comparisons
    started before digests were kept), atomically."""
    stored = stored_digests(files)
    missing = [path for path in files.all() if path.exists() and digest_key(files, path) not in stored]
    if missing:
        stored.update({digest_key(files, path): levels_digest(path) for path in missing})
        atomic_write_text(files.digests, json.dumps(stored, indent=1, sort_keys=True) + "\n")
