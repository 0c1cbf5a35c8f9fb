"""A small MCP server for demos and integration tests (on `aiohttp.web`).

It speaks MCP "streamable HTTP" JSON-RPC 2.0 on `POST /mcp`, answering every request with
one `application/json` body (never an SSE stream; `GET /mcp` is 405): `initialize` (which
hands out an `Mcp-Session-Id`), `ping`, `tools/list` and `tools/call`; notifications get a
202 with no body. Four tools, from harmless to dangerous, so a router's tool policy has
something to decide on: `echo`, `save_note`, `send_email` and `run_shell` (which refuses).
None of them does anything outside this process. Every reply carries `x-demo-mcp: <name>`,
so a test can tell this server was reached; `DemoMcpServer.calls` records the tool calls.

    python -m extproc.ops.demo_mcp --listen 127.0.0.1:8931 [--name mcp]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from extproc.web import AppServer, catch_all_app, route_path, serve_until

log = logging.getLogger("extproc.ops.demo_mcp")

PROTOCOL_VERSION = "2025-06-18"
SUPPORTED_VERSIONS = (PROTOCOL_VERSION, "2025-03-26", "2024-11-05")
SERVER_NAME = "vsr-demo-mcp"
SERVER_VERSION = "0.1.0"
MCP_PATH = "/mcp"
DEFAULT_LISTEN = "127.0.0.1:8931"
MAX_BODY = 64 * 1024 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602


def _schema(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": text} for name, text in properties.items()},
        "required": list(properties),
        "additionalProperties": False,
    }


TOOLS: tuple[dict[str, Any], ...] = (
    {
        "name": "echo",
        "title": "Echo",
        "description": "Return the given text unchanged. Harmless.",
        "inputSchema": _schema(text="text to echo back"),
        "annotations": {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False},
    },
    {
        "name": "save_note",
        "title": "Save note",
        "description": "Store a note for later (the demo keeps it in memory only).",
        "inputSchema": _schema(text="the note to store"),
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
    },
    {
        "name": "send_email",
        "title": "Send email",
        "description": "Send an email (the demo sends nothing).",
        "inputSchema": _schema(to="recipient address", body="message body"),
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    },
    {
        "name": "run_shell",
        "title": "Run shell command",
        "description": "Run a shell command (the demo refuses every command).",
        "inputSchema": _schema(command="the command line to run"),
        "annotations": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
    },
)
_TOOLS_BY_NAME = {tool["name"]: tool for tool in TOOLS}


class _RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class DemoMcpServer:
    """One MCP endpoint on one listening socket."""

    def __init__(self, host: str, port: int, name: str = "mcp") -> None:
        self.host = host
        self.port = port
        self.name = name
        self.sessions: set[str] = set()
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (tool, arguments) in call order
        self.notes: list[str] = []
        self._server: AppServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{MCP_PATH}"

    async def start(self) -> None:
        server = AppServer(catch_all_app(self._handle, MAX_BODY), self.host, self.port)
        self.port = await server.start()
        self._server = server
        log.info("demo mcp listening", extra={"mcp": self.name, "port": self.port})

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(Exception):
                await server.close()

    async def _handle(self, request: web.Request) -> web.Response:
        path = route_path(request)
        if path in ("/health", "/healthz") and request.method == "GET":
            return self._send(200, {"status": "ok", "name": self.name})
        if path != MCP_PATH:
            return self._send(404, {"error": f"no route for {path}"})
        if request.method != "POST":
            body = _rpc_error(None, INVALID_REQUEST, "this server streams nothing: POST JSON-RPC to /mcp")
            return self._send(405, body, {"allow": "POST"})
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._send(413, _rpc_error(None, INVALID_REQUEST, "body too large"))
        return self._answer(request.headers.get("mcp-session-id"), raw)

    def _answer(self, session: str | None, raw: bytes) -> web.Response:
        """The answer to one POSTed JSON-RPC message."""
        extra = {"mcp-session-id": session} if session else {}
        try:
            message = json.loads(raw)
        except ValueError as exc:
            return self._send(400, _rpc_error(None, PARSE_ERROR, f"parse error: {exc}"), extra)
        if isinstance(message, list):
            body = _rpc_error(None, INVALID_REQUEST, "batches are not supported: send one message per request")
            return self._send(400, body, extra)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            body = _rpc_error(None, INVALID_REQUEST, 'not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0")')
            return self._send(400, body, extra)
        if "method" not in message and ("result" in message or "error" in message):
            return self._send(202, None, extra)  # a client's response: nothing to answer
        method = message.get("method")
        if "id" not in message:  # a notification (notifications/initialized, .../cancelled, ...)
            if isinstance(method, str):
                log.debug("demo mcp notification", extra={"mcp": self.name, "method": method})
                return self._send(202, None, extra)
            return self._send(400, _rpc_error(None, INVALID_REQUEST, "method must be a string"), extra)
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return self._send(400, _rpc_error(None, INVALID_REQUEST, "id must be a string or an integer"), extra)
        if not isinstance(method, str):
            return self._send(400, _rpc_error(request_id, INVALID_REQUEST, "method must be a string"), extra)
        params = message.get("params")
        if params is None:
            params = {}
        try:
            if not isinstance(params, dict):
                raise _RpcError(INVALID_PARAMS, "params must be an object")
            if method == "initialize":
                session = uuid.uuid4().hex
                self.sessions.add(session)
                extra = {"mcp-session-id": session}
            result = self._dispatch(method, params)
        except _RpcError as exc:
            return self._send(200, _rpc_error(request_id, exc.code, exc.message), extra)
        return self._send(200, {"jsonrpc": "2.0", "id": request_id, "result": result}, extra)

    def _dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            asked = params.get("protocolVersion")
            return {
                "protocolVersion": asked if asked in SUPPORTED_VERSIONS else PROTOCOL_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": SERVER_NAME, "title": f"vSR demo MCP ({self.name})", "version": SERVER_VERSION},
                "instructions": "A demo server: no tool has any effect outside it.",
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [dict(tool) for tool in TOOLS]}
        if method == "tools/call":
            return self._call(params)
        raise _RpcError(METHOD_NOT_FOUND, f"method not found: {method}")

    def _call(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str) or name not in _TOOLS_BY_NAME:
            raise _RpcError(INVALID_PARAMS, f"unknown tool: {name!r}")
        tool = _TOOLS_BY_NAME[name]
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise _RpcError(INVALID_PARAMS, f"{name}: arguments must be an object")
        schema = tool["inputSchema"]
        for key in schema["required"]:
            if not isinstance(arguments.get(key), str):
                raise _RpcError(INVALID_PARAMS, f"{name}: argument {key!r} must be a string")
        unknown = sorted(set(arguments) - set(schema["properties"]))
        if unknown:
            raise _RpcError(INVALID_PARAMS, f"{name}: unknown arguments {unknown}")
        self.calls.append((name, dict(arguments)))
        log.info("demo mcp tool call", extra={"mcp": self.name, "tool": name})
        if name == "echo":
            text = arguments["text"]
        elif name == "save_note":
            self.notes.append(arguments["text"])
            text = "saved"
        elif name == "send_email":
            text = f"sent to {arguments['to']} (demo: nothing was sent)"
        else:  # run_shell
            text = "refused: demo"
        return {"content": [{"type": "text", "text": text}], "isError": False}

    def _send(self, status: int, body: dict[str, Any] | None, extra: dict[str, str] | None = None) -> web.Response:
        headers = {"x-demo-mcp": self.name}
        if body is not None:
            headers["content-type"] = "application/json"
        headers.update(extra or {})
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        return web.Response(status=status, body=data, headers=headers)


async def serve(host: str, port: int, name: str = "mcp") -> DemoMcpServer:
    """Start a demo MCP server (port 0: any free port) and return it; `await server.close()` stops it."""
    server = DemoMcpServer(host, port, name)
    await server.start()
    return server


async def serve_forever(host: str, port: int, name: str = "mcp", stop: asyncio.Event | None = None) -> None:
    """Serve until `stop` is set (or SIGINT/SIGTERM when `stop` is None)."""
    server = await serve(host, port, name)
    await serve_until(server, stop)


def _listen_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m extproc.ops.demo_mcp", description="A demo MCP server (JSON-RPC on POST /mcp)."
    )
    parser.add_argument(
        "--listen", type=_listen_address, default=DEFAULT_LISTEN, metavar="HOST:PORT", help=f"default {DEFAULT_LISTEN}"
    )
    parser.add_argument("--name", default="mcp", help="sent back in the x-demo-mcp header (default: mcp)")
    args = parser.parse_args(argv)
    host, port = args.listen
    print(f"demo mcp {args.name} on http://{host}:{port}{MCP_PATH}", flush=True)
    try:
        asyncio.run(serve_forever(host, port, args.name))
    except OSError as exc:
        print(f"demo-mcp: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
