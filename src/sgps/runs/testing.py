"""The test procedure (spec/algorithms.md 6.7): budget doubling over rounds on unsolved problems.

A test is recorded in the run folder (``RUN/metrics/test-NAME.csv``, journalled while it
runs), which is why it lives with the run folder's code: `sgps test` (`sgps.runs.runner.test`)
opens the run, and `run_test` searches with whatever trained search it is handed.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sgps.domains.animation import checked_trajectory
from sgps.domains.base import Domain
from sgps.domains.levels import level_files
from sgps.fileio import atomic_write_text, file_sha256, open_regular, read_regular_text
from sgps.runs.memory import concurrent_searches
from sgps.search.children import ChildGenerator
from sgps.search.costs import Algorithm
from sgps.search.drivers import search_lockstep
from sgps.search.engine import SearchResult
from sgps.search.evaluators import Evaluator

#: The columns of a test record (metrics/test-NAME.csv): one row per attempt. `actions`: a solved
#: attempt's solution (primitive actions, space-separated), replayed before the row counts;
#: `weights`: what names the checkpoint tested (`sgps.models.checkpoint.weights_digest`), so that
#: a record made with other weights than the run's is not counted as its result; `levels`: what
#: names the level set tested (`level_set_digest`), so that a record of another set that shares
#: its file name is never taken for this one's, nor replaced by it; `evaluation_batch`: the children
#: each search gathered before an evaluation, 1 (exact best-first order) for the test procedure
#: (spec 6.7); older records lack the column and were searched with their run's
#: `search.evaluation_batch`.
TEST_COLUMNS = ("round", "problem", "solved", "expanded", "generated", "length", "budget", "seconds", "steps",
                "actions", "weights", "levels", "evaluation_batch")  # fmt: skip


def fault_in_test_record(
    rows: Sequence[Mapping[str, str | None]],
    problems: int,
    budget: int,
    rounds: int,
    *,
    domain: Domain[Any] | None = None,
    starts: Sequence[Any] | None = None,
    level_set: str | None = None,
) -> str | None:
    """What makes `rows` not the record of a whole test of `problems` problems; None when nothing does.

    `run_test` writes the record in one piece at the end, so a whole record is exact:
    round 1 tries problems 0..N-1 in order with `budget`, and each later round r (at most
    `rounds`) tries, in order, the problems still unsolved, with budget * 2^(r-1), until
    none is left or the rounds are spent; every row is an attempt (`attempt_fault`), its
    solution replayed from ``starts[problem]`` in `domain` when they are given, and every
    row names the same weights, the same evaluation batch and the same level set, `level_set`
    (`level_set_digest`) where it is given and the record names one. A cut, duplicated, edited or foreign record breaks
    this and is named (with the line of the row at fault) instead of being counted as a result.
    """
    named = rows[0].get("levels") if rows else None
    if level_set is not None and named and named != level_set:
        return f"its rows name another level set ({named}; this set is {level_set}) that shares the file name"
    batch = rows[0].get("evaluation_batch") if rows else None  # None: a record made before the column
    if batch is not None and not (_count(batch) or 0) >= 1:
        return f"line 2: its evaluation batch is not a count above 0 ({batch!r})"
    attempts = []
    for line, row in enumerate(rows, start=2):
        attempt = _attempt(row)
        if attempt is None:
            return f"line {line}: a row is not an attempt (round, problem and budget are counts)"
        attempts.append(attempt)
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
    for line, (row, (_, problem, _, row_budget)) in enumerate(zip(rows, attempts, strict=True), start=2):
        fault = attempt_fault(row, row_budget, domain, None if starts is None else starts[problem])
        if fault is None and row.get("weights") != rows[0].get("weights"):
            fault = "its weights differ from those of the first row (rows of tests of different checkpoints)"
        if fault is None and row.get("levels") != named:
            fault = "its level set differs from that of the first row (rows of tests of different level sets)"
        if fault is None and row.get("evaluation_batch") != rows[0].get("evaluation_batch"):
            fault = "its evaluation batch differs from that of the first row (rows of tests in different orders)"
        if fault is not None:
            return f"line {line}: a row is not an attempt ({fault})"
    return None


def _attempt(row: Mapping[str, str | None]) -> tuple[int, int, str, int] | None:
    """(round, problem, solved, budget) of a record row whose round, problem and budget are counts; else None."""
    numbers = [_count(row.get(column)) for column in ("round", "problem", "budget")]
    if None in numbers:
        return None
    round_number, problem, budget = numbers
    return round_number, problem, str(row.get("solved")), budget  # type: ignore[return-value]


def _count(value: str | None) -> int | None:
    """The non-negative integer `value` spells in decimal digits; None for anything else."""
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else None


def attempt_fault(
    row: Mapping[str, str | None], budget: int, domain: Domain[Any] | None = None, start: Any = None
) -> str | None:
    """What makes `row` not an attempt the test procedure could have made with `budget`; None when nothing does.

    Its numbers are in range: solved 0 or 1; expanded and generated non-negative integers,
    expanded at most the budget (a search ends at its budget); seconds and steps, where
    recorded, a finite non-negative number and a non-negative integer; a solved row's length a
    non-negative integer, an unsolved row's empty; no more nodes expanded than generated
    (`SearchResult.generated` counts the root and every evaluated node). A row of a record that names its
    solutions (the `actions` column) has a solved attempt's actions, as many as its length,
    valid in `domain` and leading from `start` to a goal (checked when both are given),
    and no actions for an unsolved one. Rows of older records (no `actions` column) are
    checked as far as their columns go.
    """
    solved = row.get("solved")
    if solved not in ("0", "1"):
        return f"solved is {solved!r}, not 0 or 1"
    for column in ("expanded", "generated", *(("steps",) if row.get("steps") else ())):
        if _count(row.get(column)) is None:
            return f"{column} is {row.get(column)!r}, not a non-negative integer"
    expanded = int(str(row["expanded"]))
    if expanded > budget:
        return f"expanded is {expanded:,}, more than its budget of {budget:,}"
    if expanded > int(str(row["generated"])):
        return f"expanded is {expanded:,}, more than the {row['generated']} nodes generated (each is generated first)"
    if row.get("seconds") is not None and not _is_duration(str(row["seconds"])):
        return f"seconds is {row['seconds']!r}, not a finite non-negative number of seconds"
    length = _count(row.get("length"))
    if solved == "1" and length is None:
        return f"length is {row.get('length')!r}; a solved attempt's length is a non-negative integer"
    if solved == "0" and row.get("length"):
        return f"length is {row.get('length')!r}; an unsolved attempt has none"
    actions = row.get("actions")
    if actions is None:  # a record written before records named their solutions
        return None
    if solved == "0":
        return None if actions == "" else "an unsolved attempt with actions"
    moves = [_count(action) for action in actions.split()]
    if None in moves or len(moves) != length:
        return f"actions {actions!r} are not {length} action numbers"
    if domain is not None and start is not None:
        return checked_trajectory(domain, start, moves)[1]  # type: ignore[arg-type]
    return None


def _is_duration(text: str) -> bool:
    """Whether `text` is a finite, non-negative number (of seconds)."""
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and value >= 0


class TestProgress(Protocol):
    """Told, during a test, how many of a stage's searches have finished; `stage` names it
    ("round 2 (budget 8,000)", or the rounds that one search a problem runs through)."""

    def __call__(self, stage: str, finished: int, *, total: int) -> None: ...


@dataclass(frozen=True)
class TestSummary:
    """The paper's table row, plus the effort spent on failed rounds (`total_expansions`: every search
    of every round, failed ones included, the cumulative figure spec 6.7 asks to log beside the
    paper's mean over the solving attempts)."""

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
                f"all rounds' expansions {self.total_expansions:,} | "
                f"low-level steps {self.total_domain_steps:,}")  # fmt: skip


