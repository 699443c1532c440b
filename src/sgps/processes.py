"""Processes that sgps starts end with the command that started them, without a word.

A command killed outright (SIGKILL, the out-of-memory killer) cannot stop the processes it
started: the search processes of `sgps.execution.pool` and the solver processes of a HIPS-ε
dataset build (`sgps.training.methods.hips.dataset`). Each of them therefore watches the
sentinel multiprocessing gives a child (a pipe that only the parent holds open) and ends as
soon as its parent is gone, printing nothing: nobody reads what it finds, and tracebacks of
its broken pipes would only bury the command's last line.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from multiprocessing.connection import wait
from typing import NoReturn


def parent_sentinel() -> int:
    """What multiprocessing gave this process to watch its parent by: ready to read once the parent has ended."""
    parent = multiprocessing.parent_process()
    assert parent is not None, "a process that multiprocessing started"
    return parent.sentinel


def leave_quietly() -> NoReturn:
    """End this process now, printing nothing (its parent is gone)."""
    os._exit(1)


def end_with_parent() -> None:
    """Watch the parent from a thread of this process and end the process as soon as the parent is gone,
    even one that was gone before this was called."""
    sentinel = parent_sentinel()

    def watch() -> None:
        wait([sentinel])
        leave_quietly()

    threading.Thread(target=watch, name="sgps-parent-watch", daemon=True).start()
