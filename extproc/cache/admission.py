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
  is the share of recent wall time the event-loop thread spent on a CPU (`LoopLoad`), at or
  over `admission_busy`; only busy-time first sightings are remembered.

Sightings are bounded by `admission_window` (least recently seen go first) and are per
process: each worker and each replica keeps its own.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from extproc.cache.backends import FloatArray, VectorGroup
from extproc.cache.keys import CacheKey


class Sightings:
    """Requests seen and not (yet) admitted, by partition and context."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._order: OrderedDict[str, tuple[str, str]] = OrderedDict()  # exact key -> (partition, context)
        self._groups: dict[tuple[str, str], VectorGroup] = {}

    def __len__(self) -> int:
        return len(self._order)

    def seen_before(self, key: CacheKey, vector: FloatArray, floor: float) -> bool:
        """True when `key` (exactly, or by a candidate score >= `floor`) was seen before;
        otherwise remember it and return False."""
        group_key = (key.partition, key.context)
        with self._lock:
            if key.exact in self._order:
                self._order.move_to_end(key.exact)
                return True
            group = self._groups.get(group_key)
            if group is not None and group.keys:
                ((near, score),) = group.best(vector, 1)
                if score >= floor:
                    self._order.move_to_end(near)
                    return True
            if group is None:
                group = self._groups[group_key] = VectorGroup(vector.shape[0])
            group.add(key.exact, vector)
            self._order[key.exact] = group_key
            while len(self._order) > self.capacity:
                old, old_group_key = self._order.popitem(last=False)
                old_group = self._groups[old_group_key]
                old_group.remove(old)
                if not old_group.keys:
                    del self._groups[old_group_key]
            return False


class LoopLoad:
    """How busy the calling thread has been: the share of wall time it spent running on a CPU,
    over windows of at least `window_s`, as the lower of the last two closed windows, so that
    one busy stretch (a model loading on first use, a policy reload) does not read as load.

    Read it from one thread (the event loop's): `time.thread_time` counts that thread alone, so
    model threads and gRPC's poller do not make the loop look busy. A window is closed by the
    first reading after it ends, so an idle stretch with no readings reads as idle; the first
    reading opens the first window (start-up work is never counted). Between closings a
    reading costs one monotonic clock call."""

    def __init__(
        self,
        window_s: float = 0.25,
        *,
        wall: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.thread_time,
    ) -> None:
        self.window_s = window_s
        self._wall = wall
        self._cpu = cpu
        self._started: float | None = None
        self._cpu_started = 0.0
        self._last = 0.0  # the last closed window's share
        self.share = 0.0  # the lower of the last two closed windows' shares

    def read(self) -> float:
        now = self._wall()
        if self._started is None:
            self._started, self._cpu_started = now, self._cpu()
            return self.share
        elapsed = now - self._started
        if elapsed >= self.window_s:
            cpu_now = self._cpu()
            window = min(max((cpu_now - self._cpu_started) / elapsed, 0.0), 1.0)
            self.share = min(window, self._last)
            self._last = window
            self._started, self._cpu_started = now, cpu_now
        return self.share