def attempt_identity(
    checkpoint: Path, problems: Path, *, budget: int, rounds: int, epsilon: float, evaluation_batch: int = 1
) -> str:
    """What a test's attempts depend on: the checkpoint's and the level files' bytes, budget, rounds, ε
    and the evaluation batch (named only when it is not 1, so older journals keep their identity).

    A journal of attempts (`AttemptJournal`) is resumed only by a test of the same identity.
    """
    digest = hashlib.sha256()
    digest.update(file_sha256(checkpoint))
    digest.update(_level_set_digest(problems))
    digest.update(f"budget={budget};rounds={rounds};epsilon={epsilon!r}".encode())
    if evaluation_batch != 1:
        digest.update(f";evaluation_batch={evaluation_batch}".encode())
    return digest.hexdigest()


def _level_set_digest(problems: Path) -> bytes:
    """A level file's digest, or for a folder (a level set too) one over its level files' names and digests."""
    files = level_files(problems)
    if files == [problems]:
        return file_sha256(problems)
    folder = hashlib.sha256()
    for file in files:
        folder.update(file.name.encode() + b"\0" + file_sha256(file))
    return folder.digest()


def level_set_digest(problems: Path) -> str:
    """What names the level file or folder `problems` in a test record (the `levels` column): 16 hex
    digits of its digest (the file's bytes; a folder's level files' names and bytes)."""
    return _level_set_digest(problems).hex()[:16]


