"""How late the event loop runs: how long a message Envoy sent has already waited when the
servicer first sees it.

Envoy's ext_proc message timeout starts when Envoy sends the message; the server's request
deadline starts when the servicer reads it. In between, the message waits its turn on the one
event loop, behind whatever else is ready (other requests' parsing, OCR threads holding the
GIL, another process on the host's cores). Under load that wait grows past the margin between
the two (ops/envoy_config/options.py ANSWER_MARGIN_S) and Envoy answers 504 before the server's own
overload answer (429, or a fail-safe route) could. A heartbeat that asks to wake every
`interval_s` and notes how late it woke queues behind the same work, so its lateness estimates
that wait; the servicer dates a message's arrival back by it, and the deadline then ends about
when Envoy's clock says it should.
"""

from __future__ import annotations

import asyncio
import contextlib


class LoopLag:
    """The event loop's lateness, from a heartbeat task: `start` on the loop, `stop` at shutdown."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.lag_s = 0.0  # how late the latest heartbeat woke
        self._due = 0.0  # when the next heartbeat is due, in loop time; 0: not running
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._beat(), name="loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._due, self.lag_s = 0.0, 0.0
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def estimate(self) -> float:
        """Seconds the loop runs behind now (call it on the loop): the latest heartbeat's lateness,
        or how overdue the next one already is, whichever is more (a loop that has not yet run its
        heartbeat is behind before any beat can say so)."""
        if not self._due:
            return 0.0
        overdue = asyncio.get_running_loop().time() - self._due
        return max(self.lag_s, overdue, 0.0)

    async def _beat(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._due = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.lag_s = max(0.0, loop.time() - self._due)
