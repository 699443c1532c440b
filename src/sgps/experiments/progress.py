"""One progress display for a whole comparison.

On a terminal, a block of lines (runs done / running / waiting, then one line per
running run) is redrawn in place. Elsewhere (a log file, CI) the same block is printed
as plain lines when it changes, at most once per `interval` seconds, and events (a
run started, finished or failed) are printed as they happen.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TextIO

_UP_AND_CLEAR = "\x1b[{}F\x1b[J"  # cursor up N lines to column 0, clear to the end of the screen


class ProgressDisplay:
    """Shows a comparison's status block and its events on `stream`."""

    def __init__(self, stream: TextIO, *, tty: bool | None = None, interval: float = 60.0) -> None:
        """`tty`: redraw in place (default: whether `stream` is a terminal)."""
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.interval = interval
        self._drawn = 0  # lines of the block on screen (terminal mode)
        self._last: Sequence[str] = ()
        self._printed_at = float("-inf")

    def event(self, text: str) -> None:
        """A line that stays: printed above the status block."""
        self._erase()
        print(text, file=self.stream, flush=True)
        self._redraw(self._last)

    def status(self, lines: Sequence[str]) -> None:
        """Replace the status block."""
        if self.tty:
            self._erase()
            self._redraw(lines)
        elif list(lines) != list(self._last) and time.monotonic() - self._printed_at >= self.interval:
            print("\n".join(lines), file=self.stream, flush=True)
            self._printed_at = time.monotonic()
        self._last = list(lines)

    def close(self) -> None:
        """Leave the last block on screen (terminal mode)."""
        self._drawn = 0

    def _erase(self) -> None:
        if self.tty and self._drawn:
            self.stream.write(_UP_AND_CLEAR.format(self._drawn))
            self._drawn = 0

    def _redraw(self, lines: Sequence[str]) -> None:
        if self.tty and lines:
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()
            self._drawn = len(lines)
