"""extproc.web: an aiohttp application on the running loop, as the admin port and the demo servers serve."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from aiohttp import web

from extproc.web import AppServer


async def hello(request: web.Request) -> web.Response:
    return web.Response(text="hi")


async def test_port_zero_binds_a_free_port_and_close_stops_listening() -> None:
    app = web.Application()
    app.router.add_get("/", hello)
    server = AppServer(app, "127.0.0.1", 0)
    port = await server.start()
    assert port > 0 and server.port == port
    async with httpx.AsyncClient() as client:
        reply = await client.get(f"http://127.0.0.1:{port}/")
    assert reply.text == "hi"
    assert "server" not in reply.headers  # aiohttp's name and version are not advertised
    await server.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_a_malformed_request_is_a_400_and_no_error_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    server = AppServer(web.Application(), "127.0.0.1", 0)
    port = await server.start()
    try:
        with caplog.at_level(logging.INFO):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\n\r\n")  # no Host: a bad message, not just a bad method
            await writer.drain()
            reply = await asyncio.wait_for(reader.read(), 5)
            writer.close()
    finally:
        await server.close()
    assert reply.split(b"\r\n", 1)[0].split(b" ")[1] == b"400"
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
