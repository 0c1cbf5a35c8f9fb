"""LoopLoad, the gauge behind `admission: adaptive`: fake clocks for the arithmetic, and the
real thread clock to show that it sees a busy thread and not a sleeping one."""

from __future__ import annotations

import time

import pytest

from extproc.cache.admission import LoopLoad


class Clocks:
    """A wall clock and a thread CPU clock the test moves by hand."""

    def __init__(self) -> None:
        self.wall = 100.0
        self.cpu = 5.0

    def spend(self, wall_s: float, busy: float) -> None:
        self.wall += wall_s
        self.cpu += wall_s * busy


def gauge(clocks: Clocks, window_s: float = 0.25) -> LoopLoad:
    return LoopLoad(window_s, wall=lambda: clocks.wall, cpu=lambda: clocks.cpu)


def test_sustained_load_reads_busy_and_idle_time_reads_idle() -> None:
    clocks = Clocks()
    load = gauge(clocks)
    assert load.read() == 0.0  # the first reading opens the first window: nothing counted before it
    for _ in range(3):
        clocks.spend(0.3, busy=0.8)
        load.read()
    assert load.read() == pytest.approx(0.8)
    # Idle with no readings at all: the next reading closes one long idle window.
    clocks.spend(5.0, busy=0.0)
    assert load.read() == 0.0


def test_one_busy_window_alone_is_not_load() -> None:
    """A model loading on first use or a reload keeps the loop busy once; that is not load."""
    clocks = Clocks()
    load = gauge(clocks)
    load.read()
    clocks.spend(0.3, busy=0.05)
    load.read()
    clocks.spend(2.0, busy=1.0)  # one long stretch of work
    assert load.read() == pytest.approx(0.05)
    clocks.spend(0.3, busy=0.05)
    assert load.read() == pytest.approx(0.05)
    # Two busy windows in a row are.
    clocks.spend(0.3, busy=0.9)
    load.read()
    clocks.spend(0.3, busy=0.7)
    assert load.read() == pytest.approx(0.7)


def test_readings_inside_a_window_do_not_close_it() -> None:
    clocks = Clocks()
    load = gauge(clocks)
    load.read()
    for _ in range(10):  # 10 x 20 ms: still inside the first 250 ms window
        clocks.spend(0.02, busy=1.0)
        assert load.read() == 0.0
    clocks.spend(0.1, busy=1.0)
    load.read()  # closes the first window (300 ms, all busy); the one before it counts as idle
    assert load.share == 0.0
    clocks.spend(0.3, busy=1.0)
    assert load.read() == pytest.approx(1.0)


def test_the_share_is_bounded_whatever_the_clocks_say() -> None:
    clocks = Clocks()
    load = gauge(clocks)
    load.read()
    for _ in range(2):
        clocks.spend(0.3, busy=3.0)  # a CPU clock that ran ahead of the wall clock
        load.read()
    assert load.read() == 1.0


def test_the_real_thread_clock_tells_a_busy_thread_from_a_sleeping_one() -> None:
    load = LoopLoad(0.05)
    load.read()
    for _ in range(3):
        time.sleep(0.06)
        load.read()
    assert load.read() < 0.2
    for _ in range(3):
        until = time.monotonic() + 0.06
        while time.monotonic() < until:  # this thread on a CPU the whole window
            pass
        load.read()
    # Not 1.0: the test's own thread may be descheduled on a shared machine, and the CPU clock
    # counts only time on a CPU; well above the sleeping figure shows it sees the work.
    assert load.read() > 0.3
