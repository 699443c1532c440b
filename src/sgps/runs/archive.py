"""The archive format: a folder's files packed into a few compressed parts that travel between machines.

A run of tens of millions of expansions outlives the machine it started on; what survives is
what is committed to a repository, where a file may be at most a few MiB. An archive is a
folder::

    ARCHIVE/archive.json        what it holds: the format, what was packed (`kind`, `about`),
                                when, where and by which sgps; every member (path, size,
                                SHA-256) and every part (name, size, SHA-256)
    ARCHIVE/part-000.tar.xz     one xz-compressed tar stream of the members, cut into
    ARCHIVE/part-001.tar.xz     consecutive parts of at most `part_size` bytes each
    ...

Reading checks every part's digest before anything is extracted (a missing, truncated or
edited part is named), takes regular files only, at relative paths, and checks every
member's digest against the index. Writing is atomic: a new archive is built beside its
place and renamed into it, so a reader sees the old archive or the new one, never half of
either. What goes into an archive, and what comes out of it, is decided by the callers
(`sgps.runs.packing` for a run folder, `sgps.experiments.packing` for a comparison).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import io
import json
import lzma
import os
import platform
import re
import shutil
import signal
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from sgps.errors import ConfigError, SgpsError
from sgps.fileio import current_umask, open_regular, parse_json, temporary_stem
from sgps.version import sgps_version

T = TypeVar("T")

FORMAT = "sgps-archive"
FORMAT_VERSION = 1
INDEX = "archive.json"
PART_PATTERN = "part-{:03d}.tar.xz"
#: The largest file a repository takes without special handling (GitHub warns above 50 MB,
#: and this project keeps every committed file at most 16 MiB).
DEFAULT_PART_BYTES = 16 * 2**20
#: Parts smaller than this would only multiply files.
MIN_PART_BYTES = 2**20
#: A bound on what one archive may unpack to, so that a damaged or hostile index cannot fill a disk.
MAX_UNPACKED_BYTES = 16 * 2**30
_XZ_PRESET = 6


@dataclass(frozen=True)
class Member:
    """One file of an archive: its path inside the archive (POSIX, relative) and its bytes."""

    path: str
    data: bytes

    def record(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": len(self.data), "sha256": hashlib.sha256(self.data).hexdigest()}


@dataclass(frozen=True)
class ArchiveIndex:
    """The contents of ``archive.json``."""

    kind: str  # what was packed: "run" or "comparison"
    about: Mapping[str, Any]  # what the packer says of it (the run's progress, where to resume it)
    members: tuple[Mapping[str, Any], ...]
    parts: tuple[Mapping[str, Any], ...]
    packed: Mapping[str, Any]  # when, on which host, by which sgps

    def to_json(self) -> str:
        entry = {"format": FORMAT, "version": FORMAT_VERSION, **dataclasses.asdict(self)}
        return json.dumps(entry, indent=1, sort_keys=True, default=list) + "\n"


def checked_member_path(path: str) -> str:
    """`path` as an archive member: relative, POSIX, without `.` or `..` parts (else ValueError)."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or "\\" in path or any(part in ("", ".", "..") for part in path.split("/")):
        raise ValueError(f"not a relative member path: {path!r}")
    return str(pure)


