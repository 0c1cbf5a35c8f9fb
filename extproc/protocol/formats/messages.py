"""Anthropic Messages (`POST /v1/messages`): the request parsed into the one RoutingRequest, and
what the router answers itself in Anthropic's shapes (errors, a clarifying message, its SSE).
The translation to and from Chat Completions, for a model that speaks only OpenAI, is
`extproc.protocol.formats.messages_chat` (the registry's line gives the format its translation).

Parsing follows the OpenAI parser's rules (`protocol.openai_parser.OpenAIParser`: typed errors, the same
image checks, the same token estimate), with Messages' own content blocks:

- `system`: a string or text blocks -> system text;
- `messages[].content`: a string or blocks: `text`; `image` (`source.type` base64, read and
  checked like a `data:` image, or url, never fetched); `document` (plain-text sources and
  `content` sources are read; base64 PDFs and URLs are passed on unread); `tool_use` (assistant:
  a tool call, its `input` as the call's arguments); `tool_result` (user: its text is tool text,
  role `tool`, source `tool_result`, as Chat's `role: tool` messages; images inside are checked);
  `thinking` / `redacted_thinking` (assistant) are not read;
- `tools` (their names), `tool_choice`, `thinking`, `stream`, `metadata.user_id` are checked for
  type; they travel to the upstream unchanged.

A user turn is a user message with at least one block that is not a `tool_result` (a message
that only returns tool results continues the assistant's turn).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

from extproc.errors import MalformedRequest, PayloadTooLarge, error_type
from extproc.images import ImageLimits, RemoteImage, inspect_image, parse_data_uri
from extproc.protocol.answer import Answer, Output, ToolCall, arguments_text
from extproc.protocol.formats.base import ApiFormat, SystemPromptMode
from extproc.protocol.jsonbody import dumps
from extproc.protocol.openai_parser import OpenAIParser, json_type
from extproc.protocol.request import ApiKind, Role, RoutingRequest, tool_choice_word

ANTHROPIC_VERSION_HEADER = "anthropic-version"
_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT}
_IGNORED_BLOCKS = frozenset({"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"})
_TOOL_CHOICES = frozenset({"auto", "any", "tool", "none"})


class MessagesParser(OpenAIParser):
    """The Messages body: system, messages of blocks, tools, tool_choice, thinking, metadata."""

    def parse_api(self, data: dict[str, Any]) -> None:
        self._parse_system(data.get("system"))
        self._check_object("thinking", data.get("thinking"))
        self._parse_tool_choice(data.get("tool_choice"))
        metadata = data.get("metadata")
        self._check_object("metadata", metadata)
        user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
        if user_id is not None and not isinstance(user_id, str):
            raise MalformedRequest("metadata.user_id must be a string", param="metadata.user_id")
        max_tokens = data.get("max_tokens")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
            raise MalformedRequest(f"'max_tokens' must be an integer, not {json_type(max_tokens)}", param="max_tokens")
        for index, message in self.message_list(data):
            where = f"messages[{index}]"
            value = message.get("role")
            role = _ROLES.get(value) if isinstance(value, str) else None
            if role is None:
                raise MalformedRequest(
                    f"{where}.role must be 'user' or 'assistant', not {value!r}", param=f"{where}.role"
                )
            self._parse_message(message.get("content"), role, index, where)

    @staticmethod
    def _check_object(name: str, value: object) -> None:
        if value is not None and not isinstance(value, dict):
            raise MalformedRequest(f"'{name}' must be an object, not {json_type(value)}", param=name)

    def _parse_system(self, system: object) -> None:
        if system is None:
            return
        if isinstance(system, str):
            self._add_text(Role.SYSTEM, system, -1, "content")
            return
        if not isinstance(system, list):
            raise MalformedRequest(f"'system' must be a string or text blocks, not {json_type(system)}", param="system")
        for position, block in enumerate(system):
            where = f"system[{position}]"
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise MalformedRequest(f"{where} must be a text block with a string 'text'", param=where)
            self._add_text(Role.SYSTEM, block["text"], -1, "content")

    def _parse_tool_choice(self, choice: object) -> None:
        if choice is None:
            return
        if not isinstance(choice, dict) or choice.get("type") not in _TOOL_CHOICES:
            raise MalformedRequest(
                f"'tool_choice' must be an object whose type is one of {sorted(_TOOL_CHOICES)}", param="tool_choice"
            )
        if choice["type"] == "tool" and not isinstance(choice.get("name"), str):
            raise MalformedRequest("tool_choice of type 'tool' needs a string 'name'", param="tool_choice.name")

    def _parse_message(self, content: object, role: Role, index: int, where: str) -> None:
        if isinstance(content, str):
            if role is Role.USER:
                self.request.turn_count += 1
            self._add_text(role, content, index, "content")
            return
        if not isinstance(content, list):
            raise MalformedRequest(
                f"{where}.content must be a string or an array of blocks, not {json_type(content)}",
                param=f"{where}.content",
            )
        user_turn = False
        for position, block in enumerate(content):
            kind = self._block(block, role, index, f"{where}.content[{position}]", "content")
            user_turn = user_turn or kind != "tool_result"
        if role is Role.USER and user_turn:
            self.request.turn_count += 1

    def _block(self, block: object, role: Role, index: int, where: str, source: str) -> str:
        """Read one content block; returns its type."""
        if not isinstance(block, dict):
            raise MalformedRequest(f"{where} must be an object, not {json_type(block)}", param=where)
        kind = block.get("type")
        if not isinstance(kind, str):
            raise MalformedRequest(f"{where}.type must be a string", param=f"{where}.type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise MalformedRequest(f"{where}.text must be a string", param=f"{where}.text")
            self._add_text(role, text, index, source)
        elif kind == "image":
            self._image(block.get("source"), index, where)
        elif kind == "document":
            self._document(block.get("source"), role, index, where, source)
        elif kind == "tool_use":
            if role is not Role.ASSISTANT:
                raise MalformedRequest(f"{where}: tool_use blocks belong to assistant messages", param=where)
            name = block.get("name")
            if not isinstance(name, str) or not name:
                raise MalformedRequest(f"{where}.name must be a non-empty string", param=f"{where}.name")
            arguments = block.get("input", {})
            if not isinstance(arguments, dict):
                raise MalformedRequest(f"{where}.input must be an object", param=f"{where}.input")
            self._add_tool_call(name, json.dumps(arguments, ensure_ascii=False), index)
        elif kind == "tool_result":
            if role is not Role.USER:
                raise MalformedRequest(f"{where}: tool_result blocks belong to user messages", param=where)
            if not isinstance(block.get("tool_use_id"), str):
                raise MalformedRequest(f"{where}.tool_use_id must be a string", param=f"{where}.tool_use_id")
            result = block.get("content")
            if isinstance(result, str):
                self._add_text(Role.TOOL, result, index, "tool_result")
            elif isinstance(result, list):
                for position, inner in enumerate(result):
                    self._block(inner, Role.TOOL, index, f"{where}.content[{position}]", "tool_result")
            elif result is not None:
                raise MalformedRequest(
                    f"{where}.content must be a string or an array of blocks", param=f"{where}.content"
                )
        # thinking, redacted_thinking, server tool blocks and unknown future types pass unread.
        return kind

    def _image(self, source: object, index: int, where: str) -> None:
        if not isinstance(source, dict):
            raise MalformedRequest(f"{where}.source must be an object", param=f"{where}.source")
        req = self.request
        if len(req.images) + len(req.remote_images) >= self.limits.max_images:
            raise PayloadTooLarge(f"request has more than {self.limits.max_images} images", code="too_many_images")
        kind = source.get("type")
        if kind == "url":
            url = source.get("url")
            if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
                raise MalformedRequest(f"{where}.source.url must be an http(s) URL", param=f"{where}.source.url")
            req.remote_images.append(RemoteImage(url=url, message_index=index))
        elif kind == "base64":
            media_type, data = source.get("media_type"), source.get("data")
            if not isinstance(media_type, str) or not isinstance(data, str):
                raise MalformedRequest(f"{where}.source needs string 'media_type' and 'data'", param=f"{where}.source")
            mime, payload = parse_data_uri(f"data:{media_type};base64,{data}")
            req.images.append(inspect_image(payload, declared_mime=mime, limits=self.limits, message_index=index))
        elif kind == "file":
            return  # an uploaded file reference: nothing to inspect here
        else:
            raise MalformedRequest(
                f"{where}.source.type must be 'base64', 'url' or 'file', not {kind!r}", param=f"{where}.source.type"
            )

    def _document(self, source: object, role: Role, index: int, where: str, origin: str) -> None:
        if not isinstance(source, dict):
            raise MalformedRequest(f"{where}.source must be an object", param=f"{where}.source")
        kind = source.get("type")
        if kind == "text":
            data = source.get("data")
            if not isinstance(data, str):
                raise MalformedRequest(f"{where}.source.data must be a string", param=f"{where}.source.data")
            self._add_text(role, data, index, origin)
        elif kind == "content":
            blocks = source.get("content")
            if isinstance(blocks, str):
                self._add_text(role, blocks, index, origin)
            elif isinstance(blocks, list):
                for position, inner in enumerate(blocks):
                    self._block(inner, role, index, f"{where}.source.content[{position}]", origin)
        # base64 (PDF), url and file documents are passed on unread (see SECURITY.md).


def with_system_prompt(raw: dict[str, Any], content: str, mode: str) -> str | list[Any]:
    """`system` with the policy's prompt inserted before the client's (`insert`) or in its place."""
    existing = raw.get("system")
    if mode == "replace" or not existing:
        return content
    if isinstance(existing, list):
        return [{"type": "text", "text": content}, *existing]
    return f"{content}\n\n{existing}"


# -- what the router answers itself -----------------------------------------------------------


def message_id() -> str:
    return f"msg-vsr-{uuid.uuid4().hex[:24]}"


def error_envelope(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error envelope: {"type": "error", "error": {"type", "message"}}, typed by status."""
    return {"type": "error", "error": {"type": error_type(status, "anthropic"), "message": message}}


