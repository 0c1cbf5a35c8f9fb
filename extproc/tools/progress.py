"""Progress on a terminal for the long offline steps (`extproc eval`, `train-*`).

A status line on stderr, rewritten in place, only while stderr is a terminal: a log file, a pipe
or CI gets exactly the output it got before. `Progress` counts items (cases evaluated, with the
time left at the rate so far); `heartbeat` is for steps that do not count, such as training: it
redraws the elapsed time and the last line the step printed, every second, and keeps its line
below the step's own output.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

_CLEAR = "\r\x1b[K"  # back to the line's start and erase it


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """`what: 120/2985 (4%), 0m31s, about 12m10s left`, redrawn at most every `interval_s`."""

    def __init__(
        self,
        what: str,
        total: int,
        *,
        stream: TextIO | None = None,
        interval_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.total, self.done = what, total, 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = is_terminal(self.stream)
        self.interval_s, self.clock = interval_s, clock
        self.started = clock()
        self._drawn_at: float | None = None

    def line(self) -> str:
        elapsed = self.clock() - self.started
        text = f"{self.what}: {self.done}/{self.total}"
        if self.total:
            text += f" ({100 * self.done // self.total}%)"
        text += f", {_clock(elapsed)}"
        if 0 < self.done < self.total:
            text += f", about {_clock(elapsed / self.done * (self.total - self.done))} left"
        return text

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = self.clock()
        due = self._drawn_at is None or now - self._drawn_at >= self.interval_s or self.done >= self.total
        if self.enabled and due:
            self._drawn_at = now
            self.stream.write(_CLEAR + self.line())
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._drawn_at is not None:
            self.stream.write(_CLEAR)
            self.stream.flush()


class _Status:
    """The heartbeat's line: whether it is drawn, whether the step's output stands at a line start
    (only there may it be drawn, or it would cut a line in two), and the step's last line."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.drawn = False
        self.at_line_start = True
        self.last = ""


class _BelowStatus(io.TextIOBase):
    """Stands in for stderr while a heartbeat runs: a write first erases the status line."""

    def __init__(self, stream: TextIO, status: _Status) -> None:
        self.stream, self.status = stream, status

    def write(self, text: str) -> int:
        status = self.status
        with status.lock:
            if status.drawn and text:
                self.stream.write(_CLEAR)
                status.drawn = False
            self.stream.write(text)
            self.stream.flush()
            if text:
                status.at_line_start = text.endswith("\n")
            lines = [line for line in text.splitlines() if line.strip()]
            if lines:
                status.last = lines[-1].strip()
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return True


@contextlib.contextmanager
def heartbeat(what: str, *, interval_s: float = 1.0) -> Iterator[None]:
    """While the block runs on a terminal: `what: 1m23s (last line printed)` below its output."""
    stream = sys.stderr
    if not is_terminal(stream):
        yield
        return
    status, stop = _Status(), threading.Event()
    started = time.monotonic()

    def draw() -> None:
        while not stop.wait(interval_s):
            with status.lock:
                if not status.at_line_start:
                    continue
                last = f" ({status.last[:70]})" if status.last else ""
                stream.write(f"{_CLEAR}{what}: {_clock(time.monotonic() - started)}{last}")
                stream.flush()
                status.drawn = True

    ticker = threading.Thread(target=draw, name="heartbeat", daemon=True)
    sys.stderr = _BelowStatus(stream, status)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()
        sys.stderr = stream
        if status.drawn:
            stream.write(_CLEAR)
            stream.flush()
