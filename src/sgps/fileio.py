"""Atomic file writes: a reader never sees a half-written file.

Every file the project produces (level sets, images, configs, checkpoints) is written
to a temporary file in the target folder, flushed, and renamed over the target. The
file gets the permissions a plainly created file would (0666 less the umask), not the
private 0600 of the temporary file.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path


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
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
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


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write UTF-8 `text` to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def current_umask() -> int:
    """The process's file-creation mask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
