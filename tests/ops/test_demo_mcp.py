from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from extproc.ops.demo_mcp import PROTOCOL_VERSION, DemoMcpServer, main, serve
from extproc.ops.paths import REPO_ROOT
from extproc.ops.stack import free_port, port_open

ACCEPT = {"accept": "application/json, text/event-stream"}


@pytest.fixture
async def mcp() -> AsyncIterator[DemoMcpServer]:
    server = await serve("127.0.0.1", free_port(), name="notes")
    yield server
    await server.close()


async def _rpc(
    client: httpx.AsyncClient, method: str, params: dict[str, Any] | None = None, request_id: int | str = 1
) -> httpx.Response:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return await client.post("/mcp", json=message, headers=ACCEPT)


def _client(server: DemoMcpServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}")


async def test_initialize_handshake(mcp: DemoMcpServer) -> None:
    async with _client(mcp) as client:
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        }
        reply = await _rpc(client, "initialize", params)
        assert reply.status_code == 200
        assert reply.headers["content-type"] == "application/json"
        assert reply.headers["x-demo-mcp"] == "notes"
        session = reply.headers["mcp-session-id"]
        assert session and session in mcp.sessions
        body = reply.json()
        assert body["jsonrpc"] == "2.0" and body["id"] == 1
        result = body["result"]
        assert result["protocolVersion"] == "2025-06-18"
        assert result["capabilities"] == {"tools": {}}
        assert result["serverInfo"]["name"] == "vsr-demo-mcp"

        note = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**ACCEPT, "mcp-session-id": session},
        )
        assert note.status_code == 202 and note.content == b""
        assert note.headers["x-demo-mcp"] == "notes" and note.headers["mcp-session-id"] == session

        ping = await client.post(
            "/mcp", json={"jsonrpc": "2.0", "id": "p", "method": "ping"}, headers={"mcp-session-id": session}
        )
        assert ping.json() == {"jsonrpc": "2.0", "id": "p", "result": {}}


async def test_initialize_keeps_an_older_supported_version(mcp: DemoMcpServer) -> None:
    async with _client(mcp) as client:
        old = (await _rpc(client, "initialize", {"protocolVersion": "2025-03-26"})).json()["result"]
        unknown = (await _rpc(client, "initialize", {"protocolVersion": "1999-01-01"})).json()["result"]
    assert old["protocolVersion"] == "2025-03-26"
    assert unknown["protocolVersion"] == PROTOCOL_VERSION


async def test_tools_list(mcp: DemoMcpServer) -> None:
    async with _client(mcp) as client:
        reply = await _rpc(client, "tools/list", request_id=7)
    assert reply.status_code == 200 and reply.headers["x-demo-mcp"] == "notes"
    tools = reply.json()["result"]["tools"]
    assert [t["name"] for t in tools] == ["echo", "save_note", "send_email", "run_shell"]
    expected = {"echo": ["text"], "save_note": ["text"], "send_email": ["to", "body"], "run_shell": ["command"]}
    for tool in tools:
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and tool["description"]
        assert list(schema["properties"]) == expected[tool["name"]] == schema["required"]
        assert all(p["type"] == "string" for p in schema["properties"].values())


@pytest.mark.parametrize(
    ("name", "arguments", "text"),
    [
        ("echo", {"text": "hello there"}, "hello there"),
        ("save_note", {"text": "buy milk"}, "saved"),
        ("send_email", {"to": "a@example.com", "body": "hi"}, "sent to a@example.com (demo: nothing was sent)"),
        ("run_shell", {"command": "rm -rf /"}, "refused: demo"),
    ],
)
async def test_tools_call(mcp: DemoMcpServer, name: str, arguments: dict[str, str], text: str) -> None:
    async with _client(mcp) as client:
        reply = await _rpc(client, "tools/call", {"name": name, "arguments": arguments}, request_id=3)
    assert reply.status_code == 200 and reply.headers["x-demo-mcp"] == "notes"
    assert reply.json() == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
    }
    assert mcp.calls == [(name, arguments)]
    assert mcp.notes == (["buy milk"] if name == "save_note" else [])


