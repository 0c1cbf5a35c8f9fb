"""The loop's lateness, and the servicer dating a message's arrival back by it, so that the
request deadline ends about when Envoy's message timeout (sized from it) says it should."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from prometheus_client import generate_latest

from extproc.router import Router
from extproc.server.loop_lag import LoopLag
from extproc.settings import Settings
from tests.server.test_grpc_service import CHAT, Harness, body_only_msg, chat, start


async def test_a_stalled_loop_is_measured_while_stalled_and_after() -> None:
    lag = LoopLag(interval_s=0.05)
    assert lag.estimate() == 0.0  # not running: no correction at all
    lag.start()
    try:
        await asyncio.sleep(0.2)
        time.sleep(0.4)  # the loop is held: nothing else runs, the heartbeat included
        # Read on the loop right after the stall, before the heartbeat ran: already overdue.
        assert lag.estimate() >= 0.3
        await asyncio.sleep(0)  # the heartbeat runs and records how late it woke
        await asyncio.sleep(0.01)
        assert lag.lag_s >= 0.3
    finally:
        await lag.stop()
    assert lag.estimate() == 0.0


class _Behind:
    """A loop that is 10 s behind, as the servicer sees it."""

    def estimate(self) -> float:
        return 10.0


async def test_the_servicer_counts_the_deadline_from_the_dated_back_arrival() -> None:
    seen: list[tuple[float | None, float]] = []

    def capture(router: Router) -> None:
        real = router.route

        async def route(
            body: bytes, *, path: str = CHAT, request_id: str | None = None, received: float | None = None
        ) -> Any:
            seen.append((received, time.monotonic()))
            return await real(body, path=path, request_id=request_id, received=received)

        router.route = route  # type: ignore[method-assign]

    def never_shed(settings: Settings) -> None:
        settings.dispatch.shed_wait_ms = 0.0

    server, channel = await start(adapt=capture, configure=never_shed)
    try:
        harness = Harness(server, channel)
        await harness.exchange(body_only_msg(chat("find the bug")))
        server.service.loop_lag = _Behind()  # type: ignore[assignment]
        await harness.exchange(body_only_msg(chat("find the bug")))
    finally:
        await channel.close()
        await server.stop()
    (on_time, read_1), (late, read_2) = seen
    assert on_time is not None and late is not None
    assert on_time <= read_1 and read_1 - on_time < 10.0  # a live loop: about when it was read
    assert late <= read_2 - 10.0  # 10 s behind: the deadline started 10 s earlier


async def test_a_message_read_too_late_is_shed_unread_and_counted() -> None:
    def shed_after_1s(settings: Settings) -> None:
        settings.dispatch.shed_wait_ms = 1000.0

    server, channel = await start(configure=shed_after_1s)
    try:
        harness = Harness(server, channel)
        router = server.service.router
        assert router is not None
        calls = len(router.calls)  # type: ignore[attr-defined]
        server.service.loop_lag = _Behind()  # type: ignore[assignment]
        (reply,) = await harness.exchange(body_only_msg(chat("find the bug")))
        immediate = reply.immediate_response
        assert immediate.status.code == 429
        assert json.loads(immediate.body)["error"]["code"] == "overloaded"
        headers = {h.header.key: h.header.raw_value.decode() for h in immediate.headers.set_headers}
        assert int(headers["retry-after"]) >= 1
        assert len(router.calls) == calls  # type: ignore[attr-defined]  # never parsed, never routed
        assert server.metrics is not None
        exposition = generate_latest(server.metrics.registry).decode()
        assert 'vsr_requests_shed_total{decision="server"} 1.0' in exposition
        # Caught up: routed as usual.
        server.service.loop_lag = LoopLag()
        (reply,) = await harness.exchange(body_only_msg(chat("find the bug")))
        assert not reply.HasField("immediate_response")
    finally:
        await channel.close()
        await server.stop()
