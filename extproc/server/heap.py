"""Keep Python's cyclic garbage collector off what lives as long as the process.

Loaded models, tokenizers, the policy and the gRPC machinery are several hundred thousand Python
objects. Left in the collector's oldest generation, every full collection walks all of them:
measured on the default policy, 0.1-0.3 s per collection, several a minute under load, about
0.2 ms per request averaged, all of it on the event loop. `settle()` collects once and then
freezes what is alive (`gc.freeze`), so later collections walk only what requests created.

Frozen objects are still freed by reference counting; only cycles among them would outlive
their use, so a policy reload thaws, collects and freezes again (`resettle`).
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
    log.debug(
        "heap settled",
        extra={
            "reason": reason,
            "frozen": gc.get_freeze_count(),
            "ms": round((time.perf_counter() - started) * 1e3, 1),
        },
    )


def resettle(reason: str) -> None:
    """After something long-lived was replaced (a policy reload): let the collector see everything
    once, so cycles in what was dropped are freed, then freeze again."""
    gc.unfreeze()
    settle(reason)