@pytest.mark.parametrize(
    "params",
    [
        {"name": "format_disk", "arguments": {}},
        {"arguments": {"text": "x"}},
        {"name": "echo", "arguments": ["x"]},
        {"name": "echo", "arguments": {}},
        {"name": "echo", "arguments": {"text": 5}},
        {"name": "echo", "arguments": {"text": "x", "extra": "y"}},
    ],
)
async def test_tools_call_invalid_params(mcp: DemoMcpServer, params: dict[str, Any]) -> None:
    async with _client(mcp) as client:
        reply = await _rpc(client, "tools/call", params, request_id=4)
    assert reply.status_code == 200 and reply.headers["x-demo-mcp"] == "notes"
    body = reply.json()
    assert body["id"] == 4 and "result" not in body
    assert body["error"]["code"] == -32602 and body["error"]["message"]
    assert mcp.calls == []


async def test_unknown_method(mcp: DemoMcpServer) -> None:
    async with _client(mcp) as client:
        reply = await _rpc(client, "resources/list", request_id=9)
    assert reply.status_code == 200
    assert reply.json()["error"]["code"] == -32601 and reply.json()["id"] == 9


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", -32700),
        (b"", -32700),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600),
        (b'"ping"', -32600),
        (b'{"id": 1, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', -32600),
        (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', -32600),
    ],
)
async def test_malformed_messages(mcp: DemoMcpServer, raw: bytes, code: int) -> None:
    async with _client(mcp) as client:
        reply = await client.post("/mcp", content=raw, headers={**ACCEPT, "content-type": "application/json"})
        assert reply.status_code == 400
        assert reply.headers["x-demo-mcp"] == "notes" and reply.headers["content-type"] == "application/json"
        body = reply.json()
        assert body["jsonrpc"] == "2.0" and body["error"]["code"] == code
        # the connection and the server survive
        assert (await _rpc(client, "ping")).json()["result"] == {}


async def test_invalid_params_type(mcp: DemoMcpServer) -> None:
    async with _client(mcp) as client:
        reply = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": [1]})
    assert reply.json()["error"]["code"] == -32602


async def test_client_responses_and_unknown_notifications_are_accepted(mcp: DemoMcpServer) -> None:
    async with _client(mcp) as client:
        for message in (
            {"jsonrpc": "2.0", "id": 5, "result": {}},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        ):
            reply = await client.post("/mcp", json=message)
            assert reply.status_code == 202 and reply.content == b""


async def test_other_routes(mcp: DemoMcpServer) -> None:
    async with _client(mcp) as client:
        get = await client.get("/mcp", headers={"accept": "text/event-stream"})
        assert get.status_code == 405 and get.headers["allow"] == "POST" and get.headers["x-demo-mcp"] == "notes"
        assert (await client.delete("/mcp")).status_code == 405
        assert (await client.get("/nope")).status_code == 404
        health = await client.get("/health")
        assert health.status_code == 200 and health.json() == {"status": "ok", "name": "notes"}


async def test_port_zero_binds_a_free_port() -> None:
    server = await serve("127.0.0.1", 0)
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/mcp"
        async with _client(server) as client:
            reply = await _rpc(client, "ping")
        assert reply.headers["x-demo-mcp"] == "mcp"
    finally:
        await server.close()


def test_main_rejects_a_bad_listen_address(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--listen", "nowhere"])
    assert exc.value.code == 2
    assert "HOST:PORT" in capsys.readouterr().err


async def test_cli_serves_until_terminated() -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "extproc.ops.demo_mcp", "--listen", f"127.0.0.1:{port}", "--name", "cli"]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not port_open("127.0.0.1", port):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "demo mcp did not start"
            await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            reply = await _rpc(client, "tools/call", {"name": "echo", "arguments": {"text": "via cli"}})
        assert reply.headers["x-demo-mcp"] == "cli"
        assert reply.json()["result"]["content"][0]["text"] == "via cli"
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert f"on http://127.0.0.1:{port}/mcp" in out.decode()
