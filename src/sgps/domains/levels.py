"""Reading and writing level sets.

Native format (the reference implementation's): one level per line, fields separated
by ``|``: the header (``rows|cols`` plus domain fields) then ``rows*cols`` cell codes,
written with two digits. Empty lines and lines starting with ``;`` are skipped.

The format does not name its domain, so files written by sgps begin with a header
comment that records it with the generator settings::

    ; sgps domain=tsp variant=hard seed=0 count=5 params={"cities":6,"size":10,"walls":true}

Boxoban ASCII files (``; N`` then 10 rows of 10 characters) are read as Sokoban.

A level set is a file, or a folder whose ``*.txt`` files are read in name order.
Every problem gets a stable name ``<file stem>:<k>`` (k counts from 0 within its
file; for Boxoban it is the number after ``;``). A UTF-8 byte-order mark that begins
a file is skipped.
"""

from __future__ import annotations

import codecs
import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgps.domains.base import Domain
from sgps.domains.registry import domain_names, get_domain
from sgps.domains.sokoban import ASCII_CODES
from sgps.errors import LevelFormatError, UnknownDomainError
from sgps.fileio import DocumentLimitError, atomic_write_text, open_regular, parse_json

HEADER_PREFIX = "; sgps "
BOXOBAN_SIZE = 10
_HEADER_TOKEN = re.compile(r"(\w+)=(\S+)")
_HEADER_LINE = re.compile(r";\s*sgps(\s|$)")
_INTEGER = re.compile(r"-?[0-9]+")  # ASCII digits only: int() would also take '1_0' and other scripts' digits
#: No level field (a size, a cell code, a count) needs more digits than a 64-bit integer
#: holds; Python refuses to convert more than 4,300 digits at all.
MAX_FIELD_DIGITS = 19

#: The lines `generated_set` reads for a header before giving up (comments may come first).
MAX_LEADING_COMMENTS = 64

#: The most characters of a header field's JSON value (``params={...}``): a generator's few settings.
MAX_HEADER_JSON_BYTES = 64 * 2**10


@dataclass(frozen=True)
class Level:
    """One problem of a level set."""

    name: str  # "<file stem>:<k>"
    path: Path  # the file it came from
    line: int  # 1-based line where the level starts
    state: Any  # the domain's initial state


@dataclass(frozen=True)
class LevelSet:
    """The problems read from a file or folder, all of one domain."""

    domain: Domain[Any]
    levels: list[Level]
    metadata: dict[str, Any] = field(default_factory=dict)  # the sgps header of the first file, if any

    def __len__(self) -> int:
        return len(self.levels)

    def states(self) -> list[Any]:
        """The initial states, in order."""
        return [level.state for level in self.levels]

    def observation_shape(self, expected: tuple[int, int, int] | None = None) -> tuple[int, int, int]:
        """The observation shape (C, H, W) that every level of the set shares: `expected` or the first level's.

        A run's networks read every cell of one level size, so a set that mixes sizes
        (or validation levels of another size than the training levels) is refused
        here, naming the first level of another size, before anything is written.
        """
        shape = expected
        for level in self.levels:
            own = tuple(self.domain.observation_shape(level.state))
            if shape is None:
                shape = own
            elif own != shape:
                raise LevelFormatError(
                    f"a level of another size (observation {'x'.join(map(str, own))}, the others' "
                    f"{'x'.join(map(str, shape))}): a run's networks read one level size; keep each size in its own "
                    "file",
                    level.path,
                    level.line,
                )
        if shape is None:
            raise LevelFormatError("the level set is empty")
        return shape


def states_digest(domain: Domain[Any], states: Sequence[Any]) -> str:
    """A SHA-256 hex digest of levels by their integer encodings (comments and spacing of a
    file aside): what a run, a comparison or a dataset journal checks its problems against."""
    return hashlib.sha256(repr([domain.encode(state) for state in states]).encode()).hexdigest()


def format_level(domain: Domain[Any], state: Any) -> str:
    """The native level line of an initial state: header fields plain, cells two-digit."""
    fields = domain.encode(state)
    head = len(domain.header_fields)
    return "|".join([*(str(v) for v in fields[:head]), *(f"{v:02d}" for v in fields[head:])])


def format_header(domain: str, variant: str | None, seed: int | None, count: int, params: Mapping[str, Any]) -> str:
    """The ``; sgps ...`` comment line that names a generated file's domain and settings."""
    parts = [f"domain={domain}"]
    if variant is not None:
        parts.append(f"variant={variant}")
    if seed is not None:
        parts.append(f"seed={seed}")
    parts.append(f"count={count}")
    parts.append("params=" + json.dumps(dict(params), sort_keys=True, separators=(",", ":")))
    return HEADER_PREFIX + " ".join(parts)


