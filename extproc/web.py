"""Serving an `aiohttp.web` application on the running event loop: the admin port and the demo servers.

`AppServer` binds one application to one host:port (port 0: any free port) through aiohttp's
`AppRunner`/`TCPSite`, without an access log and without aiohttp's `Server:` header; a connection
idle (or still sending its request head) for `idle_timeout_s` is closed by aiohttp. Each of our
servers dispatches from its own table, so its application is `catch_all_app` (one route for every
method and path) and it reads the path it routes on with `route_path`. `serve_until` keeps a
started server up until an event (or SIGINT/SIGTERM) and closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Protocol

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

SHUTDOWN_TIMEOUT_S = 2.0  # how long `close` waits for requests in flight
# An idle keep-alive connection is closed after this long: longer than Envoy's upstream idle timeout
# (1 h), so Envoy never reuses a connection the server is closing (aiohttp's own default).
IDLE_TIMEOUT_S = 3630.0


class _QuietClientErrors(logging.Filter):
    """aiohttp logs each malformed request (the client's fault, answered 400) at ERROR with a
    traceback: a hostile client would fill the log. Those go to DEBUG only."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            return record.levelno <= logging.DEBUG
        return True


protocol_log = logging.getLogger("extproc.web.http")
protocol_log.addFilter(_QuietClientErrors())


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def catch_all_app(handler: Handler, max_body_bytes: int) -> web.Application:
    """An application that hands every method and path to `handler`, bodies bounded (413 beyond)."""
    app = web.Application(client_max_size=max_body_bytes)
    app.router.add_route("*", "/{path:.*}", handler)
    return app


def route_path(request: web.Request) -> str:
    """The path a demo server routes on: as sent (not percent-decoded), no query, no trailing slash."""
    return request.raw_path.split("?", 1)[0].rstrip("/") or "/"


async def _drop_server_header(request: web.BaseRequest, response: web.StreamResponse) -> None:
    response.headers.pop("Server", None)


class AppServer:
    """One aiohttp application listening on one address, on the running event loop."""

    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
        *,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        max_headers: int = 128,
        lingering_time_s: float = 10.0,
    ) -> None:
        app.on_response_prepare.append(_drop_server_header)
        self.app = app
        self.host = host
        self.port = port
        self._idle_timeout_s = idle_timeout_s
        self._max_headers = max_headers
        self._lingering_time_s = lingering_time_s  # how long an unread request body is drained after the answer
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Listen; the bound port (the one asked for, or the free one picked for port 0)."""
        runner = web.AppRunner(
            self.app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
            keepalive_timeout=self._idle_timeout_s,
            max_headers=self._max_headers,
            logger=protocol_log,
            lingering_time=self._lingering_time_s,
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        return self.port

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


class Closable(Protocol):
    async def close(self) -> None: ...


async def serve_until(server: Closable, stop: asyncio.Event | None) -> None:
    """Keep a started server up until `stop` is set (or SIGINT/SIGTERM when it is None), then close it."""
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.close()