class MessagesFormat(ApiFormat):
    """Anthropic Messages; sent as Chat Completions to a model that speaks only OpenAI (its
    translation, `messages_chat.MessagesToChat`, is given it by the registry's line)."""

    kind: ClassVar[ApiKind] = ApiKind.MESSAGES
    paths: ClassVar[tuple[str, ...]] = ("/v1/messages",)
    error_family = "anthropic"
    id_prefix: ClassVar[str] = "msg"
    stream_style = "assembled_message"
    reasoning_fields = "thinking"

    def read(self, data: dict[str, Any], limits: ImageLimits) -> RoutingRequest:
        return MessagesParser(data, self.kind, limits).parse()

    def error_envelope(
        self, status: int, message: str, *, code: str | None = None, param: str | None = None, kind: str | None = None
    ) -> dict[str, Any]:
        """Anthropic's envelope (`kind` is an OpenAI type, which this envelope does not use)."""
        return error_envelope(status, message)

    def reply(self, model: str, text: str, reply_id: str, created: int) -> dict[str, Any]:
        return assistant_message(model, text, reply_id=reply_id)

    def reply_events(self, model: str, text: str, reply_id: str, created: int) -> list[tuple[str | None, Any]]:
        """message_start, one text block, message_delta, message_stop."""
        started = {**assistant_message(model, text, reply_id=reply_id), "content": [], "stop_reason": None}
        stop = {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 0}}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"message": started}),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
            ("content_block_stop", {"index": 0}),
            ("message_delta", stop),
            ("message_stop", {}),
        ]
        return [(name, {"type": name, **data}) for name, data in events]

    def read_answer(self, doc: dict[str, Any], answer: Answer) -> None:
        answer.finish_reason = doc.get("stop_reason") if isinstance(doc.get("stop_reason"), str) else None
        blocks = doc.get("content")
        answer.outputs = [content_block(block) for block in blocks] if isinstance(blocks, list) else []

    def redact_calls(self, doc: dict[str, Any], mask: Callable[[str], str]) -> None:
        for block in doc.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                masked = mask(arguments_text(block.get("input")))
                try:
                    block["input"] = json.loads(masked)
                except ValueError:
                    block["input"] = {"_arguments": masked}

    def storable_refusal(self, answer: Answer) -> str | None:
        """A message that ended its turn with text blocks only."""
        if answer.finish_reason != "end_turn":
            return "finish_reason"
        for output in answer.outputs:
            if output.kind == "tool_call":
                return "tool_call"
            if output.kind == "other":
                return "no_output"
        return None

    def usage(self, output_tokens: int) -> dict[str, int]:
        return {"input_tokens": 0, "output_tokens": output_tokens}

    def insert_system_prompt(
        self, body: dict[str, Any], raw: dict[str, Any], content: str, mode: SystemPromptMode
    ) -> str | None:
        body["system"] = with_system_prompt(raw, content, mode)
        return None

    def tool_choice(self, raw: dict[str, Any]) -> str | None:
        return tool_choice_word(raw.get("tool_choice"))

    def end_user(self, raw: dict[str, Any]) -> str | None:
        metadata = raw.get("metadata")
        value = metadata.get("user_id") if isinstance(metadata, dict) else None
        return value if isinstance(value, str) and value else None


