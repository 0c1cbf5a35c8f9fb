"""One bounded executor for every heavy model (vision encoder, OCR, text embedder).

Two inference engines running at once on 2 cores slow each other about 4x, so all heavy
inference goes through this single pool with a fixed thread budget instead of each model
spinning up its own.

Admission: a job submitted with a request deadline in force (`REQUEST_DEADLINE`, set by the
signal dispatcher) is refused at once with `Overloaded` when the work already queued ahead of
it, at the recent average job time, cannot finish before that deadline. A burst beyond capacity
then fails fast (the policy sheds or routes fail-safe) instead of every request waiting out its
deadline in the queue.

Coalescing (`coalesce`): calls of a registered batch function (the text embedder's `embed`,
texts in, one row per text out) are not run one by one: texts from any request and any signal
join the batch queued on the pool until the pool starts it (so batches grow with the load, and
an idle pool starts at once), and a text already queued or in flight is not computed again but
waits for that call. The same admission applies per
caller: a text that would come back after its request's deadline is refused at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar, cast

import numpy as np
import numpy.typing as npt

P = ParamSpec("P")
T = TypeVar("T")
Rows = npt.NDArray[np.float32]
BatchFn = Callable[[Sequence[str]], Rows]

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
        self.refused = 0  # jobs (or coalesced callers) refused by admission
        self._coalesced: dict[Any, Coalescer] = {}

    def expected_wait_s(self) -> float:
        """Roughly how long a job submitted now waits before it starts."""
        return self.pending * self.job_s / self.workers

    def apply_thread_budget(self) -> None:
        """Cap torch's intra-op threads once torch is loaded (idempotent). It never imports torch:
        the serving runtimes take their threads from `torch_threads` themselves, and whatever
        loads torch later (a user's checkpoint) sets the same budget (local_checkpoint)."""
        if self._threads_set or self.torch_threads is None or "torch" not in sys.modules:
            return
        import torch

        torch.set_num_threads(self.torch_threads)
        self._threads_set = True

    def coalesce(
        self, fn: BatchFn, *, window_s: float, max_items: int, cached: Callable[[str], Rows | None] | None = None
    ) -> Coalescer:
        """From now on `run(fn, texts)` goes through one `Coalescer` (see the module doc); `cached`
        answers a text without a batch (a hit needs no executor hop). Idempotent per `fn`."""
        existing = self._coalesced.get(fn)
        if existing is None:
            existing = self._coalesced[fn] = Coalescer(self, fn, window_s, max_items, cached)
        return existing

    def coalescers(self) -> list[Coalescer]:
        return list(self._coalesced.values())

    def refuse(self, what: str, wait_s: float, left_s: float) -> Overloaded:
        with self._lock:
            self.refused += 1
        queued, left = f"{wait_s * 1000:.0f}", f"{left_s * 1000:.0f}"
        return Overloaded(f"heavy executor overloaded: {what} ~{queued} ms queued, {left} ms left")

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        coalescer = self._coalesced.get(fn) if self._coalesced else None
        if coalescer is not None and len(args) == 1 and not kwargs:
            return cast(T, await coalescer(cast(Sequence[str], args[0])))
        deadline = REQUEST_DEADLINE.get()
        # Nothing queued ahead: always try (the estimate may be stale, and an idle pool is the best
        # chance this job will get). Otherwise refuse what cannot finish in time behind the queue.
        if deadline is not None and self.pending > 0 and self.job_s > 0.0:
            left = deadline - time.monotonic()
            wait = self.expected_wait_s()
            if wait + self.job_s > left:
                raise self.refuse("job", wait, left)
        return await self.submit(fn, *args, **kwargs)

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> asyncio.Future[T]:
        """Queue on the pool now, without admission or coalescing (a coalesced batch, already
        admitted); counted in `pending` from this moment."""
        with self._lock:
            self.pending += 1
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, functools.partial(self._timed, fn, *args, **kwargs))
        future.add_done_callback(self._finished)
        return future

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


