"""One bounded executor for every heavy model (vision encoder, OCR, text embedder).

Two inference engines running at once on 2 cores slow each other about 4x, so all heavy
inference goes through this single pool with a fixed thread budget instead of each model
spinning up its own.

Admission: a job submitted with a request deadline in force (`REQUEST_DEADLINE`, set by the
signal dispatcher) is refused at once with `Overloaded` when the work already queued ahead of
it, at the recent average job time, cannot finish before that deadline. A burst beyond capacity
then fails fast (the policy sheds or routes fail-safe) instead of every request waiting out its
deadline in the queue.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

# The time.monotonic() instant by which the current request's signals must be done, if any.
REQUEST_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("vsr_request_deadline", default=None)
_EWMA_WEIGHT = 0.2


class Overloaded(TimeoutError):
    """The heavy executor cannot start this job in time for its request's deadline."""


class HeavyExecutor:
    def __init__(self, workers: int = 1, torch_threads: int | None = None) -> None:
        self.workers = workers
        self.torch_threads = torch_threads
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="heavy")
        self._threads_set = False
        self._lock = threading.Lock()
        self.pending = 0  # jobs submitted and not finished (queued or running)
        self.job_s = 0.0  # recent average job duration (EWMA), 0 until the first job ends
        self.refused = 0  # jobs refused by admission

    def expected_wait_s(self) -> float:
        """Roughly how long a job submitted now waits before it starts."""
        return self.pending * self.job_s / self.workers

    def apply_thread_budget(self) -> None:
        """Cap torch's intra-op threads once (idempotent); imports torch only when a model needs it."""
        if self._threads_set or self.torch_threads is None:
            return
        import torch

        torch.set_num_threads(self.torch_threads)
        self._threads_set = True

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        deadline = REQUEST_DEADLINE.get()
        # Nothing queued ahead: always try (the estimate may be stale, and an idle pool is the best
        # chance this job will get). Otherwise refuse what cannot finish in time behind the queue.
        if deadline is not None and self.pending > 0 and self.job_s > 0.0:
            left = deadline - time.monotonic()
            wait = self.expected_wait_s()
            if wait + self.job_s > left:
                with self._lock:
                    self.refused += 1
                raise Overloaded(f"heavy executor overloaded: ~{wait * 1000:.0f} ms queued, {left * 1000:.0f} ms left")
        with self._lock:
            self.pending += 1
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, functools.partial(self._timed, fn, *args, **kwargs))
        future.add_done_callback(self._finished)
        return await future

    def _timed(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.perf_counter() - started
            with self._lock:
                self.job_s = took if self.job_s == 0.0 else (1 - _EWMA_WEIGHT) * self.job_s + _EWMA_WEIGHT * took

    def _finished(self, _: object) -> None:
        with self._lock:
            self.pending -= 1

    def submit_sync(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run on the pool and wait: for load-time work (label embeddings) outside an event loop."""
        return self._pool.submit(fn, *args, **kwargs).result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
