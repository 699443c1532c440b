"""HIPS-ε's offline data (spec/algorithms.md 8.1): solution trajectories from the exact solver.

HIPS-ε cannot learn from its own searches; it learns from solved training problems.
`build_dataset` solves each level with the exact solver (BFS or A*, `sgps.domains.solver`)
and keeps its initial state and optimal action sequence; levels the solver cannot
finish within its state cap are reported and skipped.

A dataset file is one `.npz` archive (no pickled objects) holding the domain's name, each
trajectory's initial state in the domain's integer level encoding and its actions, the
integers of all trajectories concatenated with offsets. States along a trajectory are
not stored: `read_dataset` replays the actions in the domain, and refuses a file whose
trajectory does not end at a goal, so every trajectory it returns is a true solution.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import multiprocessing
import os
import signal
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import numpy as np

from sgps.domains.animation import checked_trajectory, trajectory
from sgps.domains.base import Domain
from sgps.domains.levels import Level, states_digest
from sgps.domains.registry import get_domain
from sgps.domains.solver import default_state_cap, solve
from sgps.errors import ConfigError, SgpsError
from sgps.fileio import atomic_write_bytes, open_regular
from sgps.processes import end_with_parent

FORMAT = "sgps-hips-dataset-1"
#: The arrays of a dataset file: how many dimensions each has and the numpy kinds of its values
#: (U: text, i and u: integers), checked before any is used.
_LAYOUT: dict[str, tuple[int, str]] = {
    "format": (0, "U"), "domain": (0, "U"), "names": (1, "U"), "levels": (1, "iu"), "level_offsets": (1, "iu"),
    "actions": (1, "iu"), "action_offsets": (1, "iu"),
}  # fmt: skip
#: Each list of offsets and the array it cuts into trajectories.
_OFFSETS = {"level_offsets": "levels", "action_offsets": "actions"}
#: The date of every member of a dataset archive (the earliest a zip file can hold).
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Trajectory:
    """One solved problem: its name, states s_0 .. s_T and actions a_0 .. a_{T-1}."""

    name: str
    states: tuple[Any, ...]
    actions: tuple[int, ...]


@dataclass(frozen=True)
class Dataset:
    """The trajectories of one domain."""

    domain: Domain[Any]
    trajectories: tuple[Trajectory, ...]

    @property
    def transitions(self) -> int:
        return sum(len(t.actions) for t in self.trajectories)


@dataclass(frozen=True)
class BuildReport:
    """What `build_dataset` did: the trajectories kept, the levels skipped, with why, and the journal lines
    it did not trust (``FILE:LINE: why``; the levels they recorded were solved again)."""

    dataset: Dataset
    skipped: tuple[tuple[str, str], ...]  # (level name, reason)
    dropped: tuple[str, ...] = ()


def dataset_journal(dataset: Path) -> Path:
    """Where the build of the dataset file `dataset` keeps its journal: beside it, named after it."""
    return dataset.with_name(dataset.name + ".journal")


#: The journal of an unfinished `build_dataset`: a header line (`_journal_header`), then one line per
#: finished level, sealed with a checksum (`_checksum`). Format 1 had no checksums: its journals are
#: refused with a message to delete them (`_check_header`), as their entries cannot be told from edits.
JOURNAL_FORMAT = "sgps-hips-dataset-journal-2"
#: How every journal format's name starts: a header with another one is another sgps version's journal.
_JOURNAL_FAMILY = "sgps-hips-dataset-journal-"
#: How many dropped journal lines `BuildReport.dropped` names one by one (the rest are counted).
_DROPPED_NAMED = 20
#: The bytes read at a time while skipping a line longer than `_line_bound`.
_SKIP_CHUNK = 1 << 16


def build_dataset(
    domain: Domain[Any],
    levels: Sequence[Level],
    *,
    max_states: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
    journal: Path | None = None,
) -> BuildReport:
    """Solve every level exactly; keep the solved ones as trajectories (`max_states`: the solver's cap).

    `workers` > 1 solves levels in that many processes. `journal`: a file that records each
    finished level as it finishes (one JSON line), so that a build interrupted at any point
    goes on where it stopped when called again with the same levels and cap; the result
    does not depend on the interruption, the workers or the order levels finished in. Its
    entries are checked before they count (`_read_journal`): one the builder could not have
    written (`_entry_fault`: solutions replayed, skips only for the builder's reasons) or a
    copied line is refused, naming its line; a line that is no entry (not JSON, too
    long, too deeply nested) or whose checksum does not match (an edit the replay cannot
    see: a made-up "no solution exists", a longer solution) is dropped and its level solved
    again, so the dataset is the one an undamaged build makes (`BuildReport.dropped`).
    """
    header: dict[str, Any] = {}
    finished: dict[int, dict[str, Any]] = {}
    dropped: tuple[str, ...] = ()
    if journal is not None:
        header = _journal_header(domain, levels, max_states)
        finished, dropped = _read_journal(journal, header, domain, levels, max_states)
    todo = [index for index in range(len(levels)) if index not in finished]
    if progress is not None:
        progress(len(finished), len(levels))
    with contextlib.ExitStack() as stack:
        record = None
        if journal is not None:
            record = stack.enter_context(open_regular(journal, "a"))
            if not finished and journal.stat().st_size == 0:
                _append(record, header)
        for index, outcome in _solve_all(domain, levels, todo, max_states, workers):
            finished[index] = outcome
            if record is not None:
                _append(record, {"index": index, **outcome}, seal=header)
            if progress is not None:
                progress(len(finished), len(levels))
    trajectories: list[Trajectory] = []
    skipped: list[tuple[str, str]] = []
    for index, level in enumerate(levels):
        outcome = finished[index]
        if "actions" in outcome:
            actions = tuple(outcome["actions"])
            trajectories.append(Trajectory(level.name, tuple(trajectory(domain, level.state, actions)), actions))
        else:
            skipped.append((level.name, outcome["skipped"]))
    return BuildReport(Dataset(domain, tuple(trajectories)), tuple(skipped), tuple(dropped))


#: How many times a build starts its solver processes anew after one of them stopped unexpectedly.
POOL_RESTARTS = 2


def _solve_all(
    domain: Domain[Any], levels: Sequence[Level], todo: Sequence[int], max_states: int | None, workers: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, outcome) of each level in `todo` as it is solved, in this process or in `workers` processes.

    A solver process that stops unexpectedly (killed by the user or another program, or by
    the kernel for memory) breaks the pool: the levels not yet solved go to a fresh pool, up to
    `POOL_RESTARTS` times, so that a build does not depend on what happens to other processes;
    then one `SgpsError` says what happened (the journal keeps what was finished).
    """
    if workers <= 1 or len(todo) <= 1:
        for index in todo:
            yield index, solve_level(domain, levels[index].state, max_states)
        return
    remaining = list(todo)
    for _ in range(POOL_RESTARTS + 1):
        finished: set[int] = set()
        try:
            for index, outcome in _solve_in_pool(domain, levels, remaining, max_states, workers):
                finished.add(index)
                yield index, outcome
            return
        except BrokenProcessPool:
            remaining = [index for index in remaining if index not in finished]
    raise SgpsError(f"a solver process stopped unexpectedly (killed, or out of memory) {POOL_RESTARTS + 1} times, "
                    f"with {len(remaining)} levels left to solve; run the same command again to go on (the "
                    "journal keeps the levels finished), or give fewer --workers")  # fmt: skip


def _solve_in_pool(
    domain: Domain[Any], levels: Sequence[Level], todo: Sequence[int], max_states: int | None, workers: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, outcome) of each level in `todo` as one of `workers` solver processes finishes it.

    Ctrl-C is this process's to handle, as in the training pools (`guard_solver_process`): a
    terminal sends it to every process of the group, and a solver process hit while its
    interpreter starts would die printing a fatal error of its own. The solver processes
    are started with Ctrl-C held back, and ignore it once started; this process stops them
    when it stops (`_stop_solvers`), without waiting for their solves.
    """
    pool = ProcessPoolExecutor(min(workers, len(todo)), mp_context=multiprocessing.get_context("spawn"),
                               initializer=guard_solver_process)  # fmt: skip
    try:
        with _interrupts_held():  # the processes start here, and inherit the held signal
            futures = {pool.submit(solve_level, domain, levels[index].state, max_states): index for index in todo}
        for future in as_completed(futures):
            yield futures[future], future.result()
    except BaseException:
        _stop_solvers(pool)
        raise
    finally:
        pool.shutdown(cancel_futures=True)


def guard_solver_process() -> None:
    """Set up a solver process: ignore Ctrl-C (which discards one held back while it started), then let
    signals through again; end with the command that started it (`sgps.processes`), which a
    SIGKILL leaves no time to stop it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    end_with_parent()


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C back while solver processes start, in them and in this process.

    The processes started meanwhile inherit this thread's mask, in which it is blocked.
    This process may have other threads (a progress bar's), to which the system would
    deliver it, so its handler is replaced meanwhile by one that notes it; once the block
    ends, a noted Ctrl-C is raised again under the handler that was there (in the main
    thread, the only one that may set handlers; a handler set outside Python is left alone).
    """
    resource_tracker.ensure_running()  # starting it later would unblock the signal (it blocks and unblocks it)
    swap = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not None
    noted: list[int] = []
    handler = signal.signal(signal.SIGINT, lambda number, _frame: noted.append(number)) if swap else None
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        if swap:
            signal.signal(signal.SIGINT, handler)
            if noted:
                signal.raise_signal(signal.SIGINT)


def _stop_solvers(pool: ProcessPoolExecutor) -> None:
    """End the pool's solver processes now: a stopped build does not wait for solves that may take
    minutes (the journal keeps what was finished). `ProcessPoolExecutor` has no public way to do it
    before Python 3.14's `terminate_workers`."""
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def solve_level(domain: Domain[Any], state: Any, max_states: int | None) -> dict[str, Any]:
    """``{"actions": [...]}`` of an optimal solution, or ``{"skipped": why}``."""
    cap = default_state_cap(domain, state) if max_states is None else max_states
    result = solve(domain, state, max_states=cap)
    if result.actions is None:
        return {"skipped": _cap_reached(cap) if result.status == "cap" else NO_SOLUTION}
    return {"actions": [int(action) for action in result.actions]}


#: Why `solve_level` skips a level the solver finished without a solution.
NO_SOLUTION = "no solution exists"


def _cap_reached(cap: int) -> str:
    """Why `solve_level` skips a level the solver gave up on at its state cap `cap`."""
    return f"state cap of {cap:,} reached"


def _journal_header(domain: Domain[Any], levels: Sequence[Level], max_states: int | None) -> dict[str, Any]:
    """What a journal must have been started with to be continued: the domain, the levels and the cap."""
    digest = states_digest(domain, [level.state for level in levels])
    return {"format": JOURNAL_FORMAT, "domain": domain.name, "levels": digest, "count": len(levels),
            "max_states": max_states}  # fmt: skip


def _read_journal(
    journal: Path, header: Mapping[str, Any], domain: Domain[Any], levels: Sequence[Level], max_states: int | None
) -> tuple[dict[int, dict[str, Any]], tuple[str, ...]]:
    """The levels a journal records as finished, and the lines it dropped (``FILE:LINE: why``).

    The journal must start with this build's `header` (else it is refused: another build's,
    or another sgps version's, `_check_header`). A last line without its newline was cut by
    an interruption: it is removed, so the next line starts clean. Each other line, read
    one at a time and never more than `_line_bound` bytes of it, then goes through:

    - dropped, its level (whichever it was) solved again: a line that is no entry (longer
      than any entry of this build, not UTF-8, not JSON, nested deeper than an entry, a key
      twice), or an entry whose checksum does not match (`_checksum`: edited, or copied
      from another build). Such a line cannot be the builder's, and redoing its level gives
      what the undamaged line held.
    - refused (a `ConfigError` naming the line; the user deletes the journal): an entry the
      builder could never have written (`_entry_fault`), checked before its checksum, or a
      second entry of a level whose checksum matches too (a copied line; a second entry
      with another value does not match, and is dropped). Both were refused before
      checksums existed, and tests pin the refusal: it names what is wrong.

    The checksum tells edits from the builder's entries, not forgeries: anyone who runs
    this code can recompute a checksum for a made-up entry (`_checksum` has no secret),
    so a deliberately forged journal is out of scope; the replay (`_entry_fault`) still
    keeps it from making a dataset `read_dataset` would refuse.
    """
    if not journal.exists() or journal.stat().st_size == 0:
        return {}, ()
    bound = _line_bound(header, domain, levels, max_states)
    finished: dict[int, dict[str, Any]] = {}
    lines_of: dict[int, int] = {}
    dropped: list[str] = []
    cut: int | None = None
    with open_regular(journal, "rb") as handle:
        for number, (start, content, complete) in enumerate(_journal_lines(handle, bound), start=1):
            if not complete:
                cut = start
                break
            if number == 1:
                _check_header(journal, content, header, bound)
                continue
            entry, why = _entry_of(content, bound)
            if why is None:
                problem = _entry_fault(entry, domain, levels, max_states)
                if problem is not None:
                    raise ConfigError(f"{journal}:{number}: {problem}; delete the journal to start over")
                index = entry["index"]
                if entry.get("checksum") != _checksum(header, entry):
                    why = (f"level {index} ({levels[index].name}): its checksum does not match its content "
                           "(an edited entry, or another build's)")  # fmt: skip
                elif index in lines_of:
                    raise ConfigError(f"{journal}:{number}: level {index} is recorded twice (first on line "
                                      f"{lines_of[index]}); delete the journal to start over")  # fmt: skip
            if why is not None:
                dropped.append(f"{journal}:{number}: {why}; dropped, its level is solved again")
                continue
            lines_of[index] = number
            finished[index] = {key: value for key, value in entry.items() if key not in ("index", "checksum")}
    if cut is not None:
        with open_regular(journal, "r+b") as handle:
            handle.truncate(cut)
    if len(dropped) > _DROPPED_NAMED:
        dropped[_DROPPED_NAMED:] = [f"{journal}: {len(dropped) - _DROPPED_NAMED} more lines dropped"]
    return finished, tuple(dropped)


def _journal_lines(handle: BinaryIO, bound: int) -> Iterator[tuple[int, bytes | None, bool]]:
    """(offset, content, complete) of each line of a journal opened in binary mode.

    `content`: the line without its newline, or None for one longer than `bound` bytes,
    which is skipped `_SKIP_CHUNK` bytes at a time and never held whole. `complete` is
    False for a last line without a newline (one an interruption cut), the last one yielded.
    """
    while True:
        start = handle.tell()
        line = handle.readline(bound + 1)
        if not line:
            return
        if line.endswith(b"\n"):
            yield start, line[:-1], True
        elif len(line) <= bound:
            yield start, line, False
            return
        else:
            while line and not line.endswith(b"\n"):
                line = handle.readline(_SKIP_CHUNK)
            yield start, None, bool(line)
            if not line:
                return


def _line_bound(header: Mapping[str, Any], domain: Domain[Any], levels: Sequence[Level], max_states: int | None) -> int:
    """The most bytes a line of this build's journal can hold, its newline not counted; a longer one is not read.

    The longest entry holds the longest solution the solver's cap allows: an optimal
    solution never visits a state twice, and the solver stores each state it reaches and
    stops once it holds `cap` of them (one expansion may overshoot by a state per action),
    so a solution has fewer than `cap` + `num_actions` actions. Each is counted as wide as
    the domain's widest action with ", " after it (json.dumps's default spacing, so a
    journal a JSON tool rewrote still reads), plus 64 bytes for spacing around the keys.
    With the default cap (at most `MAX_STATES`, 2M states) a TSP line may hold about 6 MB,
    where a real one holds about 100 bytes; nothing longer can be an entry.
    """
    caps = [default_state_cap(domain, level.state) for level in levels] if max_states is None else [max_states]
    cap = max(caps, default=1)
    seal, last = "0" * 64, max(len(levels) - 1, 0)
    solved = len(_line({"index": last, "actions": [], "checksum": seal}))
    solved += (cap + domain.num_actions) * (len(str(domain.num_actions - 1)) + 2)
    skipped = max(len(_line({"index": last, "skipped": reason, "checksum": seal}))
                  for reason in (NO_SOLUTION, _cap_reached(cap)))  # fmt: skip
    return max(solved, skipped, len(_line(dict(header)))) + 64


def _check_header(journal: Path, content: bytes | None, header: Mapping[str, Any], bound: int) -> None:
    """Refuse a journal whose first line is not `header`: damaged, another version's, or another build's.

    A journal of format 1 (before checksums) is refused, not continued: its entries carry no
    checksum, so an edit that replays (a made-up "no solution exists") cannot be told from
    the builder's entries. The message says to delete it; its levels are then solved again.
    """
    if content is None:
        raise ConfigError(f"{journal}:1: a damaged dataset journal (a line over {bound:,} bytes); delete it to start "
                          "over")  # fmt: skip
    try:
        text = content.decode()
    except UnicodeDecodeError as error:
        raise ConfigError(f"{journal}: not a dataset journal (byte {error.start} is not UTF-8)") from None
    try:
        found = _parse_line(text)
    except ValueError as error:
        raise ConfigError(f"{journal}:1: a damaged dataset journal ({error}); delete it to start over") from None
    if found == header:
        return
    written = found.get("format") if isinstance(found, dict) else None
    if isinstance(written, str) and written.startswith(_JOURNAL_FAMILY) and written != JOURNAL_FORMAT:
        raise ConfigError(f"{journal}: a dataset journal of another sgps version (format {written!r}; this "
                          f"one reads {JOURNAL_FORMAT}, whose entries carry checksums); delete it to start "
                          "over")  # fmt: skip
    raise ConfigError(f"{journal}: the journal of a dataset of other levels or another --max-states; "
                      "delete it to start over, or give the same levels and options")  # fmt: skip


def _entry_of(content: bytes | None, bound: int) -> tuple[Any, str | None]:
    """(the JSON value of an entry line, None), or (None, why the line is no entry at all)."""
    if content is None:
        return None, f"longer than any entry of this build (over {bound:,} bytes)"
    try:
        return _parse_line(content.decode()), None
    except UnicodeDecodeError as error:
        return None, f"not a journal entry (byte {error.start} is not UTF-8)"
    except ValueError as error:
        return None, f"not a journal entry ({error})"


def _parse_line(text: str) -> Any:
    """A journal line's JSON value, or a `ValueError` saying why it has none.

    The builder writes one object holding at most one list (`_append`): a line with more
    brackets is refused before it is parsed, so the parser's recursion never depends on
    the input (100,000 nested ``[`` would raise `RecursionError`). A key given twice is
    refused rather than resolved to its last value, as `json.loads` would.
    """
    if text.count("{") > 1 or text.count("[") > 1:
        raise ValueError("nested deeper than an entry: one object holding at most one list")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error.msg} at character {error.pos + 1}") from None
    except RecursionError:  # cannot happen after the count above; no line may raise it all the same
        raise ValueError("nested too deeply") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members as a dict, or a `ValueError` for a key given twice (`json.loads`'s hook)."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} twice")
        seen.add(key)
    return dict(pairs)


def _checksum(header: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    """The seal of a journal entry: SHA-256 of the build's identity and the entry's content.

    The identity is the journal's header (its format, domain, levels' digest, count and
    cap), so an entry copied from another build does not match; the content is the
    entry's canonical JSON (keys sorted, no spaces) without its checksum, so the same
    entry re-spaced or with its keys reordered still does, and any change of value does
    not. Not a secret: it catches edits and damage, not forgeries (see `_read_journal`).
    """
    content = {key: value for key, value in entry.items() if key != "checksum"}
    text = _canonical(header) + "\n" + _canonical(content)
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical(value: Any) -> str:
    """`value` as JSON with its keys sorted and no spaces: one text for one value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _line(value: Any) -> str:
    """`value` as a journal line writes it (no spaces, keys in their order), without the newline."""
    return json.dumps(value, separators=(",", ":"))


def _entry_fault(entry: Any, domain: Domain[Any], levels: Sequence[Level], max_states: int | None) -> str | None:
    """What makes a journal entry not one `build_dataset` wrote for `levels`; None when nothing does.

    An entry counts only if the build could have written it: a level of the set, and either
    actions that replay from that level's start to a goal, or a reason to skip it that the
    builder gives for that level (`solve_level`: no solution, or its state cap reached).
    Nothing else is trusted, so an edited journal never makes a dataset that
    `read_dataset` would refuse. An edit this cannot see (a made-up "no solution exists",
    a solution with a detour) is caught by the entry's checksum (`_read_journal`).
    """
    index = entry.get("index") if isinstance(entry, dict) else None
    actions = entry.get("actions") if isinstance(entry, dict) else None
    if (not isinstance(entry, dict) or not _is_int(index) or not 0 <= index < len(levels)
            or set(entry) - {"index", "actions", "skipped", "checksum"} or not {"actions", "skipped"} & set(entry)
            or ("actions" in entry and not (isinstance(actions, list) and all(map(_is_int, actions))))):  # fmt: skip
        return "not a finished level"
    level = levels[index]
    if "actions" in entry and "skipped" in entry:
        return f"level {index} ({level.name}) is both solved and skipped"
    if "skipped" in entry:
        cap = default_state_cap(domain, level.state) if max_states is None else max_states
        reasons = (NO_SOLUTION, _cap_reached(cap))
        if entry["skipped"] not in reasons:
            return (f"level {index} ({level.name}): {entry['skipped']!r} is not a reason the dataset builder gives "
                    f"for it ({' or '.join(map(repr, reasons))})")  # fmt: skip
        return None
    fault = checked_trajectory(domain, level.state, actions)[1]  # type: ignore[arg-type]
    if fault is not None and fault.startswith("an action outside"):
        return f"not a finished level (level {index} has {fault})"
    return None if fault is None else f"level {index} ({level.name}): {fault}"


def _is_int(value: Any) -> bool:
    """Whether `value` is a JSON integer (a bool is not one, although Python counts it as an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _append(handle: TextIO, entry: Mapping[str, Any], *, seal: Mapping[str, Any] | None = None) -> None:
    """One JSON line, on disk before the next level is recorded; with `seal` (the journal's header), the
    entry's `_checksum` is added as its last key, so that `_read_journal` can tell an edit."""
    line = dict(entry) if seal is None else {**entry, "checksum": _checksum(seal, entry)}
    handle.write(_line(line) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def write_dataset(path: str | Path, dataset: Dataset) -> None:
    """Write `dataset` to `path` (`.npz`; a temporary file, then rename)."""
    if not dataset.trajectories:
        raise ConfigError(f"{path}: no solved trajectory to write")
    encodings = [np.asarray(dataset.domain.encode(t.states[0]), dtype=np.int64) for t in dataset.trajectories]
    actions = [np.asarray(t.actions, dtype=np.int16) for t in dataset.trajectories]
    arrays = {
        "format": np.array(FORMAT),
        "domain": np.array(dataset.domain.name),
        "names": np.array([t.name for t in dataset.trajectories]),
        "levels": np.concatenate(encodings),
        "level_offsets": np.cumsum([0] + [len(e) for e in encodings]),
        "actions": np.concatenate(actions),
        "action_offsets": np.cumsum([0] + [len(a) for a in actions]),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:  # what np.savez_compressed writes,
        for key, array in arrays.items():  # with a fixed date: the same dataset gives the same bytes
            member = io.BytesIO()
            np.lib.format.write_array(member, array, allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{key}.npy", date_time=ZIP_DATE), member.getvalue(),
                             compress_type=zipfile.ZIP_DEFLATED)  # fmt: skip
    atomic_write_bytes(path, buffer.getvalue())


def read_dataset(path: str | Path, domain_name: str | None = None) -> Dataset:
    """Read and check a dataset file: every trajectory must replay in its domain to a goal.

    `domain_name`: refuse a dataset of another domain. Errors name the file and the trajectory.
    """
    file = Path(path)
    arrays = _load_arrays(file)
    if str(arrays["format"]) != FORMAT:
        raise ConfigError(f"{file}: not an sgps HIPS-ε dataset (format {str(arrays['format'])!r}, expected {FORMAT})")
    name = str(arrays["domain"])
    if domain_name and name != domain_name:
        raise ConfigError(f"{file}: a {name} dataset, but this run is on {domain_name}")
    try:
        domain = get_domain(name)
    except SgpsError as error:
        raise ConfigError(f"{file}: {error}") from None
    names, level_offsets, action_offsets = arrays["names"], arrays["level_offsets"], arrays["action_offsets"]
    count = len(names)
    if len(level_offsets) != count + 1 or len(action_offsets) != count + 1 or count == 0:
        raise ConfigError(f"{file}: damaged: {count} trajectory names but offsets for a different number")
    trajectories = []
    for k in range(count):
        fields = arrays["levels"][level_offsets[k] : level_offsets[k + 1]].tolist()
        actions = tuple(int(a) for a in arrays["actions"][action_offsets[k] : action_offsets[k + 1]])
        where = f"{file}: trajectory {k} ({names[k]})"
        try:
            start = domain.parse(fields)
        except SgpsError as error:
            raise ConfigError(f"{where}: its level does not parse ({error})") from None
        states, fault = checked_trajectory(domain, start, actions)
        if fault is not None:
            raise ConfigError(f"{where}: {fault}")
        trajectories.append(Trajectory(str(names[k]), tuple(states), actions))
    return Dataset(domain, tuple(trajectories))


def _load_arrays(file: Path) -> dict[str, np.ndarray]:
    """The archive's arrays (no pickles), each of its `_LAYOUT`, or a `ConfigError` naming the file and
    what is wrong (the array, when one is damaged)."""
    if not file.is_file():
        raise ConfigError(f"{file}: no such dataset file (write one with `sgps dataset`)")
    if not zipfile.is_zipfile(file):  # numpy would read a level file as a pickle it refuses to load
        raise ConfigError(f"{file}: not a dataset written by `sgps dataset` (not an .npz archive; levels to "
                          "solve and learn from are given as --problems)")  # fmt: skip
    try:
        with np.load(file, allow_pickle=False) as archive:
            missing = [key for key in _LAYOUT if key not in archive.files]
            if missing:
                raise ConfigError(f"{file}: not a dataset written by `sgps dataset` (it has no arrays "
                                  f"{', '.join(missing)})")  # fmt: skip
            arrays = {key: archive[key] for key in _LAYOUT}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise ConfigError(f"{file}: not a readable dataset ({error})") from None
    for key, (dimensions, kinds) in _LAYOUT.items():
        array = arrays[key]
        if array.ndim != dimensions or array.dtype.kind not in kinds:
            wanted = f"{'one' if dimensions == 0 else 'a list of'} {'text' if kinds == 'U' else 'integers'}"
            raise ConfigError(f"{file}: damaged: the array {key} must be {wanted}, not a {array.ndim}-D array of "
                              f"{array.dtype}")  # fmt: skip
    for key, cut in _OFFSETS.items():
        offsets, length = arrays[key], len(arrays[cut])
        if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != length or bool(np.any(offsets[1:] < offsets[:-1])):
            raise ConfigError(f"{file}: damaged: the array {key} must rise from 0 to the length of {cut} ({length})")
    return arrays