def foreign_record(csv_path: Path, level_set: str, domain: Domain[Any], starts: Sequence[Any]) -> str | None:
    """Why the record at `csv_path` is provably of another level set than `starts` (digest `level_set`);
    None when it is not, or when there is no readable record there.

    `sgps test` names a record after its level file's stem, so ``x/t.txt`` and ``y/t.txt`` share
    ``test-t.csv``; a test must not replace the other set's record. A record names its set
    (the `levels` column); one written before records did is another set's if a row's
    problem lies beyond `starts` or a row's solution does not replay in its problem here.
    An unreadable or damaged record is no result, and is replaced.
    """
    try:
        rows = list(csv.DictReader(io.StringIO(read_regular_text(csv_path))))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    for line, row in enumerate(rows, start=2):
        named = row.get("levels")
        if named:
            if named != level_set:
                return f"line {line} names the level set {named}, and this one is {level_set}"
            continue
        problem = _count(row.get("problem"))
        if problem is not None and problem >= len(starts):
            return f"line {line} tries problem {problem}, and this set has {len(starts)} levels"
        moves = [_count(action) for action in (row.get("actions") or "").split()]
        if row.get("solved") == "1" and moves and None not in moves and problem is not None:
            fault = checked_trajectory(domain, starts[problem], moves)[1]  # type: ignore[arg-type]
            if fault is not None:
                return f"line {line}: its solution does not solve problem {problem} of this set ({fault})"
    return None


def record_name(problems: Path) -> str:
    """The name of the record `sgps test` keeps of the level file or folder `problems` (RUN/metrics/NAME.csv):
    ``test-`` and the file's stem or the folder's name, ``.`` and ``..`` read as the folder they name."""
    return f"test-{Path(os.path.abspath(problems)).stem}"


def record_path(run: Path, problems: Path) -> Path:
    """Where `sgps test` writes the record of `problems` for the run in `run` (RUN/metrics/NAME.csv)."""
    return run / "metrics" / f"{record_name(problems)}.csv"


def journal_path(csv_path: Path) -> Path:
    """Where the unfinished test whose record goes to `csv_path` journals its attempts (NAME.csv.partial)."""
    return csv_path.with_name(csv_path.name + ".partial")


