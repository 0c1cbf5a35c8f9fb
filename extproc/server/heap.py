"""Keep Python's cyclic garbage collector off what lives as long as the process.

Loaded models, tokenizers, the policy and the gRPC machinery are several hundred thousand Python
objects. Left in the collector's oldest generation, every full collection walks all of them:
measured on the default policy, 0.02-0.3 s per collection, several a minute under load, all of
it on the event loop. `settle()` collects once and then freezes what is alive (`gc.freeze`), so
later collections walk only what requests created.

Frozen objects are still freed by reference counting; only cycles among them outlive their use.
So the heap is settled when no request is in flight: once before the server reports SERVING,
and, after a model loaded on first use or a policy reload, at the next quiet moment
(`Settler`); a reload thaws first, so cycles in the dropped policy are freed. Freezing while
requests run would make their cyclic garbage (a failed task's traceback holding an image body)
immortal.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger("extproc.heap")


def settle(reason: str) -> None:
    """Collect now, then move every surviving object out of the collector's sight."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    took_ms = round((time.perf_counter() - started) * 1e3, 1)
    log.debug("heap settled", extra={"reason": reason, "frozen": gc.get_freeze_count(), "ms": took_ms})


def resettle(reason: str) -> None:
    """After something long-lived was replaced: let the collector see everything once, so
    cycles in what was dropped are freed, then freeze again."""
    gc.unfreeze()
    settle(reason)


class Settler:
    """Settles the heap at the next quiet moment: `request` from any thread (a model loader, a
    reload), `when_idle` from the event loop when no stream is in flight."""

    def __init__(self) -> None:
        self.pending: str | None = None
        self.thaw = False

    def request(self, reason: str, *, thaw: bool = False) -> None:
        self.thaw = self.thaw or thaw
        self.pending = reason

    def when_idle(self) -> None:
        reason, thaw = self.pending, self.thaw
        if reason is None:
            return
        self.pending, self.thaw = None, False
        if thaw:
            resettle(reason)
        else:
            settle(reason)
