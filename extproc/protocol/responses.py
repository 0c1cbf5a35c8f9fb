"""What goes back on the wire in OpenAI formats: the rewritten request body, and the
immediate replies (an error, or a clarifying assistant message, streamed or not)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Literal

from extproc.protocol.jsonbody import dumps as dumps
from extproc.protocol.request import ApiKind

SystemPromptMode = Literal["insert", "replace"]


def rewrite_body(
    raw: dict[str, Any],
    api: ApiKind,
    model: str,
    system_prompt: str | None = None,
    mode: SystemPromptMode = "insert",
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[bytes, list[str]]:
    """The request body with `model` replaced and `system_prompt` inserted before the client's
    system text (`insert`) or in place of it (`replace`).

    Returns the new bytes and notes on anything that could not be applied. The parsed
    request is not modified (it may be logged or replayed afterwards).
    """
    body = dict(raw)
    body["model"] = model
    notes: list[str] = []
    if system_prompt is not None:
        if api is ApiKind.CHAT:
            body["messages"] = _with_system_message(raw.get("messages") or [], system_prompt, mode)
        elif api is ApiKind.MESSAGES:
            from extproc.protocol.anthropic import with_system_prompt

            body["system"] = with_system_prompt(raw, system_prompt, mode)
        elif api is ApiKind.RESPONSES:
            existing = raw.get("instructions")
            if mode == "replace" or not existing:
                body["instructions"] = system_prompt
            else:
                body["instructions"] = f"{system_prompt}\n\n{existing}"
        else:
            notes.append("system_prompt not applied: legacy completions have no system role")
    if edit is not None:  # further body edits (reasoning fields) on the copy
        edit(body)
    return dumps(body), notes


def _with_system_message(messages: list[Any], content: str, mode: SystemPromptMode) -> list[Any]:
    ours = {"role": "system", "content": content}
    if mode == "replace":
        kept = [m for m in messages if not (isinstance(m, dict) and m.get("role") in ("system", "developer"))]
        return [ours, *kept]
    return [ours, *messages]


def _ids(api: ApiKind) -> tuple[str, int]:
    prefixes = {
        ApiKind.CHAT: "chatcmpl",
        ApiKind.RESPONSES: "resp",
        ApiKind.COMPLETIONS: "cmpl",
        ApiKind.MESSAGES: "msg",
    }
    prefix = prefixes[api]
    return f"{prefix}-vsr-{uuid.uuid4().hex[:24]}", int(time.time())


def assistant_reply(api: ApiKind, model: str, text: str) -> dict[str, Any]:
    """A complete, non-streamed reply in the request's API shape."""
    reply_id, created = _ids(api)
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    if api is ApiKind.MESSAGES:
        from extproc.protocol.anthropic import assistant_message

        return assistant_message(model, text, reply_id=reply_id)
    if api is ApiKind.RESPONSES:
        return {
            "id": reply_id,
            "object": "response",
            "created_at": created,
            "status": "completed",
            "model": model,
            "output": [
                {
                    "id": f"msg-{reply_id}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        }
    if api is ApiKind.COMPLETIONS:
        return {
            "id": reply_id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
            "usage": usage,
        }
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None, "finish_reason": "stop"}
        ],
        "usage": usage,
    }


def assistant_reply_stream(api: ApiKind, model: str, text: str) -> bytes:
    """The same reply as server-sent events, ending with the stream's terminator."""
    reply_id, created = _ids(api)
    if api is ApiKind.MESSAGES:
        from extproc.protocol.anthropic import assistant_message_stream

        return assistant_message_stream(model, text, reply_id=reply_id)
    events: list[tuple[str | None, dict[str, Any] | str]] = []
    if api is ApiKind.RESPONSES:
        full = assistant_reply(api, model, text)
        full["id"] = reply_id
        started = {**full, "status": "in_progress", "output": []}
        events = [
            ("response.created", {"type": "response.created", "response": started}),
            (
                "response.output_text.delta",
                {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": text},
            ),
            (
                "response.output_text.done",
                {"type": "response.output_text.done", "output_index": 0, "content_index": 0, "text": text},
            ),
            ("response.completed", {"type": "response.completed", "response": full}),
        ]
    elif api is ApiKind.COMPLETIONS:
        base = {"id": reply_id, "object": "text_completion", "created": created, "model": model}
        events = [
            (None, {**base, "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": None}]}),
            (None, {**base, "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"}]}),
            (None, "[DONE]"),
        ]
    else:
        base = {"id": reply_id, "object": "chat.completion.chunk", "created": created, "model": model}

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        events = [
            (None, chunk({"role": "assistant", "content": ""}, None)),
            (None, chunk({"content": text}, None)),
            (None, chunk({}, "stop")),
            (None, "[DONE]"),
        ]
    out = bytearray()
    for event, data in events:
        if event is not None:
            out += f"event: {event}\n".encode()
        out += b"data: " + (data.encode() if isinstance(data, str) else dumps(data)) + b"\n\n"
    return bytes(out)
