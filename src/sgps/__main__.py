"""The `sgps` program (``sgps ...`` and ``python -m sgps ...``).

Importing the command line (PyTorch, numpy, the domains) takes seconds; a stop signal in
that time (Ctrl-C, SIGTERM, SIGHUP) ends the program as one during a command does: one
line on stderr and 128 + the signal's number, instead of a `KeyboardInterrupt` traceback
or a silent death. Nothing has been written by then, so the program ends on the spot.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import NoReturn

#: The signals that stop the program, and the line each prints (as `sgps.cli.main` words them).
_STOPS = {signal.SIGINT: "sgps: interrupted", signal.SIGTERM: "sgps: stopped by SIGTERM",
          signal.SIGHUP: "sgps: stopped by SIGHUP"}  # fmt: skip


def _stop_while_starting(number: int, _frame: FrameType | None) -> None:
    os.write(2, f"{_STOPS[signal.Signals(number)]}\n".encode())
    os._exit(128 + number)


def run() -> NoReturn:
    """Import the command line under `_stop_while_starting`, then run it with the handlers it expects."""
    previous = {number: signal.signal(number, _stop_while_starting) for number in _STOPS}
    from sgps.cli import main

    for number, handler in previous.items():
        signal.signal(number, handler)
    sys.exit(main())


if __name__ == "__main__":
    run()
