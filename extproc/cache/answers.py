"""Upstream answers checked and reassembled for storing, and cache hits rendered.

Only a complete answer is stored: status 200, one choice, `finish_reason: stop` (Responses:
`status: completed` with message output only), no tool or function calls, and not one of our
own replies (ids carrying `-vsr-`, models named `vsr/...`). A streamed answer (SSE) is
reassembled from its deltas; it must end with `[DONE]` (Chat, Completions) or a
`response.completed` event (Responses). Every refusal says why, for the metrics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from extproc.protocol import sse
from extproc.protocol.anthropic import assembled_message
from extproc.protocol.request import ApiKind
from extproc.protocol.responses import assistant_reply, assistant_reply_stream, dumps


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    text: str
    body: bytes  # the answer as a non-streamed JSON body
    model: str
    completion_tokens: int


class NotStorable(ValueError):
    """Why an answer is not stored (a short reason, used as a metric label)."""


def storable_answer(api: ApiKind, status: int, content_type: str, body: bytes) -> StoredAnswer:
    if status != 200:
        raise NotStorable("status")
    if "text/event-stream" in content_type.lower():
        return _from_stream(api, body)
    try:
        doc = json.loads(body)
    except ValueError:
        raise NotStorable("not_json") from None
    if not isinstance(doc, dict):
        raise NotStorable("not_json")
    text = _complete_text(api, doc)
    return StoredAnswer(text=text, body=body, model=_model_of(doc), completion_tokens=_completion_tokens(doc))


def hit_body(api: ApiKind, answer: StoredAnswer, *, stream: bool) -> tuple[bytes, str]:
    """The body and content type a hit is served with: the stored JSON, or SSE for a stream."""
    if stream:
        return assistant_reply_stream(api, answer.model, answer.text), "text/event-stream"
    return answer.body, "application/json"


def _model_of(doc: dict[str, Any]) -> str:
    model = doc.get("model")
    identifier = doc.get("id")
    if isinstance(identifier, str) and "-vsr-" in identifier:
        raise NotStorable("ours")
    if isinstance(model, str) and model.startswith("vsr/"):
        raise NotStorable("ours")
    return model if isinstance(model, str) else ""


def _completion_tokens(doc: dict[str, Any]) -> int:
    usage = doc.get("usage")
    if isinstance(usage, dict):
        for key in ("completion_tokens", "output_tokens"):
            value = usage.get(key)
            if isinstance(value, int) and value >= 0:
                return value
    return 0


def _complete_text(api: ApiKind, doc: dict[str, Any]) -> str:
    if api is ApiKind.MESSAGES:
        if doc.get("stop_reason") != "end_turn":
            raise NotStorable("finish_reason")
        blocks = doc.get("content")
        if not isinstance(blocks, list) or not blocks:
            raise NotStorable("no_output")
        texts: list[str] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":
                raise NotStorable("tool_call")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind not in ("thinking", "redacted_thinking"):
                raise NotStorable("no_output")
        if not texts:
            raise NotStorable("no_output")
        return "".join(texts)
    if api is ApiKind.RESPONSES:
        if doc.get("status") != "completed":
            raise NotStorable("incomplete")
        output = doc.get("output")
        if not isinstance(output, list) or not output:
            raise NotStorable("no_output")
        parts: list[str] = []
        for item in output:
            if not isinstance(item, dict) or item.get("type") != "message":
                raise NotStorable("tool_call")
            for content in item.get("content") or []:
                if isinstance(content, dict) and content.get("type") == "output_text":
                    parts.append(str(content.get("text", "")))
        if not parts:
            raise NotStorable("no_output")
        return "".join(parts)
    choices = doc.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        raise NotStorable("choices")
    choice = choices[0]
    if choice.get("finish_reason") != "stop":
        raise NotStorable("finish_reason")
    if api is ApiKind.COMPLETIONS:
        text = choice.get("text")
    else:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise NotStorable("no_output")
        if message.get("tool_calls") or message.get("function_call"):
            raise NotStorable("tool_call")
        text = message.get("content")
    if not isinstance(text, str):
        raise NotStorable("no_output")
    return text


def _from_stream(api: ApiKind, body: bytes) -> StoredAnswer:
    events = sse.events(body)
    if api is ApiKind.MESSAGES:
        full = assembled_message(events)
        if full is None:
            raise NotStorable("incomplete")
        text = _complete_text(api, full)
        model = _model_of(full)
        tokens = _completion_tokens(full)
        stored = assistant_reply(api, model, text)
        stored["id"] = stored["id"].replace("-vsr-", "-cache-")
        stored["usage"] = {"input_tokens": 0, "output_tokens": tokens}
        return StoredAnswer(text=text, body=dumps(stored), model=model, completion_tokens=tokens)
    if api is ApiKind.RESPONSES:
        for _, data in reversed(events):
            try:
                doc = json.loads(data)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("type") == "response.completed":
                full = doc.get("response")
                if not isinstance(full, dict):
                    break
                text = _complete_text(api, full)
                return StoredAnswer(text, dumps(full), _model_of(full), _completion_tokens(full))
        raise NotStorable("incomplete")
    if not events or events[-1][1].strip() != "[DONE]":
        raise NotStorable("incomplete")
    parts: list[str] = []
    finish: str | None = None
    model = ""
    tokens = 0
    for _, data in events[:-1]:
        try:
            chunk = json.loads(data)
        except ValueError:
            raise NotStorable("not_json") from None
        if not isinstance(chunk, dict):
            raise NotStorable("not_json")
        model = _model_of(chunk) or model
        tokens = _completion_tokens(chunk) or tokens
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            if choice.get("index", 0) != 0:
                raise NotStorable("choices")
            if api is ApiKind.COMPLETIONS:
                piece = choice.get("text")
            else:
                delta = choice.get("delta") or {}
                if not isinstance(delta, dict):
                    continue
                if delta.get("tool_calls") or delta.get("function_call"):
                    raise NotStorable("tool_call")
                piece = delta.get("content")
            if isinstance(piece, str):
                parts.append(piece)
            if choice.get("finish_reason"):
                finish = str(choice["finish_reason"])
    if finish != "stop":
        raise NotStorable("finish_reason")
    text = "".join(parts)
    full = assistant_reply(api, model, text)
    full["id"] = full["id"].replace("-vsr-", "-cache-")
    full["usage"] = {"completion_tokens": tokens, "prompt_tokens": 0, "total_tokens": tokens}
    return StoredAnswer(text=text, body=dumps(full), model=model, completion_tokens=tokens)
