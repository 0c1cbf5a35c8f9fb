"""A small OpenAI-compatible upstream for demos and integration tests (stdlib asyncio only).

It stands in for a vLLM server: `/v1/chat/completions` (plain and streaming SSE),
`/v1/completions`, `/v1/responses`, `/v1/models`, `/health`. Every reply says who served
it: the `x-demo-upstream` response header carries the cluster name, `x-demo-model` the
model id the body asked for (after the router rewrote it), and the reply text repeats both
with the routing decision Envoy forwarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("extproc.ops.demo_upstream")

MAX_BODY = 64 * 1024 * 1024
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large"}


@dataclass(frozen=True, slots=True)
class DemoUpstream:
    cluster: str
    host: str
    port: int
    models: tuple[str, ...] = ()
    stream_delay_s: float = 0.02  # between SSE chunks, so streaming is visible


@dataclass(slots=True)
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    except asyncio.LimitOverrunError as exc:
        raise _HttpError(400, "request headers too large") from exc
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ", 2)
    except ValueError as exc:
        raise _HttpError(400, "bad request line") from exc
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if length > MAX_BODY:
            raise _HttpError(413, "body too large")
        body = await reader.readexactly(length)
    return _Request(method.upper(), target.split("?", 1)[0], headers, body)


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _error(message: str, code: str = "invalid_request") -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code, "param": None}}


def _last_user_text(payload: dict[str, Any]) -> str:
    """The last user text of a chat, responses or completions body, shortened for the reply."""
    text = ""
    messages = payload.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    text = content
                elif isinstance(content, list):
                    text = " ".join(
                        str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
                    )
    elif isinstance(payload.get("input"), str):
        text = payload["input"]
    elif isinstance(payload.get("prompt"), str):
        text = payload["prompt"]
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


class DemoServer:
    """Serves one or more `DemoUpstream`s (one listening socket each) on one event loop."""

    def __init__(self, upstreams: Sequence[DemoUpstream]) -> None:
        self.upstreams = list(upstreams)
        self._servers: list[asyncio.Server] = []

    async def start(self) -> None:
        for upstream in self.upstreams:
            server = await asyncio.start_server(
                functools.partial(self._connection, upstream), upstream.host, upstream.port, limit=1 << 20
            )
            self._servers.append(server)
            log.info("demo upstream listening", extra={"cluster": upstream.cluster, "port": upstream.port})

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)
        self._servers.clear()

    async def _connection(
        self, upstream: DemoUpstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                try:
                    request = await _read_request(reader)
                except _HttpError as exc:
                    await self._send_json(writer, upstream, exc.status, _error(exc.message), "", close=True)
                    return
                if request is None:
                    return
                close = request.headers.get("connection", "").lower() == "close"
                await self._handle(upstream, request, writer, close)
                if close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(
        self, upstream: DemoUpstream, request: _Request, writer: asyncio.StreamWriter, close: bool
    ) -> None:
        path = request.path.rstrip("/") or "/"
        if path in ("/health", "/healthz") and request.method == "GET":
            await self._send_json(writer, upstream, 200, {"status": "ok", "cluster": upstream.cluster}, "", close)
            return
        if path == "/v1/models" and request.method == "GET":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": upstream.cluster} for m in upstream.models]
            await self._send_json(writer, upstream, 200, {"object": "list", "data": data}, "", close)
            return
        handlers = {
            "/v1/chat/completions": self._chat,
            "/v1/completions": self._completions,
            "/v1/responses": self._responses,
        }
        handler = handlers.get(path)
        if handler is None:
            await self._send_json(writer, upstream, 404, _error(f"no route for {path}", "not_found"), "", close)
            return
        if request.method != "POST":
            await self._send_json(writer, upstream, 405, _error("use POST", "method_not_allowed"), "", close)
            return
        try:
            payload = json.loads(request.body)
            if not isinstance(payload, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            await self._send_json(writer, upstream, 400, _error(f"invalid JSON body: {exc}"), "", close)
            return
        model = str(payload.get("model") or "")
        text = (
            f"[demo upstream cluster={upstream.cluster} model={model} "
            f"decision={request.headers.get('x-vsr-decision', '-')}] you said: {_last_user_text(payload)}"
        )
        await handler(upstream, payload, model, text, writer, close)

    async def _chat(
        self, upstream: DemoUpstream, payload: dict[str, Any], model: str, text: str, writer: Any, close: bool
    ) -> None:
        rid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        created = int(time.time())
        if payload.get("stream"):
            chunks: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
            chunks += [{"content": word + " "} for word in text.split(" ")]
            events = [
                {
                    "id": rid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
                for delta in chunks
            ]
            events.append(
                {
                    "id": rid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                }
            )
            await self._send_sse(writer, upstream, model, events, close)
            return
        body = {
            "id": rid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": _usage(text),
        }
        await self._send_json(writer, upstream, 200, body, model, close)

    async def _completions(
        self, upstream: DemoUpstream, payload: dict[str, Any], model: str, text: str, writer: Any, close: bool
    ) -> None:
        body = {
            "id": f"cmpl-{uuid.uuid4().hex[:16]}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
            "usage": _usage(text),
        }
        await self._send_json(writer, upstream, 200, body, model, close)

    async def _responses(
        self, upstream: DemoUpstream, payload: dict[str, Any], model: str, text: str, writer: Any, close: bool
    ) -> None:
        body = {
            "id": f"resp_{uuid.uuid4().hex[:16]}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": model,
            "output": [
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:12]}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "output_text": text,
            "usage": {"input_tokens": 1, "output_tokens": len(text.split()), "total_tokens": 1 + len(text.split())},
        }
        await self._send_json(writer, upstream, 200, body, model, close)

    def _headers(self, upstream: DemoUpstream, model: str, content_type: str) -> dict[str, str]:
        return {"content-type": content_type, "x-demo-upstream": upstream.cluster, "x-demo-model": model or "-"}

    async def _send_json(
        self, writer: Any, upstream: DemoUpstream, status: int, body: dict[str, Any], model: str, close: bool
    ) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        headers = self._headers(upstream, model, "application/json")
        headers["content-length"] = str(len(data))
        if close:
            headers["connection"] = "close"
        writer.write(_head(status, headers) + data)
        await writer.drain()

    async def _send_sse(
        self, writer: Any, upstream: DemoUpstream, model: str, events: list[dict[str, Any]], close: bool
    ) -> None:
        headers = self._headers(upstream, model, "text/event-stream")
        headers["cache-control"] = "no-cache"
        headers["transfer-encoding"] = "chunked"
        if close:
            headers["connection"] = "close"
        writer.write(_head(200, headers))
        frames = [f"data: {json.dumps(e, separators=(',', ':'))}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
        for index, frame in enumerate(frames):
            writer.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            await writer.drain()
            if upstream.stream_delay_s and index < len(frames) - 1:
                await asyncio.sleep(upstream.stream_delay_s)
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _usage(text: str) -> dict[str, int]:
    completion = len(text.split())
    return {"prompt_tokens": 1, "completion_tokens": completion, "total_tokens": 1 + completion}


async def serve_forever(upstreams: Sequence[DemoUpstream], stop: asyncio.Event | None = None) -> None:
    """Serve until `stop` is set (or SIGINT/SIGTERM when `stop` is None)."""
    import signal

    server = DemoServer(upstreams)
    await server.start()
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