class AttemptJournal:
    """The attempts of a test in progress, one CSV row each as soon as its search finishes.

    `run_test` keeps it beside the record it will write (``metrics/test-NAME.csv.partial``),
    so that a long test shows its progress in the run folder, and a test interrupted
    (a session ending, a kill) goes on where it stopped: run again with the same
    identity (`attempt_identity`), its journalled attempts are kept and only the others are
    searched. The first line names the identity; a journal of another identity (or of
    another record format) is discarded. A row is kept only if it passes the test's check
    (`run_test`: an attempt of the procedure, its solution replayed, made with the same
    weights) and carries the checksum this identity gives its fields (`_checksum`); any
    other row (cut by a kill, damaged, edited: ``generated = 1`` beside ``expanded = 136``,
    an over-long field) is dropped and its attempt searched again, as if it had never been
    journalled, and so is every row of an attempt journalled twice. The checksum finds
    edits, not forgeries: someone who recomputes it with this code can make the journal say
    anything, as they could edit the finished record. When the test ends, the whole record
    is written in exact order and the journal removed.
    """

    #: The longest journal line read (a row of 12 short fields and a solution of up to
    #: about 40,000 actions); a longer one is damage, dropped unread.
    MAX_LINE = 1 << 17

    def __init__(self, path: Path, identity: str) -> None:
        self.path = path
        self.identity = identity

    def resume(self, keep: Callable[[Mapping[str, str]], bool]) -> dict[tuple[int, int], list[str]]:
        """The journalled attempts whose rows `keep` accepts, (round, problem) -> row; starts a fresh
        journal holding only those."""
        kept: dict[tuple[int, int], list[str]] = {}
        seen: set[tuple[int, int]] = set()
        try:
            lines = read_regular_text(self.path).split("\n")
        except (FileNotFoundError, UnicodeDecodeError):
            lines = []
        if lines[:2] == [f"# {self.identity}", ",".join((*TEST_COLUMNS, "checksum"))]:
            for line in lines[2:-1]:  # the last piece has no newline yet: possibly cut
                row = self._fields(line)
                if row is None:
                    continue
                fields = dict(zip(TEST_COLUMNS, row, strict=True))
                attempt = _attempt(fields)
                if attempt is None:
                    continue
                if attempt[:2] in seen:  # journalled twice: neither copy is trusted
                    kept.pop(attempt[:2], None)
                elif keep(fields):
                    kept[attempt[:2]] = row
                seen.add(attempt[:2])
        header = [[f"# {self.identity}"], [*TEST_COLUMNS, "checksum"]]
        atomic_write_text(self.path, "".join(self._line(row) for row in header)
                          + "".join(self._line([*row, self._checksum(row)]) for row in kept.values()))  # fmt: skip
        return kept

    def append(self, row: Sequence[Any]) -> None:
        with open_regular(self.path, "a") as handle:
            handle.write(self._line([*row, self._checksum(row)]))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def _fields(self, line: str) -> list[str] | None:
        """A journal line's record fields, if it is short enough, parses and carries its checksum; else None."""
        if len(line) > self.MAX_LINE:
            return None
        try:
            fields = next(csv.reader([line]), [])
        except csv.Error:
            return None
        if len(fields) != len(TEST_COLUMNS) + 1 or fields[-1] != self._checksum(fields[:-1]):
            return None
        return fields[:-1]

    def _checksum(self, row: Sequence[Any]) -> str:
        """16 hex digits of a digest over the test's identity and the row's fields."""
        digest = hashlib.sha256(self.identity.encode())
        for field in row:
            digest.update(b"\0" + str(field).encode())
        return digest.hexdigest()[:16]

    @staticmethod
    def _line(row: Sequence[Any]) -> str:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow(row)
        return buffer.getvalue()


def _row(
    round_number: int, problem: int, budget: int, tested: RecordTags, result: SearchResult
) -> list[str]:
    """The test record's row (`TEST_COLUMNS`) of one attempt."""
    actions = " ".join(str(action) for action in result.actions or ()) if result.solved else ""
    values = [round_number, problem, int(result.solved), result.expanded, result.generated,
              result.length if result.solved else "", budget, f"{result.seconds:.4f}", result.domain_steps, actions,
              tested.weights, tested.level_set, tested.evaluation_batch]  # fmt: skip
    return [str(value) for value in values]


