"""Run the active policy's signals for one request: concurrently, each with a timeout, all
under one request deadline. Failures become results (unknown), never exceptions, except
request errors (a corrupt image found while decoding), which fail the request with their status.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from extproc.errors import RequestError
from extproc.models.executor import REQUEST_DEADLINE, HeavyExecutor, Overloaded
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, SignalContext, SignalResult, SignalStatus, SignalUnavailable

_IMAGE_ONLY = frozenset({"image", "image_meta"})
# Inline signals' long-text work (`Signal.off_loop`), one job at a time: the patterns hold the
# GIL, so a second thread would not finish them sooner, only share the loop's slices with it.
_long_text_pool: ThreadPoolExecutor | None = None


def _long_text_executor() -> ThreadPoolExecutor:
    global _long_text_pool
    if _long_text_pool is None:
        _long_text_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="long-text")
    return _long_text_pool


class Dispatcher:
    def __init__(self, executor: HeavyExecutor, default_timeout_ms: float) -> None:
        self.executor = executor
        self.default_timeout_ms = default_timeout_ms

    async def run(self, signals: Iterable[Signal], request: RoutingRequest, deadline: float) -> dict[str, SignalResult]:
        """Every signal's result by name. `deadline` is a time.monotonic() instant."""
        ctx = SignalContext(executor=self.executor, deadline=deadline)
        results: dict[str, SignalResult] = {}
        pending: dict[asyncio.Task[Evaluation], tuple[Signal, float]] = {}
        threaded: dict[asyncio.Future[SignalResult], Signal] = {}
        inline: list[Signal] = []
        for signal in signals:
            if self.answers_without_running(signal, request):
                results[signal.name] = SignalResult(
                    signal.name, signal.type, SignalStatus.NOT_MATCHED, evidence=("request has no images",)
                )
                continue
            reason = signal.unavailable_reason()
            if reason is not None:
                results[signal.name] = SignalResult.failed(signal.name, signal.type, SignalStatus.UNAVAILABLE, reason)
            elif signal.inline and self._off_loop(signal, request):
                loop = asyncio.get_running_loop()
                threaded[loop.run_in_executor(_long_text_executor(), self._run_inline, signal, request)] = signal
            elif signal.inline:
                inline.append(signal)
            elif (now := self._answer_now(signal, request)) is not None:
                results[signal.name] = now
            else:
                # Heavy signals start first so their executor work overlaps the inline ones.
                task = asyncio.create_task(self._bounded(signal, request, ctx), name=f"signal:{signal.name}")
                pending[task] = (signal, time.perf_counter())
        waiting: list[asyncio.Future[Any]] = [*pending, *threaded]
        try:
            for signal in inline:
                results[signal.name] = self._run_inline(signal, request)
            if waiting:
                await asyncio.wait(waiting)
        except BaseException:
            for future in waiting:
                future.cancel()
            raise
        for future, signal in threaded.items():
            results[signal.name] = future.result()  # _run_inline's result; a RequestError propagates
        for task, (signal, started) in pending.items():
            results[signal.name] = self._collect(signal, task, started)
        return results

    @staticmethod
    def answers_without_running(signal: Signal, request: RoutingRequest) -> bool:
        """An image-only signal on a request without any image is a known "no", model or not."""
        return signal.reads <= _IMAGE_ONLY and not request.has_images

    async def _bounded(self, signal: Signal, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        timeout_ms = signal.spec.timeout_ms or self.default_timeout_ms
        timeout = min(timeout_ms / 1000.0, ctx.remaining())
        # Heavy work this signal submits is admitted only if it can finish in time (see executor).
        REQUEST_DEADLINE.set(time.monotonic() + timeout)
        return await asyncio.wait_for(signal.evaluate(request, ctx), timeout=timeout)

    @staticmethod
    def _off_loop(signal: Signal, request: RoutingRequest) -> bool:
        try:
            return signal.off_loop(request)
        except Exception:
            return False  # on the loop, as before; `_run_inline` reports whatever fails

    @staticmethod
    def _answer_now(signal: Signal, request: RoutingRequest) -> SignalResult | None:
        """A heavy signal's answer without a task when it needs no waiting (see `answer_now`);
        any failure here leaves the signal to the normal path, which reports it."""
        started = time.perf_counter()
        try:
            evaluation = signal.answer_now(request)
        except RequestError:
            raise
        except Exception:
            return None
        if evaluation is None:
            return None
        return SignalResult.from_evaluation(signal.name, signal.type, evaluation, _ms(started))

    @staticmethod
    def _run_inline(signal: Signal, request: RoutingRequest) -> SignalResult:
        started = time.perf_counter()
        try:
            evaluation = signal.compute(request)
        except RequestError:
            raise
        except SignalUnavailable as exc:
            return SignalResult.failed(signal.name, signal.type, SignalStatus.UNAVAILABLE, str(exc), _ms(started))
        except Exception as exc:
            return SignalResult.failed(signal.name, signal.type, SignalStatus.ERROR, _describe(exc), _ms(started))
        return SignalResult.from_evaluation(signal.name, signal.type, evaluation, _ms(started))

    @staticmethod
    def _collect(signal: Signal, task: asyncio.Task[Evaluation], started: float) -> SignalResult:
        latency = _ms(started)
        exc = task.exception() if not task.cancelled() else asyncio.CancelledError()
        if exc is None:
            return SignalResult.from_evaluation(signal.name, signal.type, task.result(), latency)
        if isinstance(exc, RequestError):
            raise exc
        if isinstance(exc, Overloaded):
            return SignalResult.failed(signal.name, signal.type, SignalStatus.TIMEOUT, str(exc), latency)
        if isinstance(exc, TimeoutError | asyncio.CancelledError):
            return SignalResult.failed(
                signal.name, signal.type, SignalStatus.TIMEOUT, f"no answer within {latency:.0f} ms", latency
            )
        if isinstance(exc, SignalUnavailable):
            return SignalResult.failed(signal.name, signal.type, SignalStatus.UNAVAILABLE, str(exc), latency)
        return SignalResult.failed(signal.name, signal.type, SignalStatus.ERROR, _describe(exc), latency)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
