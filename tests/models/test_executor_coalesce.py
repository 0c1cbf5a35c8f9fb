"""The heavy executor's coalescing of embed calls: concurrent callers within the window share one
batched call, a text queued or in flight is computed once, cached texts need no call, a caller
whose deadline the queue cannot meet is refused at once (and counted), a caller that gives up
leaves the batch to the others, and a failing batch fails every caller."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from extproc.models.executor import REQUEST_DEADLINE, HeavyExecutor, Overloaded


class Recorder:
    """A batch function: one row per text (its length, then ones), every call recorded."""

    def __init__(self, delay_s: float = 0.0, fail: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.delay_s = delay_s
        self.fail = fail
        self.release = threading.Event()
        self.release.set()

    def __call__(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        self.release.wait(5)
        self.calls.append(list(texts))
        time.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("encoder broke")
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


@pytest.fixture
def executor() -> Iterator[HeavyExecutor]:
    pool = HeavyExecutor(1, None)
    yield pool
    pool.shutdown()


async def test_concurrent_calls_within_the_window_are_one_batch(executor: HeavyExecutor) -> None:
    fn = Recorder()
    executor.coalesce(fn, window_s=0.02, max_items=32)
    texts = [["a"], ["bb", "ccc"], ["dddd"], ["bb"]]
    results = await asyncio.gather(*(executor.run(fn, t) for t in texts))
    assert fn.calls == [["a", "bb", "ccc", "dddd"]]  # one call, "bb" once
    for asked, rows in zip(texts, results, strict=True):
        assert rows[:, 0].tolist() == [len(t) for t in asked]
    coalescer = executor.coalescers()[0]
    assert coalescer.batches == 1 and coalescer.items == 4 and coalescer.shared == 1


async def test_texts_arriving_while_the_pool_is_busy_join_the_queued_batch(executor: HeavyExecutor) -> None:
    fn = Recorder()
    fn.release.clear()
    executor.coalesce(fn, window_s=0.0, max_items=32)
    running = asyncio.ensure_future(executor.run(fn, ["first"]))
    await asyncio.sleep(0.05)  # "first" is on the pool, held
    later = []
    for text in ("a", "b", "c"):  # one at a time, in separate loop turns
        later.append(asyncio.ensure_future(executor.run(fn, [text])))
        await asyncio.sleep(0.01)
    fn.release.set()
    await asyncio.gather(running, *later)
    assert fn.calls == [["first"], ["a", "b", "c"]]


async def test_a_full_batch_goes_before_the_window_ends(executor: HeavyExecutor) -> None:
    fn = Recorder()
    executor.coalesce(fn, window_s=5.0, max_items=3)
    started = time.monotonic()
    rows = await executor.run(fn, ["a", "b", "c"])
    assert time.monotonic() - started < 2.0 and rows.shape == (3, 2) and fn.calls == [["a", "b", "c"]]


async def test_a_text_in_flight_is_not_computed_again(executor: HeavyExecutor) -> None:
    fn = Recorder()
    fn.release.clear()  # the first batch holds the pool until released
    executor.coalesce(fn, window_s=0.0, max_items=32)
    first = asyncio.ensure_future(executor.run(fn, ["same", "other"]))
    await asyncio.sleep(0.05)
    second = asyncio.ensure_future(executor.run(fn, ["same"]))
    await asyncio.sleep(0.05)
    fn.release.set()
    a, b = await asyncio.gather(first, second)
    assert fn.calls == [["same", "other"]] and b[0, 0] == a[0, 0] == 4


async def test_cached_texts_need_no_call(executor: HeavyExecutor) -> None:
    fn = Recorder()
    store = {"known": np.array([9.0, 9.0], dtype=np.float32)}
    executor.coalesce(fn, window_s=0.0, max_items=32, cached=store.get)
    rows = await executor.run(fn, ["known"])
    assert fn.calls == [] and rows.tolist() == [[9.0, 9.0]]
    rows = await executor.run(fn, ["known", "new"])
    assert fn.calls == [["new"]] and rows[:, 0].tolist() == [9.0, 3.0]


async def test_a_caller_the_queue_cannot_serve_in_time_is_refused_at_once(executor: HeavyExecutor) -> None:
    fn = Recorder(delay_s=0.05)
    coalescer = executor.coalesce(fn, window_s=0.0, max_items=1)
    await executor.run(fn, ["warm"])  # the per-text cost is known now (~50 ms)
    assert coalescer.item_s > 0.03
    backlog = [asyncio.ensure_future(executor.run(fn, [f"t{i}"])) for i in range(6)]
    await asyncio.sleep(0)
    token = REQUEST_DEADLINE.set(time.monotonic() + 0.1)
    try:
        started = time.monotonic()
        with pytest.raises(Overloaded, match="overloaded"):
            await executor.run(fn, ["late"])
        assert time.monotonic() - started < 0.05  # answered now, not at the deadline
    finally:
        REQUEST_DEADLINE.reset(token)
    assert executor.refused == 1
    await asyncio.gather(*backlog)  # the others were served
    from extproc.observability.metrics import executor_metrics

    read = {m.name: m.samples[0].value for m in executor_metrics(executor)}
    assert read["vsr_heavy_refused"] == 1 and read["vsr_encoder_texts"] == 7 and read["vsr_encoder_batches"] == 7
    assert ["late"] not in fn.calls
    # Without a deadline, or with time enough, the same call is served.
    assert (await executor.run(fn, ["late"])).shape == (1, 2)


async def test_an_idle_pool_admits_even_a_tight_deadline(executor: HeavyExecutor) -> None:
    fn = Recorder(delay_s=0.02)
    executor.coalesce(fn, window_s=0.0, max_items=8)
    await executor.run(fn, ["warm"])
    token = REQUEST_DEADLINE.set(time.monotonic() + 0.001)
    try:
        assert (await executor.run(fn, ["x"])).shape == (1, 2)
    finally:
        REQUEST_DEADLINE.reset(token)
    assert executor.refused == 0


async def test_a_caller_that_gives_up_leaves_the_row_to_the_others(executor: HeavyExecutor) -> None:
    fn = Recorder(delay_s=0.1)
    executor.coalesce(fn, window_s=0.0, max_items=8)
    impatient = asyncio.ensure_future(asyncio.wait_for(executor.run(fn, ["shared"]), timeout=0.02))
    patient = asyncio.ensure_future(executor.run(fn, ["shared"]))
    with pytest.raises(TimeoutError):
        await impatient
    assert (await patient)[0, 0] == 6 and fn.calls == [["shared"]]


async def test_a_failing_batch_fails_each_caller(executor: HeavyExecutor) -> None:
    fn = Recorder(fail=True)
    executor.coalesce(fn, window_s=0.01, max_items=8)
    results = await asyncio.gather(executor.run(fn, ["a"]), executor.run(fn, ["b"]), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results) and fn.calls == [["a", "b"]]
    fn.fail = False
    assert (await executor.run(fn, ["a"]))[0, 0] == 1  # nothing stuck: the next call is computed


def test_each_event_loop_starts_clean(executor: HeavyExecutor) -> None:
    fn = Recorder()
    executor.coalesce(fn, window_s=0.0, max_items=8)
    for _ in range(2):
        assert asyncio.run(executor.run(fn, ["a"])).shape == (1, 2)
    assert fn.calls == [["a"], ["a"]]


async def test_uncoalesced_functions_run_as_before(executor: HeavyExecutor) -> None:
    fn = Recorder()
    assert (await executor.run(fn, ["x", "y"])).shape == (2, 2) and fn.calls == [["x", "y"]]