#: The record columns that say what a test searched with, the same in every row.
RECORD_TAG_COLUMNS = ("weights", "levels", "evaluation_batch")


@dataclass(frozen=True)
class RecordTags:
    """What every row of a test's record names: the weights (`weights_digest`, "" when unnamed), the
    level set (`level_set_digest`, "" when unnamed) and the evaluation batch searched with."""

    weights: str
    level_set: str
    evaluation_batch: int

    def fields(self) -> list[str]:
        """The values of `RECORD_TAG_COLUMNS`, as a record row holds them."""
        return [self.weights, self.level_set, str(self.evaluation_batch)]


def _journalled_attempt_holds(
    domain: Domain[Any],
    levels: Sequence[Any],
    budget: int,
    rounds: int,
    tested: RecordTags,
    row: Mapping[str, str],
) -> bool:
    """Whether a journalled row is an attempt this test would have made: a round and problem of the
    test, the round's budget, numbers in range and a solution that replays (`attempt_fault`), the
    same weights, level set and evaluation batch."""
    attempt = _attempt(row)
    if attempt is None or [row.get(column) for column in RECORD_TAG_COLUMNS] != tested.fields():
        return False
    round_number, problem, _, row_budget = attempt
    if not (1 <= round_number <= rounds and problem < len(levels)) or row_budget != budget * 2 ** (round_number - 1):
        return False
    return attempt_fault(row, row_budget, domain, levels[problem]) is None


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
    weights: str = "",
    level_set: str = "",
    search_batch: SearchBatch | None = None,
    search_stream: SearchStream | None = None,
    children: ChildGenerator[Any] | None = None,
    progress: TestProgress | None = None,
    at_once: Callable[[int], int] = concurrent_searches,
    restart_rounds: bool = False,
    refill: bool = True,
) -> TestSummary:
    """Round r searches every still-unsolved problem with budget `budget` * 2^(r-1), in lockstep,
    `at_once(budget)` of them at a time (default: as many as their trees fit in half this
    machine's memory, `sgps.runs.memory.concurrent_searches`; each search's order is its own,
    so how they are grouped changes no attempt).

    A search with a budget pops exactly the first nodes of the same search with a larger one
    (the budget only cuts, `sgps.search.engine`), so by default each problem is searched once,
    with the last round's budget, recording on its way what every earlier round's search
    would have returned (`SearchResult.within`): the record is the procedure's, attempt for
    attempt, and a problem no round solves costs the last round's budget instead of nearly
    twice it. `restart_rounds` searches each round afresh, as the procedure is written (the
    paper's); its rounds end sooner, which shows the early rounds' results first.

    `evaluation_batch`: children each search gathers before an evaluation: 1, exact best-first
    order, is the test procedure's (spec 6.7: b_inf = 1 at test); every row of the record names it.

    The CSV has a row per attempt; its `steps` column counts the primitive transitions
    the search computed (`SearchResult.domain_steps`), the measure of effort that
    compares HIPS-ε, whose budget does not count its rollouts, with the other searches.
    Its `actions` column holds each solution, so that a reader can replay it, and its
    `weights` column names the checkpoint tested (`weights`: its
    `sgps.models.checkpoint.weights_digest`; "" when the weights have no name), so that a
    record made with other weights than a run's is not counted as the run's result, and
    its `levels` column the level set (`level_set`: its `level_set_digest`; "" when unnamed).
    With `identity` (`attempt_identity`) the attempts are journalled as they finish and an
    interrupted test of the same identity resumes (`AttemptJournal`): a journalled row is kept
    only if it is an attempt this test would have made, its solution replayed from its
    level; any other is searched again.

    `search_batch(levels, budget, interim_budgets)`: where the searches run (search processes
    or Ray actors, with `refill=False`; journalled a group at a time, each group of `at_once`
    levels waiting for its longest search); `search_stream`: search processes or Ray actors that keep
    `at_once` searches running and send each result as it finishes (`SearchStream`; taken over
    `search_batch`);
    neither: in this process, in lockstep with `evaluator`, `at_once` at a time, the next level's
    search starting as one finishes, expanding through `children` when given (HIPS-ε's hybrid
    children). Results are journalled as they come, and `progress` (the stage, its searches
    finished and in all) is told as they finish, except with `search_batch`. `refill=False`
    searches in groups of `at_once` levels, each group waiting for its longest search, wherever
    they run (as tests did before the searches were refilled; `benchmarks/test_workers.py`).
    """
    journal = None
    if csv_path is not None and identity is not None:
        journal = AttemptJournal(journal_path(csv_path), identity)
    tested = RecordTags(weights, level_set, evaluation_batch)
    keep = functools.partial(_journalled_attempt_holds, domain, levels, budget, rounds, tested)
    done = {} if journal is None else journal.resume(keep)
    search = functools.partial(_search_group, domain, algorithm, evaluator, epsilon, evaluation_batch, search_batch,
                               search_stream, children, progress)  # fmt: skip
    record = functools.partial(_record_rounds, done, journal, tested)
    refill = refill and (search_stream is not None or search_batch is None)
    search_rounds = functools.partial(_search_in_groups, search, levels, at_once, record, refill=refill)
    budgets = [budget * 2**r for r in range(rounds)]
    if not restart_rounds:
        todo = [p for p in range(len(levels)) if not _concluded(done, p, rounds)]
        stage = _stage(1, budgets) if rounds == 1 else _stage(rounds, budgets, continued=True)
        search_rounds(todo, budgets, 1, stage, already=0, total=len(todo))
    rows: list[list[str]] = []
    unsolved = list(range(len(levels)))
    for round_number in range(1, rounds + 1):
        if not unsolved:
            break
        todo = [p for p in unsolved if (round_number, p) not in done]  # none left when the rounds were continued
        search_rounds(todo, budgets[round_number - 1 : round_number], round_number, _stage(round_number, budgets),
                      already=len(unsolved) - len(todo), total=len(unsolved))  # fmt: skip
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