def write_archive(
    archive: Path,
    kind: str,
    about: Mapping[str, Any],
    members: Sequence[Member],
    *,
    part_bytes: int = DEFAULT_PART_BYTES,
    overwrite: bool = False,
) -> ArchiveIndex:
    """Write `members` as the archive folder `archive` (replacing an archive there if `overwrite`).

    The caller has checked `archive` as an output (`sgps.outputs`); here a folder that is not
    an archive is never replaced, whatever `overwrite` says.
    """
    if part_bytes < MIN_PART_BYTES:
        raise ConfigError(f"the part size must be at least {MIN_PART_BYTES // 2**20} MiB")
    paths = [checked_member_path(member.path) for member in members]
    if len(set(paths)) != len(paths):
        raise ValueError("an archive member is given twice")
    if archive.exists() and not (overwrite and is_archive(archive)):
        raise ConfigError(
            f"{archive}: already exists; choose another name"
            + (", or pass --overwrite to replace the archive" if is_archive(archive) else "")
        )
    present = sorted(entry.name for entry in archive.iterdir()) if archive.exists() else []
    foreign = [name for name in present if not _archive_file(name)]
    if foreign:
        raise ConfigError(f"{archive / foreign[0]}: not a file of the archive; --overwrite replaces the whole "
                          "folder, so move it out first")  # fmt: skip
    archive.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{temporary_stem(archive.name)}.", suffix=".packing", dir=archive.parent))
    try:
        stream = _compressed_tar(members)
        parts = []
        for number, start in enumerate(range(0, max(len(stream), 1), part_bytes)):
            data = stream[start : start + part_bytes]
            name = PART_PATTERN.format(number)
            _write_durably(building / name, data)
            parts.append({"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        index = ArchiveIndex(kind, dict(about), tuple(member.record() for member in members), tuple(parts),
                             _packed_here())  # fmt: skip
        _write_durably(building / INDEX, index.to_json().encode("utf-8"))
        os.chmod(building, 0o777 & ~current_umask())
        _sync_folder(building)
        with _signals_held():
            _swap_into_place(building, archive)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return index


def _compressed_tar(members: Sequence[Member]) -> bytes:
    """One xz-compressed tar stream of `members`, in their order, with neutral owners and times."""
    buffer = io.BytesIO()
    with (
        lzma.LZMAFile(buffer, "wb", preset=_XZ_PRESET) as xz,
        tarfile.open(fileobj=xz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for member in members:
            info = tarfile.TarInfo(member.path)
            info.size, info.mode, info.mtime = len(member.data), 0o644, 0
            tar.addfile(info, io.BytesIO(member.data))
    return buffer.getvalue()


def _packed_here() -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    return {"at": now.isoformat(), "host": platform.node(), "sgps": sgps_version(),
            "python": platform.python_version()}  # fmt: skip


def _swap_into_place(built: Path, archive: Path) -> None:
    """Rename the finished folder `built` to `archive`, replacing an archive there.

    The old archive is renamed aside first and deleted only once the new one is in place;
    if the second rename fails it is put back, and if even that fails it is kept aside,
    named in the error, never deleted.
    """
    if not archive.exists():
        os.rename(built, archive)
        _sync_folder(archive.parent)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{temporary_stem(archive.name)}.", suffix=".replaced", dir=archive.parent))
    os.rename(archive, retired / "old")
    try:
        os.rename(built, archive)
    except OSError as error:
        try:
            os.rename(retired / "old", archive)
        except OSError:
            raise ConfigError(f"{archive}: could not be replaced ({error.strerror or error}); the old archive is "
                              f"kept in {retired / 'old'}") from None  # fmt: skip
        os.rmdir(retired)
        raise
    _sync_folder(archive.parent)
    shutil.rmtree(retired, ignore_errors=True)


def _archive_file(name: str) -> bool:
    """Whether `name` is one of the files an archive folder holds (its index and its parts)."""
    return name == INDEX or re.fullmatch(r"part-[0-9]{3,}\.tar\.xz", name) is not None


def _write_durably(path: Path, data: bytes) -> None:
    """Write a new file and flush it to the disk (an archive may replace the only other copy)."""
    with open(path, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _sync_folder(folder: Path) -> None:
    """Flush a folder's entries (renames) to the disk, where the system allows it."""
    with contextlib.suppress(OSError):
        handle = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back while an archive is swapped (delivered right after)."""
    held = {signal.SIGINT, signal.SIGTERM}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def is_archive(path: Path) -> bool:
    """Whether `path` is a folder holding an archive index."""
    return path.is_dir() and (path / INDEX).is_file()


def read_index(archive: Path) -> ArchiveIndex:
    """The checked index of the archive folder `archive` (`ConfigError` naming what is wrong)."""
    index_file = archive / INDEX
    if not archive.is_dir():
        raise ConfigError(f"{archive}: not an archive folder (`sgps pack` writes one)")
    try:
        with open_regular(index_file) as handle:
            entry = parse_json(handle.read(2**24))
    except FileNotFoundError:
        raise ConfigError(f"{archive}: no {INDEX} here; not an archive written by `sgps pack`") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:  # JSONDecodeError, DocumentLimitError
        raise ConfigError(f"{index_file}: not a readable archive index ({error})") from None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        raise ConfigError(f"{index_file}: not an archive index written by `sgps pack`")
    if entry.get("version") != FORMAT_VERSION:
        raise ConfigError(f"{index_file}: archive format version {entry.get('version')!r}; this sgps reads "
                          f"version {FORMAT_VERSION}")  # fmt: skip
    try:
        index = ArchiveIndex(str(entry["kind"]), dict(entry["about"]), tuple(dict(m) for m in entry["members"]),
                             tuple(dict(p) for p in entry["parts"]), dict(entry["packed"]))  # fmt: skip
        for member in index.members:
            checked_member_path(str(member["path"]))
            _check_size_and_digest(member)
        for part in index.parts:
            if not _archive_file(str(part["name"])) or part["name"] == INDEX:
                raise ValueError(f"part name {part['name']!r}")
            _check_size_and_digest(part)
        for what, names in (("member", [m["path"] for m in index.members]), ("part", [p["name"] for p in index.parts])):
            if len(set(names)) != len(names):
                raise ValueError(f"a {what} named twice ({next(n for n in names if names.count(n) > 1)!r})")
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(f"{index_file}: a damaged archive index ({error})") from None
    if sum(int(member["bytes"]) for member in index.members) > MAX_UNPACKED_BYTES:
        raise ConfigError(f"{index_file}: the members add up to more than {MAX_UNPACKED_BYTES // 2**30} GiB")
    return index


def _check_size_and_digest(entry: Mapping[str, Any]) -> None:
    if not isinstance(entry["bytes"], int) or entry["bytes"] < 0:
        raise ValueError(f"size {entry['bytes']!r}")
    if not isinstance(entry["sha256"], str) or not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]):
        raise ValueError(f"digest {entry['sha256']!r}")


def read_members(archive: Path) -> tuple[ArchiveIndex, Iterator[Member]]:
    """The index and the members of `archive`, every part and member checked against the index.

    The parts are checked before the first member is returned; each member is checked as it
    is read, so a caller writes members to a temporary place and keeps them only once the
    iterator is exhausted without an error.
    """
    index = read_index(archive)
    stream = bytearray()
    for part in index.parts:
        path = archive / str(part["name"])
        try:
            with open_regular(path, "rb") as handle:
                data = handle.read(int(part["bytes"]) + 1)
        except FileNotFoundError:
            raise ConfigError(f"{path}: missing; the archive has {len(index.parts)} parts") from None
        except OSError as error:
            raise ConfigError(f"{path}: cannot read it ({error.strerror or error})") from None
        if len(data) != int(part["bytes"]) or hashlib.sha256(data).hexdigest() != part["sha256"]:
            raise ConfigError(f"{path}: its bytes differ from those the archive index records (a truncated, "
                              "edited or foreign part); copy the archive again")  # fmt: skip
        stream += data
    return index, _members(archive, index, bytes(stream))


def _members(archive: Path, index: ArchiveIndex, stream: bytes) -> Iterator[Member]:
    expected = {str(member["path"]): member for member in index.members}
    seen: set[str] = set()
    try:
        with lzma.LZMAFile(io.BytesIO(stream)) as xz, tarfile.open(fileobj=xz, mode="r|") as tar:
            for info in tar:
                record = expected.get(info.name)
                if not info.isfile() or record is None or info.name in seen or info.size != record["bytes"]:
                    raise ConfigError(f"{archive}: holds {info.name!r} as its index does not list it (another "
                                      "size, kind or a second copy); not an archive `sgps pack` wrote")  # fmt: skip
                handle = tar.extractfile(info)
                data = handle.read() if handle is not None else b""
                if len(data) != int(record["bytes"]) or hashlib.sha256(data).hexdigest() != record["sha256"]:
                    raise ConfigError(f"{archive}: member {info.name} differs from its digest in the index")
                seen.add(info.name)
                yield Member(info.name, data)
    except (lzma.LZMAError, tarfile.TarError, EOFError) as error:
        raise ConfigError(f"{archive}: not a readable archive stream ({error})") from None
    missing = sorted(expected.keys() - seen)
    if missing:
        raise ConfigError(f"{archive}: member {missing[0]} is listed in the index but not in the parts")


def extract_to_new_folder(
    archive: Path, out: Path, complete: Callable[[ArchiveIndex, Path], None] | None = None
) -> ArchiveIndex:
    """Unpack every member of `archive` into the new folder `out`, atomically.

    Every member is checked, and `complete` (given the index and the folder being built: it
    may add what the packer left out, or raise) has returned, before `out` appears.
    """

    def fill(building: Path) -> ArchiveIndex:
        index, members = read_members(archive)
        for member in members:
            write_member(building, member.path, member.data)
        if complete is not None:
            complete(index, building)
        return index

    return build_new_folder(out, fill, "unpack")


def build_new_folder(out: Path, fill: Callable[[Path], T], verb: str) -> T:
    """Make the new folder `out` with what `fill` writes into it, atomically; returns what `fill` returns.

    `fill` writes into a temporary folder beside `out`, which is renamed to `out` only once
    `fill` has returned: a failure or an interrupt leaves no half-made folder behind. `verb`
    names the operation in the refusal of an `out` that exists ("unpack", "fork"). An error
    that names a path inside the temporary folder, which is gone by the time it is read,
    names the path in `out` instead, the folder the user gave.
    """
    if out.exists() or out.is_symlink():
        raise ConfigError(f"{out}: already exists; {verb} into a new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{temporary_stem(out.name)}.", suffix=f".{verb}ing", dir=out.parent))
    try:
        result = fill(building)
        os.chmod(building, 0o777 & ~current_umask())
        os.rename(building, out)
    except (SgpsError, OSError) as error:
        shutil.rmtree(building, ignore_errors=True)
        renamed = _named_in(error, building, out)
        if renamed is error:
            raise
        raise renamed from None
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return result


def _named_in(error: SgpsError | OSError, building: Path, out: Path) -> SgpsError | OSError:
    """`error` with every mention of the temporary folder `building` made a mention of `out` (the same
    error when it names none)."""
    if isinstance(error, OSError):
        names = [str(name).replace(str(building), str(out)) if name is not None else None
                 for name in (error.filename, error.filename2)]  # fmt: skip
        if names == [error.filename, error.filename2]:
            return error
        return type(error)(error.errno, error.strerror, names[0], None, names[1])
    message = str(error)
    if str(building) not in message:
        return error
    renamed = message.replace(str(building), str(out))
    try:
        return type(error)(renamed)
    except TypeError:  # an error type built from other arguments than its message
        return ConfigError(renamed)


def write_member(root: Path, path: str, data: bytes) -> None:
    target = root.joinpath(*PurePosixPath(path).parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as handle:
        handle.write(data)