def parse_header(text: str, path: Path, line: int) -> dict[str, Any]:
    """The fields of a ``; sgps ...`` header line (values JSON-decoded where possible)."""
    body = _HEADER_LINE.sub("", text, count=1).strip()
    tokens = _HEADER_TOKEN.findall(body)
    if not tokens or " ".join(f"{k}={v}" for k, v in tokens) != " ".join(body.split()):
        raise LevelFormatError(
            f"bad sgps header {text.strip()!r}: expected space-separated key=value fields", path, line
        )
    header: dict[str, Any] = {}
    for key, value in tokens:
        try:
            header[key] = parse_json(value, max_bytes=MAX_HEADER_JSON_BYTES)
        except DocumentLimitError as error:
            raise LevelFormatError(f"bad sgps header: its {key}= field is {error}", path, line) from None
        except ValueError:  # not JSON (or not UTF-8): kept as the text
            header[key] = value
    if "domain" not in header:
        raise LevelFormatError("bad sgps header: it has no domain=... field", path, line)
    return header


def write_levels(
    path: str | Path,
    domain: Domain[Any],
    states: Iterable[Any],
    *,
    variant: str | None = None,
    seed: int | None = None,
    params: Mapping[str, Any] | None = None,
) -> None:
    """Write initial states as a native level file with an sgps header, atomically."""
    lines = [format_level(domain, state) for state in states]
    header = format_header(domain.name, variant, seed, len(lines), params or {})
    atomic_write_text(path, "\n".join([header, *lines]) + "\n")


def read_levels(path: str | Path, domain: str | Domain[Any] | None = None) -> LevelSet:
    """Read a level file or a folder of ``*.txt`` level files.

    `domain` is required unless the files carry an sgps header or are Boxoban ASCII;
    when given, it must agree with them. Raises `LevelFormatError` naming the file,
    the line and the problem.
    """
    files = level_files(path)
    wanted = _domain_object(domain) if domain is not None else None
    levels: list[Level] = []
    metadata: dict[str, Any] = {}
    for file in files:
        file_levels, file_domain, header = _read_file(file, wanted)
        if wanted is None:
            wanted = file_domain
        elif file_domain.name != wanted.name:
            raise LevelFormatError(f"this file holds {file_domain.name} levels, not {wanted.name}", file, 1)
        if not metadata and header:
            metadata = header
        levels.extend(file_levels)
    assert wanted is not None
    return LevelSet(wanted, levels, metadata)


def generated_set(path: str | Path) -> tuple[str, str] | None:
    """The set a level file was generated as: the (domain, generator variant) its sgps header names.

    Read from the first lines of the set's first file alone, before the set itself is
    read: None when the file has no header naming both, or cannot be read now
    (`read_levels` then names the problem).
    """
    try:
        first = level_files(path)[0]
        with open_regular(first, "rb") as handle:
            lines = [raw.decode("utf-8", errors="replace").removeprefix("\ufeff")
                     for raw in itertools.islice(handle, MAX_LEADING_COMMENTS)]  # fmt: skip
        header = _leading_header(lines, first)
    except (OSError, LevelFormatError):
        return None
    domain, variant = header.get("domain"), header.get("variant")
    return (domain, variant) if isinstance(domain, str) and isinstance(variant, str) else None


def _leading_header(lines: Iterable[str], path: Path) -> dict[str, Any]:
    """The fields of the ``; sgps ...`` header among the comment lines before a file's first level ({}: none)."""
    for number, text in enumerate(lines, start=1):
        if _HEADER_LINE.match(text):
            return parse_header(text, path, number)
        if text.strip() and not text.startswith(";"):
            break
    return {}


def level_files(path: str | Path) -> list[Path]:
    """The files a level set is read from: the file `path`, or the folder's ``*.txt`` files in name order.

    Hidden files and anything that is not a regular file are left out of a folder; a
    `LevelFormatError` when there is nothing to read.
    """
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.glob("*.txt") if p.is_file() and not p.name.startswith("."))
        if not files:
            raise LevelFormatError("the folder holds no *.txt level files", root)
        return files
    if root.is_file():
        return [root]
    if root.exists():
        raise LevelFormatError("not a regular file or folder (a pipe or device would not end)", root)
    raise LevelFormatError("no such file or folder", root)


def _domain_object(domain: str | Domain[Any]) -> Domain[Any]:
    return get_domain(domain) if isinstance(domain, str) else domain


