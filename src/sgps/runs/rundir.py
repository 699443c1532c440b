"""The run directory: resolved config, metrics CSVs, checkpoints and the log of one run.

Layout::

    RUN/config.toml             the fully resolved configuration
    RUN/metrics/train.csv       one row per training search
    RUN/metrics/validate.csv    one row per validation search
    RUN/metrics/outstanding.csv cumulative expansions, outstanding problems and wall-clock seconds:
                                at the start (batch -1) and after every batch
    RUN/metrics/learning.csv    what the method learned from every batch (losses, samples; method-specific)
    RUN/checkpoints/            latest.safetensors, best.safetensors, trainer.pt
    RUN/log.txt                 human-readable progress

CSV rows are appended as they happen. A checkpoint records how many rows each file
had, and resuming cuts the files back to those counts, so a resumed run neither
loses nor repeats rows. The Bootstrap loop writes through the `RunRecord` protocol
(`sgps.training.bootstrap`), which `RunDirectory` satisfies; trainer.pt's format is
`sgps.runs.trainer_state`.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sgps.errors import CheckpointError, RunLockedError
from sgps.fileio import atomic_write_bytes, atomic_write_text, open_regular, read_regular_text
from sgps.runs.trainer_state import encode_trainer_state, read_trainer_state

SEARCH_COLUMNS = (
    "iteration", "batch", "problem", "solved", "expanded", "generated", "length", "budget", "seconds",
)  # fmt: skip
METRICS: dict[str, Sequence[str]] = {
    "train": SEARCH_COLUMNS,
    "validate": SEARCH_COLUMNS,
    "outstanding": ("iteration", "batch", "cumulative_expansions", "outstanding", "seconds"),
}


#: What a run directory holds of its own: all that `--overwrite` deletes, nothing else.
RUN_FILES = ("config.toml", "metrics", "checkpoints", "log.txt")


class RunDirectory:
    """Reads and writes the files of one run directory."""

    def __init__(self, path: str | Path, learning_columns: Sequence[str] = ("loss",)) -> None:
        """`learning_columns`: the columns of the method's per-batch report (`Method.report_columns`)."""
        self.path = Path(path)
        self.columns: dict[str, Sequence[str]] = {**METRICS, "learning": ("iteration", "batch", *learning_columns)}
        self.metrics = self.path / "metrics"
        self.checkpoints = self.path / "checkpoints"

    def create(self, config: Mapping[str, Mapping[str, Any]]) -> None:
        """Make the folders, write config.toml and the CSV headers."""
        self.metrics.mkdir(parents=True, exist_ok=True)
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path / "config.toml", to_toml(config))
        for name, columns in self.columns.items():
            atomic_write_text(self.metrics / f"{name}.csv", ",".join(columns) + "\n")

    def keep_older_learning_columns(self) -> tuple[str, ...]:
        """Keep the learning.csv header of a run started before the method reported more columns.

        Columns a newer version adds come after the old ones, so a resumed run whose
        header is a strict prefix of the method's columns goes on writing its own columns
        (its file is never rewritten to another format). Returns the columns left out.
        """
        file = self.metrics / "learning.csv"
        try:
            with open_regular(file, newline="") as handle:
                header = next(csv.reader(handle), [])
        except (OSError, UnicodeDecodeError, csv.Error):
            return ()  # the checks of `truncate` name the problem
        columns = tuple(self.columns["learning"])
        if len(header) < len(columns) and tuple(header) == columns[: len(header)]:
            self.columns["learning"] = tuple(header)
            return columns[len(header) :]
        return ()

    def append(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append rows (dicts keyed by the file's columns) to metrics/NAME.csv."""
        columns = self.columns[name]
        with open_regular(self.metrics / f"{name}.csv", "a", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            for row in rows:
                writer.writerow([_cell(row[column]) for column in columns])

    def row_counts(self) -> dict[str, int]:
        """Data rows in each metrics file."""
        return {name: len(self.read(name)) for name in self.columns}

    def read(self, name: str) -> list[dict[str, str]]:
        """The complete data rows of metrics/NAME.csv.

        Every row is written whole with its line end, so a last line without one is a row
        still being written (a run in progress, read by `sgps report`) and is left out.
        """
        file = self.metrics / f"{name}.csv"
        try:
            with open_regular(file, newline="") as handle:
                text = handle.read()
            if not text.endswith("\n"):
                text = text[: text.rfind("\n") + 1]
            return list(csv.DictReader(io.StringIO(text)))
        except UnicodeDecodeError as error:
            raise CheckpointError(f"{file}: not UTF-8 text (byte {error.start}); the metrics were damaged") from None
        except csv.Error as error:
            raise CheckpointError(f"{file}: not a readable CSV ({error}); the metrics were damaged") from None

    def truncate(self, counts: Mapping[str, int]) -> None:
        """Cut every metrics file back to `counts` data rows (what the last checkpoint saw).

        Rows after those (a batch the checkpoint did not see, or a half-written last
        line) are dropped: the loop writes them again. Every file is checked before any
        is rewritten; a file that lost rows, or holds duplicated, out-of-order or foreign
        rows among the counted ones, raises `CheckpointError` naming the file and row.
        """
        kept = {name: self._checked_rows(name, count) for name, count in counts.items()}
        for name, rows in kept.items():
            text = io.StringIO()
            csv.writer(text, lineterminator="\n").writerows([self.columns[name], *rows])
            atomic_write_text(self.metrics / f"{name}.csv", text.getvalue())

    def _checked_rows(self, name: str, count: int) -> list[list[str]]:
        """The first `count` data rows of metrics/NAME.csv, after checking them against the run's format."""
        file = self.metrics / f"{name}.csv"
        try:
            with open_regular(file, newline="") as handle:
                rows = list(csv.reader(handle))
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            raise CheckpointError(f"{file}: unreadable metrics ({error})") from None
        columns = list(self.columns.get(name, ()))
        if not rows or rows[0] != columns:
            raise CheckpointError(f"{file}: the header is not {','.join(columns)}; the metrics were damaged")
        data = rows[1:]
        if len(data) < count:
            raise CheckpointError(
                f"{file}: {len(data)} rows, but the checkpoint saw {count}; rows were lost, or the checkpoint is "
                "another run's (copied in), so the run cannot resume"
            )
        seen: set[tuple[str, ...]] = set()
        previous = (-1, -2)
        identity = 3 if "problem" in columns else 2  # (iteration, batch[, problem]) names a row
        for number, row in enumerate(data[:count], start=2):
            problem = _row_problem(row, len(columns), previous)
            if problem is None and tuple(row[:identity]) in seen:
                problem = "repeats an earlier row"
            if problem is not None:
                raise CheckpointError(f"{file}: row {number} {problem}; the metrics no longer match the checkpoint")
            seen.add(tuple(row[:identity]))
            previous = (int(row[0]), int(row[1]))
        return data[:count]

    def save_checkpoint(self, trainer_state: dict[str, Any], save_model: Callable[[Path], None]) -> None:
        """Checkpoint the run: `save_model` writes the latest weights to checkpoints/latest.safetensors,
        then checkpoints/trainer.pt holds `trainer_state`, each file written atomically.

        The state is serialised first, so a state that cannot be saved leaves both files as they were.
        """
        data = encode_trainer_state(trainer_state)
        save_model(self.checkpoints / "latest.safetensors")
        atomic_write_bytes(self.checkpoints / "trainer.pt", data)

    def read_trainer_state(self) -> dict[str, Any]:
        """The state in checkpoints/trainer.pt, its digest checked (`sgps.runs.trainer_state`)."""
        return read_trainer_state(self.checkpoints / "trainer.pt")

    def log(self, message: str) -> None:
        with open_regular(self.path / "log.txt", "a") as handle:
            handle.write(message + "\n")

    def log_lines(self) -> int:
        """Lines in log.txt (a checkpoint records them, so resuming can cut the log back too)."""
        try:
            return len(read_regular_text(self.path / "log.txt").splitlines())
        except FileNotFoundError:
            return 0

    def truncate_log(self, lines: int) -> None:
        """Cut log.txt back to its first `lines` lines."""
        file = self.path / "log.txt"
        if file.exists():
            atomic_write_text(file, "".join(read_regular_text(file).splitlines(keepends=True)[:lines]))

    def holds_a_run(self) -> bool:
        """Whether the folder already holds run files (a config, metrics or checkpoints)."""
        return any((self.path / name).exists() for name in RUN_FILES)

    def is_run_directory(self) -> bool:
        """Whether the folder is an sgps run directory: a config beside the loop's progress record or a
        saved model (a stricter test than `holds_a_run`, for telling whether a path lies inside a run;
        a project folder with a config.toml and a checkpoints folder of its own is not one)."""
        return (self.path / "config.toml").is_file() and (
            (self.metrics / "outstanding.csv").is_file() or (self.checkpoints / "latest.safetensors").is_file()
        )

    def clear(self) -> None:
        """Delete the run files of the folder (config, metrics, checkpoints, log), nothing else."""
        for name in ("metrics", "checkpoints"):
            shutil.rmtree(self.path / name, ignore_errors=True)
        for name in ("config.toml", "log.txt"):
            (self.path / name).unlink(missing_ok=True)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder's training lock, or raise `RunLockedError` naming the process that holds it.

        An advisory `flock` on RUN/.lock: the system releases it when its holder ends, so
        a lock left by a killed process is taken over without further ado.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        with open_regular(self.path / ".lock", "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise RunLockedError(
                    f"{self.path} is being trained by process {holder}; wait for it to finish"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
            try:
                yield
            finally:
                handle.seek(0)
                handle.truncate()
                fcntl.flock(handle, fcntl.LOCK_UN)


def _row_problem(row: list[str], width: int, previous: tuple[int, int]) -> str | None:
    """What is wrong with one metrics row (None when nothing): its width, its integers, its order."""
    if len(row) != width:
        return f"has {len(row)} fields, not {width}"
    try:
        place = (int(row[0]), int(row[1]))
    except ValueError:
        return "does not start with an iteration and a batch number"
    if place < previous:
        return "comes before the row above it (iteration, batch)"
    return None


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)


def to_toml(config: Mapping[str, Mapping[str, Any]]) -> str:
    """A TOML document of sections holding scalars (str, int, float, bool)."""
    lines = []
    for section, values in config.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"cannot write {value!r} to TOML")
