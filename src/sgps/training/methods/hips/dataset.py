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
import io
import json
import multiprocessing
import os
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from sgps.domains.animation import checked_trajectory, trajectory
from sgps.domains.base import Domain
from sgps.domains.levels import Level, states_digest
from sgps.domains.registry import get_domain
from sgps.domains.solver import default_state_cap, solve
from sgps.errors import ConfigError, SgpsError
from sgps.fileio import atomic_write_bytes, open_regular, read_regular_text

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
    """What `build_dataset` did: the trajectories kept and the levels skipped, with why."""

    dataset: Dataset
    skipped: tuple[tuple[str, str], ...]  # (level name, reason)


def dataset_journal(dataset: Path) -> Path:
    """Where the build of the dataset file `dataset` keeps its journal: beside it, named after it."""
    return dataset.with_name(dataset.name + ".journal")


#: The journal of an unfinished `build_dataset`: a header line, then one line per finished level.
JOURNAL_FORMAT = "sgps-hips-dataset-journal-1"


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
    entries are checked before they count (`_entry_fault`: solutions replayed, skips only
    for the builder's reasons); a damaged or edited one is refused, naming its line.
    """
    finished = _read_journal(journal, domain, levels, max_states) if journal is not None else {}
    todo = [index for index in range(len(levels)) if index not in finished]
    if progress is not None:
        progress(len(finished), len(levels))
    with contextlib.ExitStack() as stack:
        record = None
        if journal is not None:
            record = stack.enter_context(open_regular(journal, "a"))
            if not finished and journal.stat().st_size == 0:
                _append(record, _journal_header(domain, levels, max_states))
        for index, outcome in _solve_all(domain, levels, todo, max_states, workers):
            finished[index] = outcome
            if record is not None:
                _append(record, {"index": index, **outcome})
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
    return BuildReport(Dataset(domain, tuple(trajectories)), tuple(skipped))


def _solve_all(
    domain: Domain[Any], levels: Sequence[Level], todo: Sequence[int], max_states: int | None, workers: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, outcome) of each level in `todo` as it is solved, in this process or in `workers` processes."""
    if workers <= 1 or len(todo) <= 1:
        for index in todo:
            yield index, solve_level(domain, levels[index].state, max_states)
        return
    with ProcessPoolExecutor(min(workers, len(todo)), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(solve_level, domain, levels[index].state, max_states): index for index in todo}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            pool.shutdown(cancel_futures=True)


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
    journal: Path, domain: Domain[Any], levels: Sequence[Level], max_states: int | None
) -> dict[int, dict[str, Any]]:
    """The levels a journal records as finished (complete lines only: the last may be cut)."""
    if not journal.exists() or journal.stat().st_size == 0:
        return {}
    try:
        text = read_regular_text(journal)
    except UnicodeDecodeError as error:
        raise ConfigError(f"{journal}: not a dataset journal (byte {error.start} is not UTF-8)") from None
    complete = text[: text.rfind("\n") + 1]
    if len(complete) < len(text):  # a line cut by an interruption: dropped, so the next line starts clean
        with open_regular(journal, "r+") as handle:
            handle.truncate(len(complete.encode()))
    lines = complete.splitlines()
    try:
        entries = [json.loads(line) for line in lines]
    except json.JSONDecodeError as error:
        raise ConfigError(f"{journal}: a damaged dataset journal ({error}); delete it to start over") from None
    if not entries:  # only a cut header: nothing was finished
        return {}
    if entries[0] != _journal_header(domain, levels, max_states):
        raise ConfigError(f"{journal}: the journal of a dataset of other levels or another --max-states; "
                          "delete it to start over, or give the same levels and options")  # fmt: skip
    finished: dict[int, dict[str, Any]] = {}
    lines_of: dict[int, int] = {}
    for number, entry in enumerate(entries[1:], start=2):
        problem = _entry_fault(entry, domain, levels, max_states)
        index = entry.get("index") if isinstance(entry, dict) else None
        if problem is None and index in lines_of:
            problem = f"level {index} is recorded twice (first on line {lines_of[index]})"
        if problem is not None:
            raise ConfigError(f"{journal}:{number}: {problem}; delete the journal to start over")
        lines_of[index] = number
        finished[index] = {key: value for key, value in entry.items() if key != "index"}
    return finished


def _entry_fault(entry: Any, domain: Domain[Any], levels: Sequence[Level], max_states: int | None) -> str | None:
    """What makes a journal entry not one `build_dataset` wrote for `levels`; None when nothing does.

    An entry counts only if the build could have written it: a level of the set, and either
    actions that replay from that level's start to a goal, or a reason to skip it that the
    builder gives for that level (`solve_level`: no solution, or its state cap reached).
    Nothing else is trusted, so an edited journal never makes a dataset that
    `read_dataset` would refuse, and no level is dropped by a made-up skip.
    """
    index = entry.get("index") if isinstance(entry, dict) else None
    actions = entry.get("actions") if isinstance(entry, dict) else None
    if (not isinstance(entry, dict) or not _is_int(index) or not 0 <= index < len(levels)
            or set(entry) - {"index", "actions", "skipped"} or not {"actions", "skipped"} & set(entry)
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


def _append(handle: TextIO, entry: Mapping[str, Any]) -> None:
    """One JSON line, on disk before the next level is recorded."""
    handle.write(json.dumps(entry, separators=(",", ":")) + "\n")
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
