"""Output paths, checked in one place before a command creates anything.

Every command that writes (`sgps generate`, `show --png`, `solve --gif`, `dataset`,
`train`, `test --gif`, `subgoals`, `compare`, `demo`, and the Python API's counterparts)
describes what it will write as `Output`s and passes them, with the inputs it reads, to
`check_outputs` before it creates a single file. A refusal therefore leaves the disk as
it was, and the same mistakes get the same message whichever command makes them:

- an empty path, the current folder or the root given where a file is to be written;
- an output that is also an input of the same command (``--out`` over ``--problems``);
- a folder where a file goes, a file where a folder goes, or a FIFO, device or socket
  (writing to a FIFO would block; replacing a device node would destroy it);
- a parent that is a file, or a folder the user may not write in;
- two outputs of one command on the same path;
- an existing result (a run, a dataset) without ``--overwrite``: the command says so;
- a folder that sgps made, links followed, written by a command that does not own it
  (`folder_kind`): an archive (``archive.json`` of ``sgps pack``) is sealed, and only
  ``sgps pack --overwrite`` replaces it whole; a run folder (``config.toml`` and
  ``checkpoints/``) and a comparison folder (``compare.toml`` and ``problems/``) are
  written only by the command that makes their kind (``train --out CMP``, ``--gif RUN``
  and ``demo --out RUN`` are refused), hold no comparison or archive, and keep their
  existing files (``sgps generate --out CMP/compare.toml``), except the ones the
  command keeps for that folder (a run's test record, a comparison's report), which
  are never written through a symbolic link (``curves.png`` linked to ``compare.toml``);
  a run may lie in a comparison's ``runs/`` but not in another run;
- an image whose name does not end in its format's suffix (``--gif lv/zz.txt`` would put
  a GIF named like a level file among the levels).

Files that a command keeps open beside its outputs (journals, locks, partial records)
are opened with `sgps.fileio.open_regular`, which refuses special files without blocking.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sgps.errors import ConfigError

FILE, FOLDER = "file", "folder"


@dataclass(frozen=True)
class Output:
    """One path a command will write: how the user named it, and what it must be.

    `kind`: `FILE` or `FOLDER`. `result`: an existing file or folder here is a finished
    result that only ``--overwrite`` may replace (`exists_as_result` says when a folder
    holds one). `replaces`: for a folder, the names inside it that the command deletes or
    rewrites; an input among them is refused (``--overwrite`` would delete it).
    `suffix`: the suffix a file's name must end in (an image's format, e.g. ``.gif``).
    `owner`: the kind of folder sgps makes (`RUN`, `COMPARISON`, `ARCHIVE`) that this
    output is (a folder: ``train --out`` is a run) or is a file of (a file: a run's test
    record, a comparison's report); empty for anything else (a level file, GIFs).
    `apart`: the output may neither lie inside an input nor hold one, links and ``..``
    resolved first (``sgps unpack A --out A/R``, ``sgps fork RUN --out LINK/F``).
    """

    option: str
    path: Path
    kind: str = FILE
    result: bool = False
    replaces: tuple[str, ...] = ()
    suffix: str = ""
    owner: str = ""
    apart: bool = False


#: The kinds of folder sgps makes, and the command that makes each.
RUN, COMPARISON, ARCHIVE = "run", "comparison", "archive"
MADE_BY = {RUN: "sgps train", COMPARISON: "sgps compare", ARCHIVE: "sgps pack"}
#: What marks each: a run folder's files (`sgps.runs.rundir.RUN_FILES`), a comparison's
#: (`sgps.experiments.packing.is_comparison`), an archive's index (`sgps.runs.archive.INDEX`),
#: whose first bytes name its format.
RUN_FOLDER_MARKERS = ("config.toml", "checkpoints")
COMPARISON_MARKERS = ("compare.toml", "problems")
COMPARISON_RUNS = "runs"
ARCHIVE_INDEX, ARCHIVE_FORMAT = "archive.json", b'"sgps-archive"'
_INDEX_HEAD_BYTES = 1 << 16


def check_outputs(
    outputs: Iterable[Output], inputs: Iterable[tuple[str, Path | None]] = (), *, overwrite: bool = False
) -> None:
    """Raise `ConfigError` naming the option and path of the first output that cannot be written as asked.

    `inputs`: (option, path) of what the same command reads (None: not given). Nothing
    is created here; the caller creates its outputs only after this returns.
    """
    outputs = list(outputs)
    given_inputs = [(option, Path(path)) for option, path in inputs if path is not None]
    for output in outputs:
        _check_name(output)
        _check_existing(output, overwrite)
        _check_replaced_link(output, overwrite)
        _check_parent(output)
        _check_inputs(output, given_inputs)
        _check_apart(output, given_inputs)
        _check_made_folders(output)
        _check_suffix(output)
    _check_distinct(outputs)


def exists_as_result(output: Output) -> bool:
    """Whether `output` already holds something that only ``--overwrite`` may replace."""
    if not output.result:
        return False
    if output.kind == FILE:
        return output.path.is_file()
    return any((output.path / name).exists() for name in output.replaces)


def _check_name(output: Output) -> None:
    text = str(output.path)
    if text in ("", "."):
        if output.kind == FILE:
            raise ConfigError(f"{output.option} needs a file name, not the current folder ({text!r})")
    elif output.path.name in ("", "..") and output.kind == FILE:  # the root, or a path ending in '..'
        raise ConfigError(f"{output.option} {text}: a folder, not a file name; name a file to write")
    if output.path.resolve() == Path(output.path.anchor or "/").resolve():
        raise ConfigError(f"{output.option} {text}: the root of the file system; name a {output.kind} to write")


def _check_existing(output: Output, overwrite: bool) -> None:
    path, option = output.path, output.option
    try:
        mode = path.stat().st_mode  # through a symbolic link: what would be written
    except FileNotFoundError:
        if path.is_symlink():
            raise ConfigError(f"{option} {path}: a symbolic link to nothing; remove it or name another path") from None
        return
    except NotADirectoryError:
        return  # a parent is a file: `_check_parent` names it
    except OSError as error:
        raise ConfigError(f"{option} {path}: cannot be read ({error.strerror or error})") from None
    if output.kind == FILE and stat.S_ISDIR(mode):
        raise ConfigError(f"{option} {path}: a folder stands there; name a file to write")
    if output.kind == FOLDER and not stat.S_ISDIR(mode):
        what = "a file" if stat.S_ISREG(mode) else _special(mode)
        raise ConfigError(f"{option} {path}: {what} stands there; name a folder")
    if output.kind == FILE and not stat.S_ISREG(mode):
        raise ConfigError(f"{option} {path}: {_special(mode)}, not a regular file; name a file to write")
    if exists_as_result(output) and not overwrite:
        raise ConfigError(f"{option} {path}: already holds a finished result; pass --overwrite to replace it, "
                          "or choose another path")  # fmt: skip


def _check_suffix(output: Output) -> None:
    if output.suffix and output.path.suffix.lower() != output.suffix:
        raise ConfigError(f"{output.option} {output.path}: the file is written as {output.suffix}, so its name must "
                          f"end in {output.suffix} (e.g. {output.path.with_suffix(output.suffix)})")  # fmt: skip


def folder_kind(folder: Path) -> str:
    """The kind of folder sgps made that `folder` is (`RUN`, `COMPARISON`, `ARCHIVE`); empty for any other."""
    try:
        if (folder / ARCHIVE_INDEX).is_file():
            with open(folder / ARCHIVE_INDEX, "rb") as index:  # a regular file: is_file followed any link
                if ARCHIVE_FORMAT in index.read(_INDEX_HEAD_BYTES):
                    return ARCHIVE
        if (folder / RUN_FOLDER_MARKERS[0]).is_file() and (folder / RUN_FOLDER_MARKERS[1]).is_dir():
            return RUN
        if (folder / COMPARISON_MARKERS[0]).is_file() and (folder / COMPARISON_MARKERS[1]).is_dir():
            return COMPARISON
    except OSError:  # unreadable: nothing sgps could have made and read back
        pass
    return ""


def made_folders_of(path: Path) -> list[tuple[Path, str]]:
    """The folders sgps made that `path` (links followed) is or lies in, innermost first, with their kinds."""
    target = path.resolve()
    return [(folder, kind) for folder in (target, *target.parents) if (kind := folder_kind(folder))]


def _check_made_folders(output: Output) -> None:
    """Only the command that makes a kind of folder writes into one of that kind (see the module's list)."""
    option, path, owner = output.option, output.path, output.owner
    target = path.resolve()
    made = made_folders_of(target)
    for folder, kind in made:
        if kind == ARCHIVE and not (owner == ARCHIVE and folder == target):
            raise ConfigError(f"{option} {path} lies in the archive {folder} (links followed): an archive is only "
                              "unpacked (sgps unpack) or replaced whole (sgps pack --overwrite); choose a path "
                              "outside it")  # fmt: skip
    if made and made[0][0] == target:
        kind = made[0][1]
        if output.kind == FOLDER and owner != kind:
            makes = f"it makes a {owner} folder" if owner else "its files would mix with the folder's own"
            raise ConfigError(f"{option} {path} is a {kind} folder ({MADE_BY[kind]} made it; links followed), and "
                              f"{makes}; choose another folder")  # fmt: skip
        made = made[1:]
    if not made:
        return
    holder, kind = made[0]  # the innermost folder that the output lies in
    in_runs = kind == COMPARISON and _inside(target, holder / COMPARISON_RUNS)  # where a comparison keeps its runs
    if output.kind == FOLDER and owner in (RUN, COMPARISON, ARCHIVE) and not (owner == RUN and in_runs):
        raise ConfigError(f"{option} {path} lies inside the {kind} folder {holder} (links followed): a {owner} "
                          "folder needs a folder of its own; choose one outside it")  # fmt: skip
    if output.kind == FILE and owner == kind and path.is_symlink():
        raise ConfigError(f"{option} {path}: a symbolic link (to {target}); the {kind} folder {holder} keeps its own "
                          "file here; remove the link")  # fmt: skip
    if output.kind == FILE and owner != kind and target.is_file():
        raise ConfigError(f"{option} {path} is a file of the {kind} folder {holder} (followed through any link): "
                          f"writing it would replace the {kind}'s own file; choose a path outside it")  # fmt: skip


def _check_parent(output: Output) -> None:
    """The nearest existing ancestor must be a folder this process may write in."""
    path = output.path.absolute()
    parent = path.parent
    while not os.path.lexists(parent):
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{output.option} {output.path}: {parent} is a file, so nothing can be created under it")
    if os.path.lexists(path) and output.kind == FOLDER:
        parent = path  # an existing folder: its own files are what gets written
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{output.option} {output.path}: no permission to write in {parent}")


def _check_inputs(output: Output, inputs: Sequence[tuple[str, Path]]) -> None:
    for option, path in inputs:
        if _same_path(output.path, path):
            raise ConfigError(f"{output.option} {output.path} is also the {option} input: writing it would "
                              "destroy what the command reads; choose another path")  # fmt: skip
        if output.kind == FILE and path.is_dir() and output.path.exists() and _inside(output.path, path):
            raise ConfigError(f"{output.option} {output.path} is a file of the {option} input {path} (followed "
                              "through any link): writing it would replace what the command reads; choose a "
                              "new file name")  # fmt: skip
        for name in output.replaces:
            replaced = output.path / name
            if _same_path(replaced, path) or _inside(path, replaced):
                raise ConfigError(f"{option} {path} lies in {replaced}, which {output.option} {output.path} "
                                  "replaces; move it out first")  # fmt: skip


def _check_apart(output: Output, inputs: Sequence[tuple[str, Path]]) -> None:
    if not output.apart:
        return
    for option, path in inputs:
        if _inside(output.path, path) or _inside(path, output.path):
            raise ConfigError(f"{output.option} {output.path} lies inside the {option} input {path} (or holds it; "
                              "links and '..' followed): it would be made inside what the command reads; choose a "
                              "folder beside it")  # fmt: skip


def _check_replaced_link(output: Output, overwrite: bool) -> None:
    """A folder result that ``--overwrite`` replaces is named by itself, not through a symbolic link (which the
    command would otherwise replace by a folder, leaving its target as it was)."""
    if output.kind == FOLDER and overwrite and output.path.is_symlink() and exists_as_result(output):
        raise ConfigError(f"{output.option} {output.path}: a symbolic link to {output.path.resolve()}; name that "
                          "folder itself to replace what it holds")  # fmt: skip


def _check_distinct(outputs: Sequence[Output]) -> None:
    for index, output in enumerate(outputs):
        for other in outputs[index + 1 :]:
            if _same_path(output.path, other.path):
                raise ConfigError(f"{output.option} and {other.option} name the same path ({output.path}); "
                                  "give each its own")  # fmt: skip


def _same_path(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def _inside(path: Path, folder: Path) -> bool:
    return folder.resolve() in path.resolve().parents


def _special(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"
