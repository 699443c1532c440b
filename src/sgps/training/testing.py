"""The test procedure (spec/algorithms.md 6.7): budget doubling over rounds on unsolved problems."""

from __future__ import annotations

import csv
import functools
import hashlib
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sgps.domains.base import Domain
from sgps.domains.levels import level_files
from sgps.fileio import atomic_write_text
from sgps.search.children import ChildGenerator
from sgps.search.costs import Algorithm
from sgps.search.drivers import search_lockstep
from sgps.search.engine import SearchResult
from sgps.search.evaluators import Evaluator

#: The columns of a test record (metrics/test-NAME.csv): one row per attempt.
TEST_COLUMNS = ("round", "problem", "solved", "expanded", "generated", "length", "budget", "seconds", "steps")


def fault_in_test_record(rows: Sequence[Mapping[str, str]], problems: int, budget: int, rounds: int) -> str | None:
    """What makes `rows` not the record of a whole test of `problems` problems; None when nothing does.

    `run_test` writes the record in one piece at the end, so a whole record is exact:
    round 1 tries problems 0..N-1 in order with `budget`, and each later round r (at most
    `rounds`) tries, in order, the problems still unsolved, with budget * 2^(r-1), until
    none is left or the rounds are spent. A cut, duplicated, edited or foreign record
    breaks this and is named instead of being counted as a result.
    """
    try:
        attempts = [_attempt(row) for row in rows]
    except (KeyError, TypeError, ValueError):
        return "a row is not an attempt: round, problem, expanded, budget, steps and a solved length are integers"
    unsolved = list(range(problems))
    position = 0
    for round_number in range(1, rounds + 1):
        if not unsolved:
            break
        tried = attempts[position : position + len(unsolved)]
        expected = [(round_number, problem, budget * 2 ** (round_number - 1)) for problem in unsolved]
        if [(r, p, b) for r, p, _, b in tried] != expected:
            if len(tried) < len(unsolved):
                return f"it ends in round {round_number} after {len(tried)} of its {len(unsolved)} attempts"
            round_budget = budget * 2 ** (round_number - 1)
            return f"round {round_number} does not try the unsolved problems in order with budget {round_budget:,}"
        if any(solved not in ("0", "1") for _, _, solved, _ in tried):
            return f"round {round_number} has a solved value other than 0 or 1"
        unsolved = [problem for (_, problem, solved, _) in tried if solved == "0"]
        position += len(tried)
    if position != len(attempts):
        return f"it holds {len(attempts) - position} rows after the last round's attempts"
    return None


def _attempt(row: Mapping[str, str]) -> tuple[int, int, str, int]:
    """(round, problem, solved, budget) of a record row whose numbers parse (ValueError otherwise)."""
    int(row["expanded"])
    if row.get("steps"):
        int(row["steps"])
    if row["solved"] == "1":
        int(row["length"])
    return int(row["round"]), int(row["problem"]), row["solved"], int(row["budget"])


class TestProgress(Protocol):
    """Told, during a test round, how many of its searches have finished."""

    def __call__(self, round_number: int, budget: int, finished: int, *, total: int) -> None: ...


@dataclass(frozen=True)
class TestSummary:
    """The paper's table row, plus the effort spent on failed rounds."""

    problems: int
    solved: int
    mean_expansions: float | None  # over solved problems, the successful attempt only (as the paper)
    mean_length: float | None
    total_expansions: int  # every attempt of every round
    total_domain_steps: int = 0  # primitive transitions of every attempt (HIPS-ε's rollouts included)

    def table_row(self) -> str:
        expansions = "-" if self.mean_expansions is None else f"{self.mean_expansions:,.1f}"
        length = "-" if self.mean_length is None else f"{self.mean_length:.2f}"
        return (f"solved {self.solved}/{self.problems} | mean expansions {expansions} | mean length {length} | "
                f"low-level steps {self.total_domain_steps:,}")  # fmt: skip


