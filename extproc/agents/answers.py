"""Tool calls found in upstream answers, and the tool rules' verdicts applied to them.

JSON answers are judged whole. Chat Completions streams pass through event by event until the
first tool-call delta; from there every event is held (content included, to keep the order)
until the stream ends, the calls are reassembled and judged, and then released: unchanged
(allow, annotate), with each call's arguments masked in one delta (redact), or replaced by a
refusal (block). Nothing of a tool call reaches the client before its verdict; the cost is that
a tool call's arguments arrive at once, at the end. Responses API streams (tool-capable requests
only) are held whole, judged on `response.completed`, and released or replaced by a refusal
(a redact rule blocks there: the function-call argument events cannot be rewritten safely).
Anthropic Messages answers: tool_use blocks are the calls (JSON judged whole, streams held whole
and judged on the message their events assemble, as Responses streams are).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from extproc.agents.tool_calls import ToolCall, Verdict, redact_arguments
from extproc.protocol import sse
from extproc.protocol.anthropic import assembled_message
from extproc.protocol.request import ApiKind
from extproc.protocol.responses import assistant_reply, assistant_reply_stream, dumps


def calls_in_answer(api: ApiKind, doc: Any) -> tuple[list[ToolCall], str]:
    """(tool calls, the answer's text) of a non-streamed answer (or a Responses `response`)."""
    calls: list[ToolCall] = []
    texts: list[str] = []
    if not isinstance(doc, dict):
        return calls, ""
    if api is ApiKind.MESSAGES:  # tool_use blocks are the tool calls; their `input` the arguments
        for block in doc.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                name, call_id = str(block.get("name") or ""), str(block.get("id") or "")
                calls.append(ToolCall(name, _text(block.get("input")), call_id))
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
        return calls, "\n".join(texts)
    if api is ApiKind.RESPONSES:
        for item in doc.get("output") or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                calls.append(
                    ToolCall(str(item.get("name") or ""), _text(item.get("arguments")), str(item.get("call_id") or ""))
                )
            for part in item.get("content") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
        return calls, "\n".join(texts)
    for choice in doc.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message") if api is ApiKind.CHAT else None
        if isinstance(message, dict):
            if isinstance(message.get("content"), str):
                texts.append(message["content"])
            legacy = message.get("function_call")
            if isinstance(legacy, dict):
                calls.append(ToolCall(str(legacy.get("name") or ""), _text(legacy.get("arguments"))))
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    calls.append(
                        ToolCall(
                            str(function.get("name") or ""), _text(function.get("arguments")), str(call.get("id") or "")
                        )
                    )
        elif isinstance(choice.get("text"), str):
            texts.append(choice["text"])
    return calls, "\n".join(texts)


def _text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False) if arguments is not None else ""


def refusal(api: ApiKind, verdict: Verdict, model: str) -> dict[str, Any]:
    return assistant_reply(api, model or f"vsr/{verdict.rule}", verdict.message)


def apply_to_json(api: ApiKind, doc: dict[str, Any], verdict: Verdict) -> bytes | None:
    """The answer's new body under the verdict, or None to leave it unchanged."""
    model = str(doc.get("model") or "")
    if verdict.action == "block":
        return dumps(refusal(api, verdict, model))
    if verdict.action != "redact":
        return None
    if api is ApiKind.MESSAGES:
        for block in doc.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                masked = redact_arguments(_text(block.get("input")))[0]
                try:
                    block["input"] = json.loads(masked)
                except ValueError:
                    block["input"] = {"_arguments": masked}
    elif api is ApiKind.RESPONSES:
        for item in doc.get("output") or []:
            if isinstance(item, dict) and item.get("type") == "function_call":
                item["arguments"] = redact_arguments(_text(item.get("arguments")))[0]
    else:
        for choice in doc.get("choices") or []:
            message = choice.get("message") if isinstance(choice, dict) else None
            legacy = (message or {}).get("function_call")
            if isinstance(legacy, dict):
                legacy["arguments"] = redact_arguments(_text(legacy.get("arguments")))[0]
            for call in (message or {}).get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    function["arguments"] = redact_arguments(_text(function.get("arguments")))[0]
    return dumps(doc)


# -- streams -----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Call:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


# An SSE event ends at a blank line: LF, CRLF or CR line ends are all legal.
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LEGACY_CALL = -1  # the deprecated `function_call` (one per choice), beside indexed tool calls
# Streams held whole and judged on the finished answer (their tool-call events cannot be rewritten
# one by one safely); a redact rule blocks there.
_HELD_WHOLE = frozenset({ApiKind.RESPONSES, ApiKind.MESSAGES})


