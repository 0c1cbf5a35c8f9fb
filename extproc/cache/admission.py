"""Admission: which misses are worth storing.

Every stored answer costs the response phase a second ext_proc stream (CPU on the router and
on Envoy) plus memory, and most LLM traffic is never repeated. Three modes:

- `first` stores every complete answer: the second ask hits.
- `repeat` stores an answer only when the request, or one close to it, was already seen once.
  A request's first sighting is remembered here, in this process, as its exact key and its
  cheap candidate vector; the second sighting (the same exact key, or a candidate score >= the
  decision's similarity - `candidate_margin`, under the same partition and context) is stored,
  and the third is a hit. The cheap score alone admits: admission only spends effort, it never
  serves an answer, so no MiniLM check is needed.
- `adaptive` (the default) is `first` while the router has headroom and `repeat` while it is
  busy: a store is optional work, and a saturated router that stores every one-off answer
  gives up about a third of its throughput to the store phase (bench/bench_cache.py). "Busy"
  (`ServerLoad`) is the event loop working, this process using a core, or the CPU (the
  cgroup's quota, else the host's) in use, for at least `admission_busy` of the recent time;
  only busy-time first sightings are remembered.

Sightings are bounded by `admission_window` (least recently seen go first) and are per
process: each worker and each replica keeps its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extproc.cache.backends import FloatArray, VectorGroup
from extproc.cache.keys import CacheKey
from extproc.models.lru import LruCache


class Sightings:
    """Requests seen and not (yet) admitted, by partition and context."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()  # the order and the vector groups change together
        self._order: LruCache[tuple[str, str]] = LruCache(capacity)  # exact key -> (partition, context)
        self._groups: dict[tuple[str, str], VectorGroup] = {}

    def __len__(self) -> int:
        return len(self._order)

    def seen_before(self, key: CacheKey, vector: FloatArray, floor: float) -> bool:
        """True when `key` (exactly, or by a candidate score >= `floor`) was seen before;
        otherwise remember it and return False."""
        group_key = (key.partition, key.context)
        with self._lock:
            if self._order.touch(key.exact):
                return True
            group = self._groups.get(group_key)
            if group is not None and group.keys:
                ((near, score),) = group.best(vector, 1)
                if score >= floor:
                    self._order.touch(near)
                    return True
            if group is None:
                group = self._groups[group_key] = VectorGroup(vector.shape[0])
            group.add(key.exact, vector)
            for old, old_group_key in self._order.put(key.exact, group_key):
                old_group = self._groups[old_group_key]
                old_group.remove(old)
                if not old_group.keys:
                    del self._groups[old_group_key]
            return False


class _IdleClock:
    """Seconds an asyncio event loop has spent waiting in its selector (idle), counted by a
    wrapper around the selector's `select`: two monotonic clock calls a loop iteration."""

    def __init__(self, select: Callable[..., Any]) -> None:
        self.idle_s = 0.0
        self._select = select

    def select(self, timeout: float | None = None) -> Any:
        started = time.monotonic()
        try:
            return self._select(timeout)
        finally:
            self.idle_s += time.monotonic() - started


_IDLE_CLOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _IdleClock] = weakref.WeakKeyDictionary()


def loop_idle_clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float] | None:
    """A reader of `loop`'s idle seconds so far, or None when the loop has no Python selector
    to time (uvloop). One wrapper a loop, however many readers."""
    clock = _IDLE_CLOCKS.get(loop)
    if clock is None:
        selector = getattr(loop, "_selector", None)  # asyncio's selector event loops (private, stable)
        select = getattr(selector, "select", None)
        if selector is None or select is None:
            return None
        clock = _IDLE_CLOCKS[loop] = _IdleClock(select)
        selector.select = clock.select
    return lambda: clock.idle_s


Counter = Callable[[], tuple[float, float]]  # cumulative (busy seconds, capacity seconds)


def loop_counter(loop: asyncio.AbstractEventLoop | None = None) -> Counter:
    """The event loop's working time: wall time not spent waiting in its selector. On a loop
    without a Python selector (uvloop), the calling thread's CPU time, which under-reads a host
    short of CPU (a thread waiting for a CPU is not counted)."""
    try:
        idle = loop_idle_clock(loop or asyncio.get_running_loop())
    except RuntimeError:  # not on a loop
        idle = None
    if idle is None:

        def thread_cpu() -> tuple[float, float]:
            return time.thread_time(), time.monotonic()

        return thread_cpu

    def working() -> tuple[float, float]:
        now = time.monotonic()
        return now - idle(), now

    return working