def attempt_identity(
    checkpoint: Path, problems: Path, *, budget: int, rounds: int, epsilon: float, evaluation_batch: int = 1
) -> str:
    """What a test's attempts depend on: the checkpoint's and the level files' bytes, budget, rounds, ε
    and the evaluation batch (named only when it is not 1, so older journals keep their identity).

    A journal of attempts (`AttemptJournal`) is resumed only by a test of the same identity.
    """
    digest = hashlib.sha256()
    digest.update(_file_digest(checkpoint))
    digest.update(_level_set_digest(problems))
    digest.update(f"budget={budget};rounds={rounds};epsilon={epsilon!r}".encode())
    if evaluation_batch != 1:
        digest.update(f";evaluation_batch={evaluation_batch}".encode())
    return digest.hexdigest()


def _file_digest(path: Path) -> bytes:
    """The SHA-256 digest of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").digest()


def _level_set_digest(problems: Path) -> bytes:
    """A level file's digest, or for a folder (a level set too) one over its level files' names and digests."""
    files = level_files(problems)
    if files == [problems]:
        return _file_digest(problems)
    folder = hashlib.sha256()
    for file in files:
        folder.update(file.name.encode() + b"\0" + _file_digest(file))
    return folder.digest()


def journal_path(csv_path: Path) -> Path:
    """Where the unfinished test whose record goes to `csv_path` journals its attempts (NAME.csv.partial)."""
    return csv_path.with_name(csv_path.name + ".partial")


class AttemptJournal:
    """The attempts of a test in progress, one CSV row each as soon as its search finishes.

    `run_test` keeps it beside the record it will write (``metrics/test-NAME.csv.partial``),
    so that a long test shows its progress in the run folder, and a test interrupted
    (a session ending, a kill) goes on where it stopped: run again with the same
    identity (`attempt_identity`), its journalled attempts are kept and only the others are
    searched. The first line names the identity; a journal of another identity is
    discarded. A row cut by a kill is ignored. When the test ends, the whole record is
    written in exact order and the journal removed.
    """

    def __init__(self, path: Path, identity: str) -> None:
        self.path = path
        self.identity = identity

    def resume(self) -> dict[tuple[int, int], list[str]]:
        """The journalled attempts, (round, problem) -> row; starts a fresh journal if there are none to keep."""
        kept: dict[tuple[int, int], list[str]] = {}
        try:
            lines = self.path.read_text(encoding="utf-8").split("\n")
        except (FileNotFoundError, UnicodeDecodeError):
            lines = []
        if lines[:2] == [f"# {self.identity}", ",".join(TEST_COLUMNS)]:
            for row in csv.reader(lines[2:-1]):  # the last piece has no newline yet: possibly cut
                try:
                    round_number, problem, solved, _ = _attempt(dict(zip(TEST_COLUMNS, row, strict=True)))
                except (KeyError, TypeError, ValueError):
                    continue  # not a whole attempt's row
                if solved in ("0", "1"):
                    kept[(round_number, problem)] = row
        atomic_write_text(self.path, "".join(self._line(row) for row in [[f"# {self.identity}"], list(TEST_COLUMNS),
                                                                         *kept.values()]))  # fmt: skip
        return kept

    def append(self, row: Sequence[Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(self._line(row))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    @staticmethod
    def _line(row: Sequence[Any]) -> str:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow(row)
        return buffer.getvalue()


def _row(round_number: int, problem: int, budget: int, result: SearchResult) -> list[str]:
    """The test record's row (`TEST_COLUMNS`) of one attempt."""
    values = [round_number, problem, int(result.solved), result.expanded, result.generated,
              result.length if result.solved else "", budget, f"{result.seconds:.4f}", result.domain_steps]  # fmt: skip
    return [str(value) for value in values]