@dataclass(slots=True)
class StreamGate:
    """Holds a stream's tool calls until they are judged. Feed it the body chunks; when `ready`
    (the stream ended with calls held), judge `calls()` and `release(verdict)` the rest. Bytes
    pass through exactly as they came (events are split on bytes, decoded only to be read)."""

    api: ApiKind
    _partial: bytes = b""
    _held: list[bytes] = field(default_factory=list)  # raw events, with their blank line
    _holding: bool = False
    _calls: dict[tuple[int, int], _Call] = field(default_factory=dict)  # (choice, tool index)
    _text: list[str] = field(default_factory=list)  # all content, for judging
    _held_text: list[str] = field(default_factory=list)  # content not yet passed on
    _model: str = ""
    _final: dict[str, Any] | None = None  # Responses: the completed (or incomplete) response; Messages: the message
    _events: list[tuple[str | None, str]] = field(default_factory=list)  # Messages: every event's data
    ready: bool = False

    def __post_init__(self) -> None:
        if self.api in _HELD_WHOLE:  # held whole: judged on the completed response / message
            self._holding = True

    def feed(self, chunk: bytes, end: bool) -> bytes:
        """The bytes to pass to the client now; the rest is held."""
        data = self._partial + chunk
        out: list[bytes] = []
        position = 0
        for match in _EVENT_END.finditer(data):
            self._route(data[position : match.end()], out)
            position = match.end()
        self._partial = data[position:]
        if end:
            if self._partial:
                self._route(self._partial, out)
                self._partial = b""
            self.ready = self._holding
        return b"".join(out)

    def _route(self, event: bytes, out: list[bytes]) -> None:
        carries = self._inspect(event.decode("utf-8", "replace"))
        if carries or self._holding:
            self._holding = True
            self._held.append(event)
        else:
            out.append(event)

    def _inspect(self, raw: str) -> bool:
        """Record what the event says; True when it carries a tool call (start holding)."""
        _, data = sse.event(raw)
        if not data or data.strip() == "[DONE]":
            return False
        try:
            doc = json.loads(data)
        except ValueError:
            return False
        if not isinstance(doc, dict):
            return False
        if self.api is ApiKind.MESSAGES:
            self._events.append((None, data))
            return False
        if self.api is ApiKind.RESPONSES:
            final = doc.get("response")
            if doc.get("type") in ("response.completed", "response.incomplete", "response.failed") and isinstance(
                final, dict
            ):
                self._final = final
            return False
        self._model = str(doc.get("model") or self._model)
        carries = False
        for position, choice in enumerate(doc.get("choices") or []):
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            choice_index = choice.get("index", position)
            choice_index = choice_index if isinstance(choice_index, int) else position
            pieces = [p for p in delta.get("tool_calls") or [] if isinstance(p, dict)]
            legacy = delta.get("function_call")
            if isinstance(legacy, dict):
                pieces.append({"index": _LEGACY_CALL, "function": legacy})
            carries = carries or bool(pieces)
            if isinstance(delta.get("content"), str):
                self._text.append(delta["content"])
                if carries or self._holding:
                    self._held_text.append(delta["content"])
            for piece in pieces:
                index = piece.get("index")
                call = self._calls.setdefault((choice_index, index if isinstance(index, int) else 0), _Call())
                call.call_id = str(piece.get("id") or call.call_id)
                function = piece.get("function") or {}
                if isinstance(function, dict):
                    call.name = str(function.get("name") or call.name)
                    if isinstance(function.get("arguments"), str):
                        call.arguments.append(function["arguments"])
        return carries

    def calls(self) -> tuple[list[ToolCall], str]:
        if self.api is ApiKind.MESSAGES:
            self._final = assembled_message(self._events)
            if self._final is None:  # cut off or an error event: no message to judge, pass it as it came
                return [], ""
            return calls_in_answer(self.api, self._final)
        if self.api is ApiKind.RESPONSES:
            return calls_in_answer(self.api, self._final or {})
        calls = [ToolCall(c.name, "".join(c.arguments), c.call_id) for _, c in sorted(self._calls.items())]
        return calls, "".join(self._text)

    def release(self, verdict: Verdict) -> bytes:
        """What the client gets for the held part of the stream under `verdict`."""
        held = b"".join(self._held)
        self._held = []
        if verdict.action in ("none", "allow", "annotate"):
            return held
        model = self._model or str((self._final or {}).get("model") or "") or f"vsr/{verdict.rule}"
        if self.api in _HELD_WHOLE:  # nothing was passed on yet: a whole refusal stream
            return assistant_reply_stream(self.api, model, verdict.message)
        if verdict.action == "block":  # the stream so far carried no tool call: end it with the refusal
            return self._finish(model, {"content": verdict.message}, "stop")
        return self._redacted(model)

    def _finish(self, model: str, delta: dict[str, Any], reason: str) -> bytes:
        base = {"id": "chatcmpl-vsr-tool-rules", "object": "chat.completion.chunk", "model": model}
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]},
        ]
        return b"".join(b"data: " + dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"

    def _redacted(self, model: str) -> bytes:
        """The held part rebuilt: its content as it came, each call once with masked arguments."""
        base = {"id": "chatcmpl-vsr-redacted", "object": "chat.completion.chunk", "model": model}
        chunks: list[dict[str, Any]] = []
        text = "".join(self._held_text)
        if text:
            chunks.append({**base, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
        for (choice, index), call in sorted(self._calls.items()):
            arguments = redact_arguments("".join(call.arguments))[0]
            if index == _LEGACY_CALL:
                delta: dict[str, Any] = {"function_call": {"name": call.name, "arguments": arguments}}
            else:
                function = {"name": call.name, "arguments": arguments}
                delta = {"tool_calls": [{"index": index, "id": call.call_id, "type": "function", "function": function}]}
            chunks.append({**base, "choices": [{"index": choice, "delta": delta, "finish_reason": None}]})
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        out = b"".join(b"data: " + dumps(c) + b"\n\n" for c in chunks)
        return out + b"data: [DONE]\n\n"