def assistant_message(model: str, text: str, *, reply_id: str | None = None) -> dict[str, Any]:
    """A complete assistant message (a clarification, a refusal, a cached answer)."""
    return {
        "id": reply_id or message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def sse_event(name: str, data: dict[str, Any]) -> bytes:
    """One Messages SSE event: its type on the `event:` line and in the data."""
    return b"event: " + name.encode() + b"\ndata: " + dumps({"type": name, **data}) + b"\n\n"


def assembled_message(events: list[tuple[str | None, str]]) -> dict[str, Any] | None:
    """The whole message a Messages SSE stream carried ((name, data) pairs, `sse.events`), or
    None when it did not end with message_stop (cut off, or an error event)."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, list[str]] = {}
    for _, data in events:
        try:
            event = json.loads(data)
        except ValueError:
            return None
        if not isinstance(event, dict):
            return None
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[int(event.get("index", len(blocks)))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            index, delta = int(event.get("index", 0)), event["delta"]
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            if delta.get("type") == "text_delta":
                block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                partial_json.setdefault(index, []).append(str(delta.get("partial_json", "")))
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
        elif kind == "message_delta" and message is not None:
            change = event.get("delta")
            if isinstance(change, dict):
                message.update({k: v for k, v in change.items() if k in ("stop_reason", "stop_sequence")})
            if isinstance(event.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **event["usage"]}
        elif kind == "error":
            return None
        elif kind == "message_stop" and message is not None:
            for index, pieces in partial_json.items():
                text = "".join(pieces)
                try:
                    blocks[index]["input"] = json.loads(text) if text.strip() else {}
                except ValueError:
                    blocks[index]["input"] = {"_arguments": text}
            message["content"] = [blocks[i] for i in sorted(blocks)]
            return message
    return None


REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def content_block(block: Any) -> Output:
    """A Messages content block: tool_use blocks are the calls, their `input` the arguments."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "tool_use":
        call = ToolCall(str(block.get("name") or ""), arguments_text(block.get("input")), str(block.get("id") or ""))
        return Output("tool_call", call=call)
    if kind == "text" and isinstance(block.get("text"), str):
        return Output("text", (block["text"],))
    return Output("reasoning" if kind in REASONING_BLOCKS else "other")
