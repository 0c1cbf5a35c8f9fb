"""A child armed with `die_with_parent` ends when its parent ends, even when the parent is killed
outright; an unarmed one (what the stack's children were) outlives it, which is what the arming
is for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from extproc.server.children import die_with_parent, parent_death_signal_supported

pytestmark = pytest.mark.skipif(not parent_death_signal_supported(), reason="needs Linux prctl")

# A parent that starts a sleeping child in a session of its own (as the stack does), prints the
# child's pid, and waits to be killed.
PARENT = """
import subprocess, sys, time
from extproc.server.children import die_with_parent
armed = sys.argv[1] == "armed"
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                         preexec_fn=die_with_parent() if armed else None)
print(child.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _child_of_killed_parent(mode: str) -> int:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, mode], stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    parent.stdout.close()
    return child


def test_an_armed_child_ends_when_its_parent_is_killed() -> None:
    child = _child_of_killed_parent("armed")
    assert _gone_within(child, 10)


def test_an_unarmed_child_outlives_its_killed_parent() -> None:
    child = _child_of_killed_parent("unarmed")
    try:
        assert not _gone_within(child, 1.0)
    finally:
        os.kill(child, signal.SIGKILL)


def test_not_armed_off_the_main_thread() -> None:
    # The kernel signals when the forking thread ends: a worker thread's child would die with it.
    found: list[object] = []
    worker = threading.Thread(target=lambda: found.append(die_with_parent()))
    worker.start()
    worker.join()
    assert found == [None]
    assert die_with_parent() is not None