def _read_text(path: Path) -> list[str]:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise LevelFormatError(f"cannot read the file ({error.strerror})", path) from None
    data = data.removeprefix(codecs.BOM_UTF8)  # a byte-order mark some editors write first: not content
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise LevelFormatError("not a text level file (invalid UTF-8)", path, line) from None


def _read_file(path: Path, wanted: Domain[Any] | None) -> tuple[list[Level], Domain[Any], dict[str, Any]]:
    lines = _read_text(path)
    header = _leading_header(lines, path)
    content = [(n, t) for n, t in enumerate(lines, start=1) if t.strip() and not t.startswith(";")]
    if not content:
        raise LevelFormatError("the file holds no levels", path)
    first = content[0][1]
    boxoban = "|" not in first and all(char in ASCII_CODES for char in first)

    named = header.get("domain") if header else ("sokoban" if boxoban else None)
    if named is not None:
        try:
            domain = get_domain(str(named)) if wanted is None or wanted.name != named else wanted
        except UnknownDomainError as error:
            raise LevelFormatError(str(error), path, 1) from None
        if wanted is not None and wanted.name != domain.name:
            what = "an sgps header" if header else "Boxoban ASCII levels"
            raise LevelFormatError(
                f"the file has {what} for domain {domain.name}, but {wanted.name} was asked for", path, 1
            )
    elif wanted is not None:
        domain = wanted
    else:
        raise LevelFormatError(
            "cannot tell which domain these levels are for (the file has no '; sgps domain=...' header); "
            f"name it with --domain ({', '.join(domain_names())})",
            path,
        )

    if boxoban:
        return _read_boxoban(path, lines, domain), domain, header
    levels = []
    for k, (number, text) in enumerate(content):
        levels.append(Level(f"{path.stem}:{k}", path, number, _parse_line(domain, text, path, number)))
    return levels, domain, header


def _parse_line(domain: Domain[Any], text: str, path: Path, line: int) -> Any:
    fields = []
    for position, raw in enumerate(text.strip().split("|"), start=1):
        value = raw.strip()
        if not value:
            raise LevelFormatError(f"field {position} is empty (a stray or doubled '|'?)", path, line)
        if not _INTEGER.fullmatch(value):
            raise LevelFormatError(f"field {position} ({value[:20]!r}) is not an integer in ASCII digits", path, line)
        if len(value.lstrip("-")) > MAX_FIELD_DIGITS:
            digits = len(value.lstrip("-"))
            raise LevelFormatError(
                f"field {position} has {digits:,} digits; a level field has at most {MAX_FIELD_DIGITS}", path, line
            )
        fields.append(int(value))
    try:
        state = domain.parse(fields)
        domain.check_level(state)
    except LevelFormatError as error:
        raise error.located(path, line) from None
    return state


def _read_boxoban(path: Path, lines: Sequence[str], domain: Domain[Any]) -> list[Level]:
    """Boxoban blocks: a ``; N`` line, then 10 rows of 10 characters, then a blank line."""
    levels = []
    number = 0
    while number < len(lines):
        text = lines[number]
        if not text.strip():
            number += 1
            continue
        title = text.strip()
        if not title.startswith(";"):
            raise LevelFormatError(
                f"expected a '; N' line starting a Boxoban level, found {title[:20]!r}", path, number + 1
            )
        start = number + 1
        rows = []
        number += 1
        while number < len(lines) and lines[number].strip() and not lines[number].startswith(";"):
            rows.append(lines[number])
            number += 1
        if len(rows) != BOXOBAN_SIZE:
            raise LevelFormatError(
                f"Boxoban level {title!r} has {len(rows)} rows; expected {BOXOBAN_SIZE}", path, start
            )
        cells = []
        for r, row in enumerate(rows):
            if len(row) != BOXOBAN_SIZE:
                raise LevelFormatError(
                    f"row {r} of Boxoban level {title!r} has {len(row)} characters; expected {BOXOBAN_SIZE}",
                    path,
                    start + 1 + r,
                )
            for c, char in enumerate(row):
                if char not in ASCII_CODES:
                    raise LevelFormatError(
                        f"unknown Sokoban character {char!r} at column {c} (allowed: # @ $ . * + and space)",
                        path,
                        start + 1 + r,
                    )
                cells.append(ASCII_CODES[char])
        label = title.lstrip(";").strip()
        name = f"{path.stem}:{label}" if label.isdigit() else f"{path.stem}:{len(levels)}"
        try:
            state = domain.parse([BOXOBAN_SIZE, BOXOBAN_SIZE, *cells])
        except LevelFormatError as error:
            raise error.located(path, start) from None
        levels.append(Level(name, path, start, state))
    if not levels:
        raise LevelFormatError("the file holds no levels", path)
    return levels
