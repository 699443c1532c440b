"""The problem sets of a comparison, written once into its folder as level files.

Every run of a comparison reads the same files, so the sets are generated (or cut
out of the given files) once::

    DIR/problems/train.txt         the training set (and the held-out validation problems)
    DIR/problems/validation.txt    the validation set, when the config gives one
    DIR/problems/tests/NAME.txt    test set NAME (`sgps test` writes metrics/test-NAME.csv)

A file that is already there is kept: `DIR/compare.toml` guarantees it was made from
the same config. All sets are built and checked before the first file is written
(`pending_problems`, then `write_problems`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgps.domains import get_domain, read_levels, write_levels
from sgps.experiments.plan import ComparePlan, ProblemSource


@dataclass(frozen=True)
class ProblemFiles:
    """Where a comparison's problem sets are."""

    train: Path
    validation: Path | None
    tests: dict[str, Path]


def problem_files(plan: ComparePlan, out: Path) -> ProblemFiles:
    """The paths of the problem sets of `plan` in comparison folder `out`."""
    folder = out / "problems"
    return ProblemFiles(
        train=folder / "train.txt",
        validation=None if plan.validation is None else folder / "validation.txt",
        tests={test.name: folder / "tests" / f"{test.name}.txt" for test in plan.tests},
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