class Coalescer:
    """Texts of concurrent callers -> batched `fn` calls on the pool (see the module doc).

    A batch stays open until the pool starts it: texts arriving while the pool is busy join the
    batch queued behind the running one, so batches grow with the load and an idle pool is never
    kept waiting. `window_s` adds a wait before a batch is queued (0: only the texts of the same
    event-loop turn, e.g. one request's signals, go together)."""

    def __init__(
        self,
        executor: HeavyExecutor,
        fn: BatchFn,
        window_s: float,
        max_items: int,
        cached: Callable[[str], Rows | None] | None,
    ) -> None:
        self.executor = executor
        self.fn = fn
        self.window_s = max(0.0, window_s)
        self.max_items = max(1, max_items)
        self.cached = cached
        self._waiting: dict[str, asyncio.Future[Rows]] = {}  # text -> its row, queued or in flight
        self._gathering: list[str] = []  # texts not queued on the pool yet (the window)
        self._open: list[str] | None = None  # the batch queued on the pool, not started: texts may join
        self._lock = threading.Lock()  # `_open` is closed by the pool thread when its job starts
        self._flush_at = 0.0
        self._timer: asyncio.Handle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.item_s = 0.0  # recent average cost of one text in a batch (EWMA)
        self.batches = 0  # batched calls made
        self.items = 0  # texts computed in them
        self.shared = 0  # texts a caller found queued or in flight already (not computed again)

    def estimate_s(self, extra: int) -> float:
        """Roughly when `extra` more texts would come back: the window left, the pool's queue,
        and the batch they would join."""
        window_left = max(0.0, self._flush_at - time.monotonic()) if self._gathering else self.window_s
        with self._lock:
            ahead = len(self._open) if self._open is not None else len(self._gathering)
        return window_left + self.executor.expected_wait_s() + self.item_s * (ahead + extra)

    async def __call__(self, texts: Sequence[str]) -> Rows:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests, a restarted server): nothing carries over
            self._loop, self._waiting, self._gathering, self._open, self._timer = loop, {}, [], None, None
        futures: list[asyncio.Future[Rows]] = []
        fresh: list[str] = []
        for text in texts:
            future = self._waiting.get(text)
            if future is None:
                row = self.cached(text) if self.cached is not None else None
                future = loop.create_future()
                if row is not None:
                    future.set_result(row)
                else:
                    self._waiting[text] = future
                    fresh.append(text)
            elif text not in fresh:
                self.shared += 1
            futures.append(future)
        if fresh:
            self._admit(fresh)
            self._enqueue(loop, fresh)
        # shield: a caller that gives up (its deadline) leaves the shared row to the others.
        rows = [await asyncio.shield(f) for f in futures]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(rows).astype(np.float32, copy=False)

    def _enqueue(self, loop: asyncio.AbstractEventLoop, fresh: list[str]) -> None:
        with self._lock:
            if self._open is not None and not self._gathering and len(self._open) + len(fresh) <= self.max_items:
                self._open.extend(fresh)  # the pool has not started it: one more text costs little
                return
        self._gathering.extend(fresh)
        if len(self._gathering) >= self.max_items:
            self._flush()
        elif self._timer is None:
            self._flush_at = time.monotonic() + self.window_s
            # An empty context: the batch serves many requests, so no one request's deadline
            # may refuse it on the pool (each caller was admitted against its own).
            empty = contextvars.Context()
            if self.window_s > 0:
                self._timer = loop.call_later(self.window_s, self._flush, context=empty)
            else:
                self._timer = loop.call_soon(self._flush, context=empty)

    def _admit(self, fresh: list[str]) -> None:
        deadline = REQUEST_DEADLINE.get()
        busy = self.executor.pending > 0 or bool(self._gathering)
        if deadline is None or not busy or self.item_s == 0.0:
            return
        left = deadline - time.monotonic()
        wait = self.estimate_s(len(fresh))
        if wait > left:
            for text in fresh:
                future = self._waiting.pop(text)
                future.cancel()
            raise self.executor.refuse(f"{len(fresh)} text(s) to encode,", wait, left)

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._gathering = self._gathering, []
        if batch:
            with self._lock:
                self._open = batch
            future = self.executor.submit(self._timed, batch)
            future.add_done_callback(functools.partial(self._deliver, batch))

    def _timed(self, batch: list[str]) -> tuple[list[str], Rows]:
        with self._lock:  # started: later texts go to a new batch
            if self._open is batch:
                self._open = None
            items = list(batch)
        started = time.perf_counter()
        rows = self.fn(items)
        took = (time.perf_counter() - started) / len(items)
        self.item_s = took if self.item_s == 0.0 else (1 - _EWMA_WEIGHT) * self.item_s + _EWMA_WEIGHT * took
        return items, rows

    def _deliver(self, batch: list[str], done: asyncio.Future[tuple[list[str], Rows]]) -> None:
        error = done.exception() if not done.cancelled() else RuntimeError("the encoder batch was cancelled")
        with self._lock:
            if self._open is batch:  # never started (the pool shut down)
                self._open = None
            items, rows = done.result() if error is None else (list(batch), None)
        if rows is not None:
            self.batches += 1
            self.items += len(items)
        for i, text in enumerate(items):
            future = self._waiting.pop(text, None)
            if future is None or future.done():
                continue
            if rows is not None:
                future.set_result(rows[i])
            else:
                future.set_exception(error if isinstance(error, Exception) else RuntimeError(str(error)))
                future.exception()  # retrieved: a caller that gave up leaves no warning behind
