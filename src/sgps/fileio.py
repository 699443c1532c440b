"""Atomic file writes: a reader never sees a half-written file.

Every file the project produces (level sets, images, configs, checkpoints) is written
to a temporary file in the target folder, flushed, and renamed over the target. The
file gets the permissions a plainly created file would (0666 less the umask), not the
private 0600 of the temporary file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import tempfile
import tomllib
from pathlib import Path
from typing import IO, Any

#: Bytes of a file's name kept in the name of its temporary file (255 less room for the random part).
TEMPORARY_STEM_BYTES = 200


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically, creating parent folders as needed.

    Only a new path or a regular file is written: a symbolic link is followed and its
    target replaced (the link stays), and a folder, device, FIFO or socket is refused
    (renaming over it would replace a device node with a plain file).
    """
    target = Path(path)
    if target.is_symlink():
        target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder stands where the file should be written", str(target))
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket); write to a file path",
                      str(Path(path)))  # fmt: skip
    fd, tmp = tempfile.mkstemp(prefix=f".{temporary_stem(target.name)}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, target)
    except OSError as error:  # name the file the user knows, not the temporary one
        Path(tmp).unlink(missing_ok=True)
        raise OSError(error.errno, f"cannot write it ({error.strerror or error})", str(target)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def temporary_stem(name: str) -> str:
    """`name` cut short enough that a temporary file named after it stays within the file system's 255
    bytes (a valid name of up to 255 bytes would otherwise be refused with the temporary file's name)."""
    return name.encode("utf-8")[:TEMPORARY_STEM_BYTES].decode("utf-8", errors="ignore")


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write UTF-8 `text` to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def current_umask() -> int:
    """The process's file-creation mask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def open_regular(
    path: str | Path, mode: str = "r", *, encoding: str | None = "utf-8", newline: str | None = None,
    errors: str | None = None,
) -> IO[Any]:
    """Open `path` like `open`, but refuse anything but a regular file without blocking.

    Journals, locks and partial records are opened for reading or appending where a user
    may have left anything: a plain `open` of a FIFO waits forever for its other end.
    Here the file is opened non-blocking, checked to be a regular file (an `OSError`
    naming it otherwise), and then switched back to blocking I/O. Modes: r, a, a+, r+
    (text, or binary with "b"); "a" modes create a missing file.
    """
    flags = {"r": os.O_RDONLY, "r+": os.O_RDWR, "a": os.O_WRONLY | os.O_APPEND | os.O_CREAT,
             "a+": os.O_RDWR | os.O_APPEND | os.O_CREAT}[mode.replace("b", "")]  # fmt: skip
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
            raise OSError(errno.EINVAL, "a FIFO (named pipe), not a regular file; remove it", str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket); remove it", str(path))
        os.set_blocking(fd, True)
        if "b" in mode:
            return os.fdopen(fd, mode)
        return os.fdopen(fd, mode, encoding=encoding, newline=newline, errors=errors)
    except BaseException:
        os.close(fd)
        raise


def read_regular_text(path: str | Path, *, errors: str | None = None) -> str:
    """The UTF-8 text of the regular file `path` (`open_regular`: a FIFO there is refused, not waited on)."""
    with open_regular(path, errors=errors) as handle:
        return handle.read()


def file_sha256(path: str | Path) -> bytes:
    """The SHA-256 digest of the regular file `path`'s bytes (`open_regular`)."""
    with open_regular(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").digest()


#: How deeply a JSON or TOML document that sgps reads may nest its lists and tables. No
#: file sgps writes nests more than a few levels; without a bound, 100,000 nested ``[``
#: ended in a `RecursionError` traceback (the parsers recurse once per level).
MAX_NESTING = 64

#: The most bytes of one JSON or TOML document sgps parses (its own are a few KiB).
MAX_DOCUMENT_BYTES = 16 * 2**20

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_TOML_SKIPPED = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^\']|\'(?!\'\'))*\'\'\''  # multi-line strings
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"|\'[^\'\n]*\'|#[^\n]*',  # strings, comments
    re.DOTALL,
)
_OPENERS = str.maketrans({"[": "(", "{": "(", "]": ")", "}": ")"})


class DocumentLimitError(ValueError):
    """A JSON or TOML document larger, or nested deeper, than sgps reads (`parse_json`, `parse_toml_text`)."""


def parse_json(
    text: str | bytes, *, max_depth: int = MAX_NESTING, max_bytes: int = MAX_DOCUMENT_BYTES,
    object_pairs_hook: Any = None,
) -> Any:
    """`json.loads(text)`, bounded: a `DocumentLimitError` for a document of more than `max_bytes` or one
    nested more than `max_depth` deep (checked before it is parsed), a `json.JSONDecodeError` for one that is
    not JSON. Callers name their file in the error they raise for either (both are `ValueError`s)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")  # json.loads' own rule for bytes, less the UTF-16/32 guess
    _check_size(text, max_bytes)
    _check_depth(_JSON_STRING.sub("", text), max_depth)
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except RecursionError:  # cannot happen within MAX_NESTING; never a traceback all the same
        raise DocumentLimitError(f"nested more than {max_depth} deep") from None


def parse_toml_text(text: str, *, max_depth: int = MAX_NESTING, max_bytes: int = MAX_DOCUMENT_BYTES) -> dict[str, Any]:
    """`tomllib.loads(text)`, bounded as `parse_json` is: arrays and inline tables are counted before the
    document is parsed, tables made by dotted keys after (`tomllib` builds those without recursing)."""
    _check_size(text, max_bytes)
    _check_depth(_TOML_SKIPPED.sub("", text), max_depth)
    try:
        document = tomllib.loads(text)
    except RecursionError:
        raise DocumentLimitError(f"nested more than {max_depth} deep") from None
    _check_value_depth(document, max_depth)
    return document


def _check_size(text: str, max_bytes: int) -> None:
    if len(text) > max_bytes:  # characters: at least as many bytes
        raise DocumentLimitError(f"{len(text):,} characters, more than the {max_bytes:,} bytes sgps reads here")


def _check_depth(text: str, max_depth: int) -> None:
    """Refuse brackets nested more than `max_depth` deep (`text` with its strings and comments removed)."""
    brackets = re.sub(r"[^\[\]{}]+", "", text).translate(_OPENERS)
    for _ in range(max_depth):  # each pass removes the innermost pairs: one level of nesting
        reduced = brackets.replace("()", "")
        if reduced == brackets:
            break
        brackets = reduced
    if "()" in brackets or brackets.count("(") > max_depth:  # pairs left, or more unclosed than allowed
        raise DocumentLimitError(f"lists or tables nested more than {max_depth} deep")


def _check_value_depth(value: Any, max_depth: int) -> None:
    """Refuse a parsed document whose lists and tables nest more than `max_depth` deep (no recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise DocumentLimitError(f"lists or tables nested more than {max_depth} deep")
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
