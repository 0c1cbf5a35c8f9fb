"""Progress lines appear on a terminal and nowhere else; the heartbeat keeps below the step's own
output and puts stderr back."""

from __future__ import annotations

import io
import sys
import time

import pytest

from extproc.tools.progress import Progress, heartbeat


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_counts_with_the_time_left_on_a_terminal() -> None:
    now = [0.0]
    out = Terminal()
    progress = Progress("extproc eval", 10, stream=out, interval_s=0.0, clock=lambda: now[0])
    for _ in range(4):
        now[0] += 2.0
        progress.advance()
    assert progress.line() == "extproc eval: 4/10 (40%), 8s, about 12s left"
    progress.close()
    text = out.getvalue()
    assert "extproc eval: 1/10 (10%), 2s, about 18s left" in text and text.endswith("\r\x1b[K")


def test_progress_writes_nothing_off_a_terminal() -> None:
    out = io.StringIO()
    progress = Progress("extproc eval", 3, stream=out, interval_s=0.0)
    for _ in range(3):
        progress.advance()
    progress.close()
    assert out.getvalue() == ""


def test_heartbeat_redraws_below_the_steps_output(monkeypatch: pytest.MonkeyPatch) -> None:
    out = Terminal()
    monkeypatch.setattr(sys, "stderr", out)
    with heartbeat("extproc train-domain", interval_s=0.01):
        print("stage 1 on the held-out fold", file=sys.stderr)
        time.sleep(0.1)
    assert sys.stderr is out
    text = out.getvalue()
    assert "stage 1 on the held-out fold\n" in text
    assert "extproc train-domain: 0s (stage 1 on the held-out fold)" in text
    assert text.endswith("\r\x1b[K")


def test_heartbeat_leaves_a_pipe_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    with heartbeat("extproc train-classifier", interval_s=0.01):
        print("rows 10", file=sys.stderr)
        time.sleep(0.05)
    assert out.getvalue() == "rows 10\n"