class SearchBatch(Protocol):
    """Searches `levels` elsewhere (worker processes, Ray actors) with `budget`, each search also
    recording the results of `interim_budgets` (`SearchResult.within`); results in input order."""

    def __call__(self, levels: Sequence[Any], budget: int, interim_budgets: tuple[int, ...]) -> list[SearchResult]: ...


class SearchStream(Protocol):
    """Searches `levels` elsewhere with `budget` (each search also recording the results of
    `interim_budgets`), `concurrency` searches at a time over all its search processes, the next
    level's search starting as one finishes; tells `on_result(index, result)` each result as it
    arrives."""

    def __call__(
        self, levels: Sequence[Any], budget: int, interim_budgets: tuple[int, ...], concurrency: int,
        on_result: Callable[[int, SearchResult], None],
    ) -> None: ...  # fmt: skip


def _concluded(done: Mapping[tuple[int, int], Sequence[str]], problem: int, rounds: int) -> bool:
    """Whether the journalled attempts hold every round `problem` takes: up to its solve, or all `rounds`."""
    for round_number in range(1, rounds + 1):
        row = done.get((round_number, problem))
        if row is None:
            return False
        if row[2] == "1":
            return True
    return True


def _stage(round_number: int, budgets: Sequence[int], *, continued: bool = False) -> str:
    """What the progress display calls a round, or the rounds one continued search a problem runs through."""
    if continued:
        return f"rounds 1-{round_number} (budget {budgets[0]:,} to {budgets[-1]:,}, one search a problem)"
    return f"round {round_number} (budget {budgets[round_number - 1]:,})"


