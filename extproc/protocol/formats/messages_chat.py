"""Anthropic Messages <-> OpenAI Chat Completions, for upstreams that speak only OpenAI: the
Messages format's `Translation` (`MessagesToChat`, given it by the registry's line).

The request goes one way (`messages_to_chat`), the answer the other: a JSON body whole
(`chat_to_message`), an upstream error (`chat_error_to_anthropic`), or an SSE stream event by
event (`ChatToMessagesStream`: message_start, content_block_start / delta / stop for text and
tool_use blocks, message_delta with the stop reason and usage, message_stop).

Translated: system (string or text blocks), text, images (base64 -> `data:` URL, url -> URL),
text documents (as text), tool_use <-> tool_calls (input <-> JSON arguments), tool_result ->
`role: tool` messages (their images as a user message after them), tools (input_schema ->
parameters), tool_choice (auto / any -> required / tool -> function / none),
disable_parallel_tool_use -> parallel_tool_calls, max_tokens, stop_sequences -> stop,
temperature, top_p, top_k, stream (with usage asked for), metadata.user_id -> user; stop reasons
(stop -> end_turn, length -> max_tokens, tool_calls -> tool_use, content_filter -> refusal) and
usage (prompt/completion tokens -> input/output tokens).

Not translatable, refused with a 400 before the upstream is called (`Untranslatable`): PDF
and other base64 or URL documents, file references, and server tools (web search and the like).
Dropped: `thinking` (and thinking blocks in the history; the reasoning control writes the
upstream's own reasoning fields), cache_control marks, citations, `service_tier`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from extproc.errors import MalformedRequest
from extproc.protocol.formats.base import Translation
from extproc.protocol.formats.messages import error_envelope, message_id, sse_event
from extproc.protocol.jsonbody import dumps
from extproc.protocol.request import ApiKind
from extproc.protocol.sse import EventSplitter
from extproc.protocol.sse import event as read_event

_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
_PASSED_AS_IS = ("temperature", "top_p", "top_k")


class Untranslatable(MalformedRequest):
    """The request uses a Messages feature that has no Chat Completions form."""

    code = "untranslatable"


class MessagesToChat(Translation):
    """A Messages request sent as Chat Completions, its answers brought back as Messages."""

    target = ApiKind.CHAT

    def request(self, raw: dict[str, Any], model: str) -> dict[str, Any]:
        return messages_to_chat(raw, model)

    def answer(self, doc: dict[str, Any]) -> dict[str, Any]:
        return chat_to_message(doc)

    def error(self, status: int, body: bytes) -> bytes:
        return chat_error_to_anthropic(status, body)

    def stream(self) -> ChatToMessagesStream:
        return ChatToMessagesStream()


# -- the request: Messages -> Chat ------------------------------------------------------------


def messages_to_chat(raw: dict[str, Any], model: str) -> dict[str, Any]:
    """The Chat Completions body for a (parsed, so well-formed) Messages body."""
    body: dict[str, Any] = {"model": model, "messages": _chat_messages(raw)}
    if isinstance(raw.get("max_tokens"), int):
        body["max_tokens"] = raw["max_tokens"]
    for key in _PASSED_AS_IS:
        if raw.get(key) is not None:
            body[key] = raw[key]
    if raw.get("stop_sequences"):
        body["stop"] = list(raw["stop_sequences"])
    if raw.get("stream") is True:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    metadata = raw.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        body["user"] = metadata["user_id"]
    tools = raw.get("tools")
    if tools:
        body["tools"] = [_chat_tool(tool) for tool in tools]
    choice = raw.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "tool":
            body["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
        elif kind in ("auto", "any", "none"):
            body["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
        if choice.get("disable_parallel_tool_use") is True:
            body["parallel_tool_calls"] = False
    return body


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if "input_schema" not in tool and tool.get("type") not in (None, "custom"):
        raise Untranslatable(f"server tool {tool.get('type')!r} has no Chat Completions form", param="tools")
    function: dict[str, Any] = {"name": tool.get("name"), "parameters": tool.get("input_schema") or {"type": "object"}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    return "\n\n".join(b["text"] for b in system or [] if isinstance(b, dict) and isinstance(b.get("text"), str))


def _chat_messages(raw: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = _system_text(raw.get("system"))
    if system:
        out.append({"role": "system", "content": system})
    for message in raw.get("messages") or []:
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
        elif role == "assistant":
            out.append(_assistant_message(content))
        else:
            out.extend(_user_messages(content))
    return out


def _assistant_message(blocks: list[Any]) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"])
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False, separators=(",", ":"))
            calls.append(
                {"id": block.get("id"), "type": "function", "function": {"name": block["name"], "arguments": arguments}}
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _user_messages(blocks: list[Any]) -> list[dict[str, Any]]:
    """Tool results first (each a `tool` message, as Chat wants them right after the calls), then
    the user's own parts (with any images the tool results carried) as one user message."""
    tool_messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "tool_result":
            text, images = _tool_result(block)
            tool_messages.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
            parts.extend(images)
        else:
            part = _chat_part(block)
            if part is not None:
                parts.append(part)
    if parts:
        return [*tool_messages, {"role": "user", "content": parts}]
    return tool_messages


