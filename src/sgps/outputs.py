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
- an existing file of a run folder (a folder with ``config.toml`` and ``checkpoints/``,
  links followed), unless the output is one of the run's own files that the command
  keeps (a test record): ``sgps generate --out RUN/checkpoints/best.safetensors``;
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
    `run_file`: the file is one a run keeps for itself (a test record, its journal), so it
    may replace an existing file of a run folder.
    `apart`: the output may neither lie inside an input nor hold one, links and ``..``
    resolved first (``sgps unpack A --out A/R``, ``sgps fork RUN --out LINK/F``).
    """

    option: str
    path: Path
    kind: str = FILE
    result: bool = False
    replaces: tuple[str, ...] = ()
    suffix: str = ""
    run_file: bool = False
    apart: bool = False


#: What makes a folder a run folder, as `sgps train` makes it (`sgps.runs.rundir.RUN_FILES`).
RUN_FOLDER_MARKERS = ("config.toml", "checkpoints")


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
        _check_run_file(output)
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


def _check_run_file(output: Output) -> None:
    """An existing file of a run folder is the run's: only the run's own outputs replace it."""
    if output.kind != FILE or output.run_file or not output.path.is_file():
        return
    run = run_folder_of(output.path)
    if run is not None:
        raise ConfigError(f"{output.option} {output.path} is a file of the run folder {run} (followed "
                          "through any link): writing it would replace the run's own file; choose a path outside "
                          "the run")  # fmt: skip


def run_folder_of(path: Path) -> Path | None:
    """The run folder (`RUN_FOLDER_MARKERS`) that `path`, links followed, lies in; None when none does."""
    for folder in path.resolve().parents:
        if (folder / RUN_FOLDER_MARKERS[0]).is_file() and (folder / RUN_FOLDER_MARKERS[1]).is_dir():
            return folder
    return None


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
