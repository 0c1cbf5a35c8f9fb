"""A small OpenAI-compatible upstream for demos and integration tests (on `aiohttp.web`).

It stands in for a vLLM server: `/v1/chat/completions` (plain and streaming SSE),
`/v1/completions`, `/v1/responses`, Anthropic's `/v1/messages` (JSON and its SSE events; only
when `messages` is on, as the policy's model cards say with `api`: off, it answers 404 like
an OpenAI-only server), `/v1/models`, `/health`. Every reply says who served
it: the `x-demo-upstream` response header carries the cluster name, `x-demo-model` the
model id the body asked for (after the router rewrote it), and the reply text repeats both
with the routing decision Envoy forwarded and the system prompt it received. What the request
brought is said back whole in `x-demo-received-system` and `x-demo-received-headers`
(`extproc.ops.demo_echo`: an inserted system prompt, the headers `set_headers` added).

A request may script the assistant's reply instead: the `x-demo-reply` header carries
base64url JSON (padding optional, see `encode_demo_reply`) of an assistant message,
`{"content": "..." | null, "tool_calls": [{"id", "type", "function": {"name", "arguments"}}]}`.
Chat Completions return it as `choices[0].message` (finish_reason `tool_calls` or `stop`),
streamed as a vLLM server streams it (tool-call arguments in several fragments); the
Responses API returns a `message` item for the content and a `function_call` item per tool
call, streamed with the `response.*` events. A header that does not decode gets a 400 with
error code `bad_demo_reply`.

A request may also script a failure: `x-demo-error: STATUS [FORM]` answers STATUS with
OpenAI's `{"error": {...}}` JSON (FORM `json`, the default), with a plain-text body (`text`),
or, for a streamed request, with a 200 stream that sends a few chunks and then a vLLM-style
error chunk carrying STATUS as its code (`mid-stream`); `reset` closes the connection without
an answer (a crashed server: Envoy answers 503 itself). A value that does not parse is a 400.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from extproc.ops.demo_echo import echo_headers, short_system
from extproc.web import AppServer, catch_all_app, route_path, serve_until

log = logging.getLogger("extproc.ops.demo_upstream")

MAX_BODY = 64 * 1024 * 1024
DEMO_REPLY_HEADER = "x-demo-reply"
DEMO_ERROR_HEADER = "x-demo-error"
_ERROR_FORMS = ("json", "text", "mid-stream", "reset")


@dataclass(frozen=True, slots=True)
class DemoUpstream:
    cluster: str
    host: str
    port: int
    models: tuple[str, ...] = ()
    stream_delay_s: float = 0.02  # between SSE chunks, so streaming is visible
    messages: bool = True  # serves Anthropic's /v1/messages natively (vLLM does)


def _error(message: str, code: str = "invalid_request") -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code, "param": None}}


@dataclass(frozen=True, slots=True)
class _Reply:
    """The assistant message to send: the echo text, or what `x-demo-reply` scripted."""

    content: str | None
    tool_calls: tuple[dict[str, Any], ...] = ()
    scripted: bool = True

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"

    @property
    def text(self) -> str:
        return self.content or ""


def parse_demo_error(value: str) -> tuple[int, str]:
    """An `x-demo-error` header value as (status, form); `ValueError` says what is wrong with it."""
    parts = value.split()
    if not parts or len(parts) > 2 or not parts[0].isdigit() or not 400 <= int(parts[0]) <= 599:
        raise ValueError(f"{DEMO_ERROR_HEADER} must be `STATUS [FORM]` with a 4xx/5xx STATUS, not {value!r}")
    form = parts[1] if len(parts) == 2 else "json"
    if form not in _ERROR_FORMS:
        raise ValueError(f"{DEMO_ERROR_HEADER}: FORM must be one of {', '.join(_ERROR_FORMS)}, not {form!r}")
    return int(parts[0]), form


def encode_demo_reply(message: dict[str, Any]) -> str:
    """The `x-demo-reply` header value for an assistant message: base64url JSON without padding."""
    raw = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_demo_reply(value: str) -> _Reply:
    """Parse an `x-demo-reply` header value; `ValueError` says what is wrong with it."""
    raw = value.strip().rstrip("=")
    try:
        data = base64.b64decode((raw + "=" * (-len(raw) % 4)).encode("ascii"), altchars=b"-_", validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"{DEMO_REPLY_HEADER} is not base64url: {exc}") from exc
    try:
        message = json.loads(data)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise ValueError(f"{DEMO_REPLY_HEADER} is not JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise ValueError(f"{DEMO_REPLY_HEADER} must be a JSON object (an assistant message)")
    if "content" not in message and "tool_calls" not in message:
        raise ValueError(f"{DEMO_REPLY_HEADER} needs `content` and/or `tool_calls`")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError(f"{DEMO_REPLY_HEADER}: `content` must be a string or null")
    raw_calls = message.get("tool_calls")
    if raw_calls is None:
        raw_calls = []
    if not isinstance(raw_calls, list):
        raise ValueError(f"{DEMO_REPLY_HEADER}: `tool_calls` must be a list")
    return _Reply(content, tuple(_tool_call(index, call) for index, call in enumerate(raw_calls)))


def _tool_call(index: int, call: Any) -> dict[str, Any]:
    """One tool call in OpenAI chat format, `id` and `type` filled in when missing."""
    where = f"{DEMO_REPLY_HEADER}: tool_calls[{index}]"
    if not isinstance(call, dict):
        raise ValueError(f"{where} must be an object")
    function = call.get("function", {"name": call.get("name"), "arguments": call.get("arguments")})
    if not isinstance(function, dict):
        raise ValueError(f"{where}.function must be an object")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.function.name must be a non-empty string")
    arguments = function.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    call_id = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
    if not isinstance(call_id, str):
        raise ValueError(f"{where}.id must be a string")
    return {
        "id": call_id,
        "type": str(call.get("type") or "function"),
        "function": {"name": name, "arguments": arguments},
    }


def _pieces(text: str, count: int) -> list[str]:
    """`text` cut into at most `count` non-empty consecutive pieces (none for "")."""
    count = max(1, min(count, len(text)))
    size, extra = divmod(len(text), count)
    pieces, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return [p for p in pieces if p]


def _argument_pieces(arguments: str) -> list[str]:
    """Tool-call arguments in several fragments (3 or more when long enough), as vLLM streams them."""
    return _pieces(arguments, max(3, min(8, len(arguments) // 8)))


REASONING_FIELDS = ("chat_template_kwargs", "reasoning_effort", "reasoning", "thinking")


def reasoning_echo(payload: dict[str, Any]) -> str:
    """The reasoning fields the upstream received, as compact JSON (`-` when none), so a curl
    through the router shows what the router told the model about thinking. With Anthropic's
    `thinking`, its `max_tokens` too (the thinking budget is counted in it)."""
    fields = {key: payload[key] for key in REASONING_FIELDS if key in payload}
    if "thinking" in fields and "max_tokens" in payload:
        fields["max_tokens"] = payload["max_tokens"]
    return json.dumps(fields, separators=(",", ":"), sort_keys=True) if fields else "-"


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
        self._servers: list[AppServer] = []

    async def start(self) -> None:
        for upstream in self.upstreams:
            app = catch_all_app(functools.partial(self._handle, upstream), MAX_BODY)
            app.on_response_prepare.append(_add_echo)
            server = AppServer(app, upstream.host, upstream.port)
            await server.start()
            self._servers.append(server)
            log.info("demo upstream listening", extra={"cluster": upstream.cluster, "port": upstream.port})

    async def close(self) -> None:
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.close()
        self._servers.clear()

    async def _handle(self, upstream: DemoUpstream, request: web.Request) -> web.StreamResponse:
        path = route_path(request)
        if path in ("/health", "/healthz") and request.method == "GET":
            return self._json(upstream, 200, {"status": "ok", "cluster": upstream.cluster}, "")
        if path == "/v1/models" and request.method == "GET":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": upstream.cluster} for m in upstream.models]
            return self._json(upstream, 200, {"object": "list", "data": data}, "")
        handlers = {
            "/v1/chat/completions": self._chat,
            "/v1/completions": self._completions,
            "/v1/responses": self._responses,
        }
        if upstream.messages:
            handlers["/v1/messages"] = self._messages
        handler = handlers.get(path)
        if handler is None:
            return self._json(upstream, 404, _error(f"no route for {path}", "not_found"), "")
        if request.method != "POST":
            return self._json(upstream, 405, _error("use POST", "method_not_allowed"), "")
        try:
            payload = json.loads(await request.read())
            if not isinstance(payload, dict):
                raise ValueError("body is not a JSON object")
        except web.HTTPRequestEntityTooLarge:
            return self._json(upstream, 413, _error("body too large"), "")
        except ValueError as exc:
            return self._json(upstream, 400, _error(f"invalid JSON body: {exc}"), "")
        model = str(payload.get("model") or "")
        request[_ECHO] = echo_headers(payload, request.headers)
        if DEMO_ERROR_HEADER in request.headers:
            return await self._fail(upstream, request.headers[DEMO_ERROR_HEADER], payload, model, request)
        scripted = request.headers.get(DEMO_REPLY_HEADER)
        if scripted is not None:
            try:
                reply = decode_demo_reply(scripted)
            except ValueError as exc:
                return self._json(upstream, 400, _error(str(exc), "bad_demo_reply"), model)
        else:
            reply = _Reply(
                f"[demo upstream cluster={upstream.cluster} model={model} "
                f"decision={request.headers.get('x-vsr-decision', '-')} system={short_system(payload)} "
                f"reasoning={reasoning_echo(payload)}] "
                f"you said: {_last_user_text(payload)}",
                scripted=False,
            )
        return await handler(upstream, payload, model, reply, request)

    async def _chat(
        self, upstream: DemoUpstream, payload: dict[str, Any], model: str, reply: _Reply, request: web.Request
    ) -> web.StreamResponse:
        rid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        created = int(time.time())
        if payload.get("stream"):
            deltas: list[dict[str, Any]] = [
                {"role": "assistant", "content": None if reply.content is None and reply.tool_calls else ""}
            ]
            if reply.scripted:  # the content exactly, in a few pieces
                deltas += [{"content": piece} for piece in _pieces(reply.text, 3)]
            else:  # the echo, word by word
                deltas += [{"content": word + " "} for word in reply.text.split(" ")]
            for index, call in enumerate(reply.tool_calls):
                function = call["function"]
                deltas.append(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": call["type"],
                                "function": {"name": function["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                deltas += [
                    {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                    for piece in _argument_pieces(function["arguments"])
                ]
            choices: list[dict[str, Any]] = [{"index": 0, "delta": delta, "finish_reason": None} for delta in deltas]
            choices.append({"index": 0, "delta": {}, "finish_reason": reply.finish_reason})
            events = [
                {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [c]}
                for c in choices
            ]
            return await self._sse(request, upstream, model, _chat_frames(events))
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = list(reply.tool_calls)
        body = {
            "id": rid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
            "usage": _usage(reply.text),
        }
        return self._json(upstream, 200, body, model)

    async def _completions(
        self, upstream: DemoUpstream, payload: dict[str, Any], model: str, reply: _Reply, request: web.Request
    ) -> web.StreamResponse:
        body = {
            "id": f"cmpl-{uuid.uuid4().hex[:16]}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "text": reply.text, "finish_reason": "stop", "logprobs": None}],
            "usage": _usage(reply.text),
        }
        return self._json(upstream, 200, body, model)

    async def _responses(
        self, upstream: DemoUpstream, payload: dict[str, Any], model: str, reply: _Reply, request: web.Request
    ) -> web.StreamResponse:
        items: list[dict[str, Any]] = []
        if reply.content is not None or not reply.tool_calls:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:12]}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                }
            )
        items += [
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:12]}",
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
            for call in reply.tool_calls
        ]
        words = len(reply.text.split()) + sum(len(c["function"]["arguments"]) // 4 for c in reply.tool_calls)
        body: dict[str, Any] = {
            "id": f"resp_{uuid.uuid4().hex[:16]}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": model,
            "output": items,
            "output_text": reply.text,
            "usage": {"input_tokens": 1, "output_tokens": words, "total_tokens": 1 + words},
        }
        if payload.get("stream"):
            return await self._sse(request, upstream, model, _responses_frames(body))
        return self._json(upstream, 200, body, model)

    async def _messages(
        self, upstream: DemoUpstream, payload: dict[str, Any], model: str, reply: _Reply, request: web.Request
    ) -> web.StreamResponse:
        """Anthropic Messages, as vLLM's `/v1/messages` answers: text and tool_use blocks."""
        blocks: list[dict[str, Any]] = []
        if reply.content or not reply.tool_calls:
            blocks.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            try:
                arguments = json.loads(call["function"]["arguments"] or "{}")
            except ValueError:
                arguments = {}
            blocks.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": arguments})
        words = len(reply.text.split())
        body: dict[str, Any] = {
            "id": f"msg_{uuid.uuid4().hex[:16]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": words},
        }
        if payload.get("stream"):
            return await self._sse(request, upstream, model, _messages_frames(body))
        return self._json(upstream, 200, body, model)

    async def _fail(
        self, upstream: DemoUpstream, value: str, payload: dict[str, Any], model: str, request: web.Request
    ) -> web.StreamResponse:
        """The failure `x-demo-error` scripted (see the module docstring)."""
        try:
            status, form = parse_demo_error(value)
        except ValueError as exc:
            return self._json(upstream, 400, _error(str(exc), "bad_demo_error"), model)
        message = f"demo upstream {upstream.cluster} failed with {status} as scripted"
        if form == "reset":
            return _hang_up(request)
        if form == "mid-stream" and payload.get("stream"):
            chunk = {"id": "chatcmpl-demo-error", "object": "chat.completion.chunk", "model": model, "choices": []}
            frames = _chat_frames(
                [
                    {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
                    {**chunk, "choices": [{"index": 0, "delta": {"content": "The answer starts "}}]},
                    {"error": {"message": message, "type": "InternalServerError", "code": status}},
                ]
            )
            return await self._sse(request, upstream, model, frames)
        if form == "text":
            data = f"{message} (plain text)\n".encode()
            return web.Response(status=status, body=data, headers=self._headers(upstream, model, "text/plain"))
        return self._json(upstream, status, _error(message, f"demo_{status}"), model)

    def _headers(self, upstream: DemoUpstream, model: str, content_type: str) -> dict[str, str]:
        return {"content-type": content_type, "x-demo-upstream": upstream.cluster, "x-demo-model": model or "-"}

    def _json(self, upstream: DemoUpstream, status: int, body: dict[str, Any], model: str) -> web.Response:
        data = json.dumps(body, separators=(",", ":")).encode()
        return web.Response(status=status, body=data, headers=self._headers(upstream, model, "application/json"))

    async def _sse(
        self, request: web.Request, upstream: DemoUpstream, model: str, frames: list[bytes]
    ) -> web.StreamResponse:
        headers = self._headers(upstream, model, "text/event-stream")
        headers["cache-control"] = "no-cache"
        response = web.StreamResponse(status=200, headers=headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        for index, frame in enumerate(frames):
            await response.write(frame)
            if upstream.stream_delay_s and index < len(frames) - 1:
                await asyncio.sleep(upstream.stream_delay_s)
        await response.write_eof()
        return response


_ECHO = web.RequestKey("demo_echo", dict[str, str])


async def _add_echo(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer to an inference request says what the request brought (JSON, streams, errors)."""
    response.headers.update(request.get(_ECHO, {}))


def _hang_up(request: web.Request) -> web.StreamResponse:
    """Close the connection without an answer (a crashed server); the response returned is never sent."""
    if request.transport is not None:
        request.transport.close()
    return web.Response(status=500)


def _chat_frames(events: list[dict[str, Any]]) -> list[bytes]:
    """Chat Completions SSE: `data:` lines, then `data: [DONE]`."""
    return [f"data: {json.dumps(e, separators=(',', ':'))}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def _responses_frames(response: dict[str, Any]) -> list[bytes]:
    """Responses API SSE for a finished `response`: typed `event:`/`data:` frames, no `[DONE]`."""
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    pending = {**response, "status": "in_progress", "output": [], "output_text": "", "usage": None}
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        item_id = item["id"]
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit(
                "response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []}
            )
            empty = {"type": "output_text", "text": "", "annotations": []}
            where = {"item_id": item_id, "output_index": index, "content_index": 0}
            emit("response.content_part.added", **where, part=empty)
            for piece in _pieces(text, 3):
                emit("response.output_text.delta", **where, delta=piece)
            emit("response.output_text.done", **where, text=text)
            emit("response.content_part.done", **where, part=item["content"][0])
        else:
            arguments = item["arguments"]
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for piece in _argument_pieces(arguments):
                emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
            emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return [f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n".encode() for e in events]


def _messages_frames(message: dict[str, Any]) -> list[bytes]:
    """Anthropic Messages SSE for a finished `message`: one event a frame, text and tool input in pieces."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "usage": {**message["usage"], "output_tokens": 0},
            },
        }
    ]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            events += [
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}
                for piece in _pieces(block["text"], 3)
            ]
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}})
            events += [
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p},
                }
                for p in _argument_pieces(json.dumps(block["input"], separators=(",", ":")))
            ]
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return [f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n".encode() for e in events]


def _usage(text: str) -> dict[str, int]:
    completion = len(text.split())
    return {"prompt_tokens": 1, "completion_tokens": completion, "total_tokens": 1 + completion}


async def serve_forever(upstreams: Sequence[DemoUpstream], stop: asyncio.Event | None = None) -> None:
    """Serve until `stop` is set (or SIGINT/SIGTERM when `stop` is None)."""
    server = DemoServer(upstreams)
    await server.start()
    await serve_until(server, stop)