def _tool_result(block: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    content = block.get("content")
    prefix = "[tool error] " if block.get("is_error") is True else ""
    if isinstance(content, str) or content is None:
        return prefix + (content or ""), []
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for inner in content:
        part = _chat_part(inner)
        if part is None:
            continue
        if part["type"] == "text":
            texts.append(part["text"])
        else:
            images.append(part)
    return prefix + "\n".join(texts), images


def _chat_part(block: dict[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            url = f"data:{source['media_type']};base64,{source['data']}"
        elif source.get("type") == "url":
            url = source["url"]
        else:
            raise Untranslatable("an image given as a file reference has no Chat Completions form", param="messages")
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "document":
        source = block.get("source") or {}
        if source.get("type") == "text":
            return {"type": "text", "text": source.get("data", "")}
        if source.get("type") == "content" and isinstance(source.get("content"), str):
            return {"type": "text", "text": source["content"]}
        if source.get("type") == "content":
            texts = [b.get("text", "") for b in source.get("content") or [] if b.get("type") == "text"]
            return {"type": "text", "text": "\n".join(texts)}
        raise Untranslatable(
            f"a {source.get('type')} document cannot be sent to a model without the Messages API", param="messages"
        )
    return None  # thinking blocks and other assistant-side blocks are dropped


# -- the answer: Chat -> Messages -------------------------------------------------------------


def stop_reason(finish_reason: object) -> str:
    return _STOP_REASONS.get(str(finish_reason), "end_turn")


def _input_of(arguments: object) -> dict[str, Any]:
    """A tool call's JSON arguments as tool_use `input` (arguments that are not an object: kept whole)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else {}
    except ValueError:
        return {"_arguments": arguments}
    return value if isinstance(value, dict) else {"_arguments": value}


def _message_id(chat_id: object) -> str:
    return f"msg_{chat_id}" if isinstance(chat_id, str) and chat_id else message_id()


def chat_to_message(doc: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions answer as a Messages answer (the first choice)."""
    choices = doc.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{len(content)}",
                "name": function.get("name") or "",
                "input": _input_of(function.get("arguments")),
            }
        )
    usage = doc.get("usage") or {}
    return {
        "id": _message_id(doc.get("id")),
        "type": "message",
        "role": "assistant",
        "model": doc.get("model") or "",
        "content": content,
        "stop_reason": stop_reason(choice.get("finish_reason")),
        "stop_sequence": None,
        "usage": {
            "input_tokens": int(usage.get("prompt_tokens") or 0),
            "output_tokens": int(usage.get("completion_tokens") or 0),
        },
    }


def chat_error_to_anthropic(status: int, body: bytes) -> bytes:
    """An upstream's OpenAI-style (or any) error body in Anthropic's envelope."""
    message = ""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        error = doc.get("error")
        if isinstance(error, dict):
            message = str(error.get("message") or "")
        elif isinstance(doc.get("message"), str):
            message = doc["message"]
    if not message:
        message = body.decode("utf-8", "replace")[:500] or f"upstream answered {status}"
    return dumps(error_envelope(status, message))


def stream_error(error: dict[str, Any]) -> dict[str, Any]:
    """A mid-stream error chunk's `error` as the data of Anthropic's `error` event; its type from
    the status the chunk carries as `code` (vLLM's), else a server error."""
    code = error.get("code")
    status = code if isinstance(code, int) and 400 <= code <= 599 else 500
    message = str(error.get("message") or "upstream error")
    return {"error": error_envelope(status, message)["error"]}


@dataclass(slots=True)
class ChatToMessagesStream:
    """Chat Completions SSE in, Messages SSE out, event by event. Feed it the upstream's bytes
    (any chunking); it returns the Messages events those bytes complete."""

    model: str = ""
    _splitter: EventSplitter = field(default_factory=EventSplitter)
    _started: bool = False
    _finished: bool = False
    _index: int = -1  # the open content block's index (-1: none)
    _open: str = ""  # "text" or "tool_use"
    _tool_blocks: dict[int, int] = field(default_factory=dict)  # Chat tool-call index -> block index
    _stop_reason: str = "end_turn"
    _stop_seen: bool = False  # the upstream said why it stopped (a finish_reason)
    _input_tokens: int = 0
    _output_tokens: int = 0
    events: int = 0  # Messages events written (for the figures)

    def feed(self, chunk: bytes, end: bool = False) -> bytes:
        out: list[bytes] = []
        for event in self._splitter.feed(chunk, end):
            self._event(event, out)
        if end:
            if not self._finished and not self._stop_seen:  # cut off: say so, never a clean message_stop
                self._start({}, out)
                self._close_block(out)
                error = {"type": "api_error", "message": "the upstream's stream ended before the answer was complete"}
                out.append(sse_event("error", {"error": error}))
                self._finished = True
            self._finish(out)
        self.events += len(out)
        return b"".join(out)

    def _event(self, raw: bytes, out: list[bytes]) -> None:
        _, data = read_event(raw.decode("utf-8", "replace"))
        if not data:
            return
        if data.strip() == "[DONE]":
            self._finish(out)
            return
        try:
            doc = json.loads(data)
        except ValueError:
            return
        if not isinstance(doc, dict) or self._finished:
            return
        if isinstance(doc.get("error"), dict):  # vLLM reports a failure mid-stream as an error chunk
            self._close_block(out)
            out.append(sse_event("error", stream_error(doc["error"])))
            self._finished = True
            return
        self.model = str(doc.get("model") or self.model)
        self._start(doc, out)
        usage = doc.get("usage")
        if isinstance(usage, dict):
            self._input_tokens = int(usage.get("prompt_tokens") or self._input_tokens)
            self._output_tokens = int(usage.get("completion_tokens") or self._output_tokens)
        for choice in doc.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if isinstance(text, str) and text:
                if self._open != "text":
                    self._close_block(out)
                    self._open_block({"type": "text", "text": ""}, "text", out)
                out.append(self._delta({"type": "text_delta", "text": text}))
            for piece in delta.get("tool_calls") or []:
                self._tool_piece(piece, out)
            if choice.get("finish_reason"):
                self._stop_reason = stop_reason(choice["finish_reason"])
                self._stop_seen = True

    def _start(self, doc: dict[str, Any], out: list[bytes]) -> None:
        if self._started:
            return
        self._started = True
        message: dict[str, Any] = {
            "id": _message_id(doc.get("id")),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        out.append(sse_event("message_start", {"message": message}))

    def _tool_piece(self, piece: Any, out: list[bytes]) -> None:
        if not isinstance(piece, dict):
            return
        index = piece.get("index", 0)
        function = piece.get("function") or {}
        if index not in self._tool_blocks:
            self._close_block(out)
            block = {"type": "tool_use", "id": piece.get("id") or f"toolu_{index}", "name": function.get("name") or ""}
            self._open_block({**block, "input": {}}, "tool_use", out)
            self._tool_blocks[index] = self._index
        elif self._tool_blocks[index] != self._index:
            return  # a fragment of a call whose block is closed: Chat streams never interleave calls
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            out.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))

    def _open_block(self, block: dict[str, Any], kind: str, out: list[bytes]) -> None:
        self._index += 1
        self._open = kind
        out.append(sse_event("content_block_start", {"index": self._index, "content_block": block}))

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse_event("content_block_delta", {"index": self._index, "delta": delta})

    def _close_block(self, out: list[bytes]) -> None:
        if self._open:
            out.append(sse_event("content_block_stop", {"index": self._index}))
            self._open = ""

    def _finish(self, out: list[bytes]) -> None:
        if self._finished:
            return
        self._finished = True
        if not self._started:
            self._start({}, out)
        self._close_block(out)
        out.append(
            sse_event(
                "message_delta",
                {
                    "delta": {"stop_reason": self._stop_reason, "stop_sequence": None},
                    "usage": {"input_tokens": self._input_tokens, "output_tokens": self._output_tokens},
                },
            )
        )
        out.append(sse_event("message_stop", {}))
