"""A small closed-loop HTTP/1.1 load generator (asyncio protocols, keep-alive, no dependencies).

Each connection sends one request, waits for the whole response, records the latency and
sends the next, so latency is measured per request and throughput is what the system
sustains at that concurrency. Responses must be `content-length` framed (Envoy's are, for
the JSON bodies used here).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class LoadResult:
    latencies_s: list[float] = field(default_factory=list)
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def count(self) -> int:
        return len(self.latencies_s)

    @property
    def rps(self) -> float:
        return self.count / self.elapsed_s if self.elapsed_s else 0.0

    def percentile_ms(self, q: float) -> float:
        if not self.latencies_s:
            return float("nan")
        ordered = sorted(self.latencies_s)
        index = min(len(ordered) - 1, max(0, round(q / 100.0 * len(ordered)) - 1))
        return ordered[index] * 1000.0

    def mean_ms(self) -> float:
        return statistics.fmean(self.latencies_s) * 1000.0 if self.latencies_s else float("nan")


class _Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = bytearray()
        self.waiter: asyncio.Future[int] | None = None
        self.transport: asyncio.Transport | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._check()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection closed"))

    def _check(self) -> None:
        if self.waiter is None or self.waiter.done():
            return
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).decode("latin-1")
        length = 0
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        total = end + 4 + length
        if len(self.buffer) < total:
            return
        status = int(head.split(" ", 2)[1])
        del self.buffer[:total]
        self.waiter.set_result(status)

    async def request(self, payload: bytes) -> int:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(payload)
        return await self.waiter


def build_request(host: str, port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"host: {host}:{port}",
        "content-type: application/json",
        f"content-length: {len(body)}",
    ]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def run_load(
    host: str,
    port: int,
    payloads: Sequence[bytes],
    *,
    concurrency: int,
    duration_s: float | None = None,
    total: int | None = None,
) -> LoadResult:
    """Closed loop: `concurrency` connections until `duration_s` passes or `total` requests are done."""
    loop = asyncio.get_running_loop()
    result = LoadResult()
    started = time.perf_counter()
    stop_at = started + duration_s if duration_s else None
    remaining = [total if total is not None else 1 << 62]

    async def worker(offset: int) -> None:
        conn: _Conn | None = None
        i = offset
        while remaining[0] > 0 and (stop_at is None or time.perf_counter() < stop_at):
            remaining[0] -= 1
            try:
                if conn is None or conn.lost:
                    _, proto = await loop.create_connection(_Conn, host, port)
                    conn = proto
                t0 = time.perf_counter()
                status = await asyncio.wait_for(conn.request(payloads[i % len(payloads)]), 30)
                result.latencies_s.append(time.perf_counter() - t0)
                result.statuses[status] = result.statuses.get(status, 0) + 1
                if status != 200:
                    result.errors += 1
            except (OSError, TimeoutError):
                result.errors += 1
                conn = None
            i += concurrency  # connections take turns through the payloads: none repeats another's
        if conn is not None and conn.transport is not None:
            conn.transport.close()

    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    result.elapsed_s = time.perf_counter() - started
    return result