def _search_in_groups(
    search: Callable[..., None],
    levels: Sequence[Any],
    at_once: Callable[[int], int],
    record: Callable[..., None],
    problems: Sequence[int],
    budgets: Sequence[int],
    first_round: int,
    stage: str,
    *,
    already: int,
    total: int,
    refill: bool,
) -> None:
    """Search `problems` for rounds `first_round`, ... with `budgets` (one search each, with the last
    budget, the earlier ones interim), `at_once(budgets[-1])` at a time, `record`ing each result:
    with `refill`, the next problem's search starts as soon as one finishes; without, in groups
    of that many, each group waiting for its longest search."""
    size = at_once(budgets[-1])
    step = max(1, len(problems)) if refill else size
    for start in range(0, len(problems), step):
        group = problems[start : start + step]
        search([levels[i] for i in group], budgets[-1], tuple(budgets[:-1]),
               functools.partial(record, group, budgets, first_round=first_round), stage,
               already=already + start, total=total, concurrency=size)  # fmt: skip


def _record_rounds(
    done: dict[tuple[int, int], list[str]],
    journal: AttemptJournal | None,
    tested: RecordTags,
    problems: Sequence[int],
    budgets: Sequence[int],
    index: int,
    result: SearchResult,
    *,
    first_round: int = 1,
) -> None:
    """Keep (and journal) the attempts of `problems[index]`, whose search just finished: one per
    budget of `budgets` (rounds `first_round`, ...; the search's own budget is the last) up to
    the first that solves it, each the result of a search with that budget (`SearchResult.within`).
    An attempt the journal already held is kept as it was."""
    problem = problems[index]
    for round_number, budget in enumerate(budgets, start=first_round):
        key = (round_number, problem)
        if key not in done:
            done[key] = _row(round_number, problem, budget, tested, result.within(budget))
            if journal is not None:
                journal.append(done[key])
        if done[key][2] == "1":
            return


def _search_group(
    domain: Domain[Any],
    algorithm: Algorithm,
    evaluator: Evaluator,
    epsilon: float,
    evaluation_batch: int,
    search_batch: SearchBatch | None,
    search_stream: SearchStream | None,
    children: ChildGenerator[Any] | None,
    progress: TestProgress | None,
    batch: Sequence[Any],
    budget: int,
    interim_budgets: tuple[int, ...],
    on_result: Callable[[int, SearchResult], None],
    stage: str,
    *,
    already: int,
    total: int,
    concurrency: int,
) -> None:
    """Search `batch` with `budget` (and `interim_budgets`), at most `concurrency` at a time,
    telling `on_result` each result (`already` of the stage's `total` searches were done)."""
    if search_stream is None and search_batch is not None:
        for index, result in enumerate(search_batch(batch, budget, interim_budgets)):
            on_result(index, result)
        return
    on_finished = None
    if progress is not None:
        on_finished = functools.partial(_told, progress, stage, already, total)
        on_finished(0)
    if search_stream is not None:
        search_stream(batch, budget, interim_budgets, concurrency, _counting(on_result, on_finished))
        return
    search_lockstep(domain, batch, algorithm, evaluator, budget=budget, epsilon=epsilon, batch_size=evaluation_batch,
                    children=children, on_finished=on_finished, on_result=on_result,
                    interim_budgets=interim_budgets, concurrency=concurrency)  # fmt: skip


def _counting(
    on_result: Callable[[int, SearchResult], None], on_finished: Callable[[int], None] | None
) -> Callable[[int, SearchResult], None]:
    """`on_result`, also telling `on_finished` how many results it has had."""
    count = 0

    def told(index: int, result: SearchResult) -> None:
        nonlocal count
        on_result(index, result)
        count += 1
        if on_finished is not None:
            on_finished(count)

    return told


def _told(progress: TestProgress, stage: str, already: int, total: int, finished: int) -> None:
    progress(stage, already + finished, total=total)


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
