"""A small closed-loop HTTP/1.1 load generator (asyncio protocols, keep-alive, no dependencies).

Each connection sends one request, waits for the whole response, records the latency and
sends the next, so latency is measured per request and throughput is what the system
sustains at that concurrency. Responses are `content-length` or chunked framed.

The benches' one load client (`bench/load.py` drives its levels with `Connection` too); the
benches' other requests go through aiohttp (`bench/client.py`), which under load costs about
twice the client CPU a request (75-81 us against 35 us, measured at 50 connections).
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


class Connection(asyncio.Protocol):
    """One keep-alive client connection: `exchange` writes a whole request and waits for the whole
    response (`content-length` or chunked framing): its status and headers (names in lower case)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, dict[str, str]]] | None = None
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
            self.waiter.set_exception(ConnectionError("connection closed mid-response"))

    def _check(self) -> None:
        if self.waiter is None or self.waiter.done():
            return
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        total = self._body_end(end + 4, headers)
        if total is None:
            return
        del self.buffer[:total]
        self.waiter.set_result((int(head[0].split(" ", 2)[1]), headers))

    def _body_end(self, start: int, headers: dict[str, str]) -> int | None:
        """Where the response starting its body at `start` ends in the buffer; None: not all there yet."""
        if headers.get("transfer-encoding", "").lower() != "chunked":
            total = start + int(headers.get("content-length", "0"))
            return total if len(self.buffer) >= total else None
        pos = start
        while True:
            line_end = self.buffer.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(bytes(self.buffer[pos:line_end]).split(b";")[0], 16)
            pos = line_end + 2 + size + 2
            if len(self.buffer) < pos:
                return None
            if size == 0:
                return pos

    async def exchange(self, payload: bytes) -> tuple[int, dict[str, str]]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(payload)
        return await self.waiter

    async def request(self, payload: bytes) -> int:
        return (await self.exchange(payload))[0]


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
    start: int = 0,
) -> LoadResult:
    """Closed loop: `concurrency` connections until `duration_s` passes or `total` requests are done,
    taking the payloads in turn from index `start` (so successive phases can send texts not sent before)."""
    loop = asyncio.get_running_loop()
    result = LoadResult()
    started = time.perf_counter()
    stop_at = started + duration_s if duration_s else None
    remaining = [total if total is not None else 1 << 62]

    async def worker(offset: int) -> None:
        conn: Connection | None = None
        i = start + offset
        while remaining[0] > 0 and (stop_at is None or time.perf_counter() < stop_at):
            remaining[0] -= 1
            try:
                if conn is None or conn.lost:
                    _, proto = await loop.create_connection(Connection, host, port)
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