def cpu_counter(cgroup: Path = Path("/sys/fs/cgroup"), proc_stat: Path = Path("/proc/stat")) -> Counter:
    """The CPU this process may use: its cgroup's (v2: `cpu.stat` usage against the `cpu.max`
    quota, as a Kubernetes CPU limit sets) when it has a quota, else the whole host's (the
    first line of /proc/stat: every tick not idle or waiting on I/O)."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        cores = float(quota) / float(period)  # "max": no quota -> ValueError
        (cgroup / "cpu.stat").read_text()
    except (OSError, ValueError):
        cores = 0.0
    if cores > 0:

        def cgroup_usage() -> tuple[float, float]:
            for line in (cgroup / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6, time.monotonic() * cores
            return 0.0, time.monotonic() * cores

        return cgroup_usage
    hertz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def host_ticks() -> tuple[float, float]:
        with proc_stat.open() as fh:
            ticks = [int(v) for v in fh.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
        total = sum(ticks)
        return (total - ticks[3] - ticks[4]) / hertz, total / hertz

    try:
        host_ticks()
    except (OSError, ValueError, IndexError):  # not Linux: no CPU reading, the other two decide

        def nothing() -> tuple[float, float]:
            return 0.0, time.monotonic()

        return nothing
    return host_ticks


def process_counter() -> tuple[float, float]:
    """This process's CPU time against one core: a Python server's handlers share one GIL, so
    a process using most of a core is saturated however many cores the host has (on a large
    host the CPU counter alone would never read busy)."""
    return time.process_time(), time.monotonic()


class ServerLoad:
    """How busy the server is, for work that is optional (a speculative cache store): over
    windows of at least `window_s`, the largest of three shares, the event loop's working time
    (`loop_counter`), this process's CPU against one core (`process_counter`), and the CPU in
    use (`cpu_counter`: the host's CPUs can be saturated by Envoy and the rest while this
    process waits for them, and every store costs CPU there too); reported as the lower of the
    last two closed windows, so that one busy stretch (a model loading on first use, a policy
    reload) does not read as load.

    Measured under bench_cache's saturation on 2 cores: the loop's share stays low (its waits
    for the GIL count as idle), the process's and the host's read busy.

    The first reading, on the loop, sets up the counters and opens the first window, so
    start-up work is never counted. A window is closed by the first reading after it ends, so
    an idle stretch with no readings reads as one idle window. Between closings a reading
    costs one monotonic clock call."""

    def __init__(
        self,
        window_s: float = 0.25,
        *,
        counters: list[Counter] | None = None,
        wall: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_s = window_s
        self._counters = counters
        self._wall = wall
        self._window_started: float | None = None
        self._marks: list[tuple[float, float]] = []
        self._last = 0.0  # the last closed window's share
        self.share = 0.0  # the lower of the last two closed windows' shares

    def read(self) -> float:
        now = self._wall()
        if self._window_started is None:
            if self._counters is None:
                self._counters = [loop_counter(), process_counter, cpu_counter()]
            self._window_started = now
            self._marks = [self._mark(count, (0.0, 0.0)) for count in self._counters]
            return self.share
        if now - self._window_started >= self.window_s:
            assert self._counters is not None
            marks = [self._mark(count, before) for count, before in zip(self._counters, self._marks, strict=True)]
            window = 0.0
            for (busy, capacity), (busy_before, capacity_before) in zip(marks, self._marks, strict=True):
                if capacity > capacity_before:
                    window = max(window, min(max((busy - busy_before) / (capacity - capacity_before), 0.0), 1.0))
            self.share = min(window, self._last)
            self._last = window
            self._window_started, self._marks = now, marks
        return self.share

    @staticmethod
    def _mark(count: Counter, before: tuple[float, float]) -> tuple[float, float]:
        """A counter's reading; `before` (no change: it adds no load) when it fails, e.g. a
        cgroup file gone. A gauge for optional work must never fail a request."""
        try:
            return count()
        except (OSError, ValueError, IndexError):
            return before