def run_test(
    domain: Domain[Any],
    levels: Sequence[Any],
    algorithm: Algorithm,
    evaluator: Evaluator,
    *,
    budget: int = 4000,
    rounds: int = 1,
    epsilon: float = 0.01,
    evaluation_batch: int = 1,
    csv_path: Path | None = None,
    identity: str | None = None,
    search_batch: Callable[[Sequence[Any], int], list[SearchResult]] | None = None,
    children: ChildGenerator[Any] | None = None,
    progress: TestProgress | None = None,
) -> TestSummary:
    """Round r searches every still-unsolved problem with budget `budget` * 2^(r-1), in lockstep.

    `evaluation_batch`: children each search gathers before an evaluation (1: exact order).

    The CSV has a row per attempt; its `steps` column counts the primitive transitions
    the search computed (`SearchResult.domain_steps`), the measure of effort that
    compares HIPS-ε, whose budget does not count its rollouts, with the other searches.
    With `identity` (`attempt_identity`) the attempts are journalled as they finish and an
    interrupted test of the same identity resumes (`AttemptJournal`).

    `search_batch(levels, budget)`: where a round's searches run (e.g. Ray actors holding
    the same model; journalled a round at a time); None searches in this process, in
    lockstep with `evaluator`, expanding through `children` when given (HIPS-ε's hybrid
    children), and tells `progress` (round, budget, searches finished, searches in the
    round) as searches finish.
    """
    journal = None
    if csv_path is not None and identity is not None:
        journal = AttemptJournal(journal_path(csv_path), identity)
    done = {} if journal is None else journal.resume()
    rows: list[list[str]] = []
    unsolved = list(range(len(levels)))
    for round_number in range(1, rounds + 1):
        if not unsolved:
            break
        round_budget = budget * 2 ** (round_number - 1)
        todo = [p for p in unsolved if (round_number, p) not in done]
        if todo:
            record = functools.partial(_record, done, journal, todo, round_number, round_budget)
            _search_round(domain, [levels[i] for i in todo], algorithm, evaluator, round_budget, epsilon, search_batch,
                          children, progress, round_number, record, already=len(unsolved) - len(todo),
                          total=len(unsolved), evaluation_batch=evaluation_batch)  # fmt: skip
        rows += [done[(round_number, p)] for p in unsolved]
        unsolved = [p for p in unsolved if done[(round_number, p)][2] == "0"]
    if csv_path is not None:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(TEST_COLUMNS)
        writer.writerows(rows)
        atomic_write_text(csv_path, buffer.getvalue())
    if journal is not None:
        journal.remove()
    return _summary(len(levels), rows)


def _record(
    done: dict[tuple[int, int], list[str]],
    journal: AttemptJournal | None,
    problems: Sequence[int],
    round_number: int,
    budget: int,
    index: int,
    result: SearchResult,
) -> None:
    """Keep (and journal) the attempt of `problems[index]` that just finished."""
    row = _row(round_number, problems[index], budget, result)
    done[(round_number, problems[index])] = row
    if journal is not None:
        journal.append(row)


def _search_round(
    domain: Domain[Any],
    batch: Sequence[Any],
    algorithm: Algorithm,
    evaluator: Evaluator,
    budget: int,
    epsilon: float,
    search_batch: Callable[[Sequence[Any], int], list[SearchResult]] | None,
    children: ChildGenerator[Any] | None,
    progress: TestProgress | None,
    round_number: int,
    on_result: Callable[[int, SearchResult], None],
    *,
    already: int,
    total: int,
    evaluation_batch: int = 1,
) -> None:
    """Search `batch` with `budget`, telling `on_result` each result (`already` of the round's `total` were done)."""
    if search_batch is not None:
        for index, result in enumerate(search_batch(batch, budget)):
            on_result(index, result)
        return
    on_finished = None
    if progress is not None:
        on_finished = functools.partial(_told, progress, round_number, budget, already, total)
        on_finished(0)
    search_lockstep(domain, batch, algorithm, evaluator, budget=budget, epsilon=epsilon, batch_size=evaluation_batch,
                    children=children, on_finished=on_finished, on_result=on_result)  # fmt: skip


def _told(progress: TestProgress, round_number: int, budget: int, already: int, total: int, finished: int) -> None:
    progress(round_number, budget, already + finished, total=total)


def _summary(problems: int, rows: Sequence[Sequence[str]]) -> TestSummary:
    """The paper's table row from a test's record rows (`TEST_COLUMNS`)."""
    solved = [(int(row[3]), int(row[5])) for row in rows if row[2] == "1"]  # (expansions, length) of each solve
    count = len(solved)
    return TestSummary(
        problems=problems,
        solved=count,
        mean_expansions=sum(e for e, _ in solved) / count if count else None,
        mean_length=sum(n for _, n in solved) / count if count else None,
        total_expansions=sum(int(row[3]) for row in rows),
        total_domain_steps=sum(int(row[8] or 0) for row in rows),
    )
