"""The benches' HTTP client: one `aiohttp.ClientSession`, for async code and, through `Client`, for
the sequential benches that run without an event loop of their own.

`Client` runs its session on a private event loop (`asyncio.Runner`); each call is one request,
its whole body read, its latency measured from just before the request to the last byte.
`keep_alive=False` opens a fresh connection for every request (as `http.client` or `urllib`
one-shot requests did), so a figure includes the TCP connect.

The closed-loop load (`bench/load.py`, `bench/bench_envoy.py`) goes through `bench/loadgen.py`'s
asyncio protocol instead: under load aiohttp costs about twice the client CPU a request (measured
at 50 connections: 75-81 us against 35 us), which on a 2-core host comes out of the system being
measured.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes
    ms: float  # request sent to whole body read

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def session(*, timeout_s: float = 60.0, keep_alive: bool = True, limit: int = 100) -> aiohttp.ClientSession:
    """A session as the benches use it (call inside a running event loop)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=not keep_alive, limit=limit),
        timeout=aiohttp.ClientTimeout(total=timeout_s),
    )


async def fetch(
    client: aiohttp.ClientSession,
    method: str,
    url: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """One request on `client`, its body read whole."""
    started = time.perf_counter()
    async with client.request(method, url, data=body, headers=headers) as response:
        data = await response.read()
        elapsed = (time.perf_counter() - started) * 1000.0
        return Reply(response.status, {k.lower(): v for k, v in response.headers.items()}, data, elapsed)


class Client:
    """`fetch` for code without an event loop: a session on a private loop, closed by `close()`."""

    def __init__(self, *, timeout_s: float = 60.0, keep_alive: bool = True) -> None:
        self._runner = asyncio.Runner()
        self._session = self._runner.run(self._open(timeout_s, keep_alive))

    @staticmethod
    async def _open(timeout_s: float, keep_alive: bool) -> aiohttp.ClientSession:
        return session(timeout_s=timeout_s, keep_alive=keep_alive)

    def request(self, method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> Reply:
        return self._runner.run(fetch(self._session, method, url, body, headers))

    def get(self, url: str, headers: dict[str, str] | None = None) -> Reply:
        return self.request("GET", url, None, headers)

    def post(self, url: str, body: bytes, headers: dict[str, str] | None = None) -> Reply:
        return self.request("POST", url, body, headers)

    def close(self) -> None:
        try:
            self._runner.run(self._session.close())
        finally:
            self._runner.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
