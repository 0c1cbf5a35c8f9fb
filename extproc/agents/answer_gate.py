"""The tool rules' verdicts applied to upstream answers: a JSON answer rewritten, a stream's tool
calls held until judged. Answers are read by `extproc.protocol.answers`.

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

from dataclasses import dataclass, field
from typing import Any

from extproc.agents.tool_calls import ToolCall, Verdict, redact_arguments
from extproc.protocol.answers import LEGACY_CALL, StreamReader, read_json
from extproc.protocol.formats import format_for
from extproc.protocol.request import ApiKind
from extproc.protocol.responses import assistant_reply, assistant_reply_stream, dumps


def calls_in_answer(api: ApiKind, doc: Any) -> tuple[list[ToolCall], str]:
    """(tool calls, the text to judge with them) of a non-streamed answer (or a Responses `response`)."""
    answer = read_json(api, doc)
    return answer.tool_calls(), "\n".join(answer.every_text())


def refusal(api: ApiKind, verdict: Verdict, model: str) -> dict[str, Any]:
    return assistant_reply(api, model or f"vsr/{verdict.rule}", verdict.message)


def apply_to_json(api: ApiKind, doc: dict[str, Any], verdict: Verdict) -> bytes | None:
    """The answer's new body under the verdict, or None to leave it unchanged."""
    model = str(doc.get("model") or "")
    if verdict.action == "block":
        return dumps(refusal(api, verdict, model))
    if verdict.action != "redact":
        return None
    format_for(api).redact_calls(doc, _mask)
    return dumps(doc)


def _mask(arguments: str) -> str:
    return redact_arguments(arguments)[0]


# -- streams -----------------------------------------------------------------------------------


def _held_whole(api: ApiKind) -> bool:
    """Streams not read delta by delta are held whole and judged on the finished answer (their
    tool-call events cannot be rewritten one by one safely); a redact rule blocks there."""
    return format_for(api).stream_style != "deltas"


@dataclass(slots=True)
class StreamGate:
    """Holds a stream's tool calls until they are judged. Feed it the body chunks; when `ready`
    (the stream ended with calls held), judge `calls()` and `release(verdict)` the rest. Bytes
    pass through exactly as they came (events are split on bytes, decoded only to be read)."""

    api: ApiKind
    _reader: StreamReader = field(init=False)
    _held: list[bytes] = field(default_factory=list)  # raw events, with their blank line
    _holding: bool = False
    _held_text: list[str] = field(default_factory=list)  # content not yet passed on
    ready: bool = False

    def __post_init__(self) -> None:
        self._reader = StreamReader(self.api)
        if _held_whole(self.api):  # held whole: judged on the completed response / message
            self._holding = True

    def feed(self, chunk: bytes, end: bool) -> bytes:
        """The bytes to pass to the client now; the rest is held."""
        out: list[bytes] = []
        for event, deltas in self._reader.feed(chunk, end):
            carries = False  # from the first choice that carries a tool call on, its content is held
            for delta in deltas:
                carries = carries or delta.carries_call
                if delta.text is not None and (carries or self._holding):
                    self._held_text.append(delta.text)
            if carries or self._holding:
                self._holding = True
                self._held.append(event)
            else:
                out.append(event)
        if end:
            self.ready = self._holding
        return b"".join(out)

    def calls(self) -> tuple[list[ToolCall], str]:
        answer = self._reader.answer()
        if _held_whole(self.api):  # judged on the finished response or message, as a JSON answer is
            return answer.tool_calls(), "\n".join(answer.every_text())
        return answer.tool_calls(), "".join(answer.texts())

    def release(self, verdict: Verdict) -> bytes:
        """What the client gets for the held part of the stream under `verdict`."""
        held = b"".join(self._held)
        self._held = []
        if verdict.action in ("none", "allow", "annotate"):
            return held
        model = self._reader.answer().model or f"vsr/{verdict.rule}"
        if _held_whole(self.api):  # nothing was passed on yet: a whole refusal stream
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
        for (choice, index), call in sorted(self._reader.calls.items()):
            arguments = redact_arguments("".join(call.arguments))[0]
            if index == LEGACY_CALL:
                delta: dict[str, Any] = {"function_call": {"name": call.name, "arguments": arguments}}
            else:
                function = {"name": call.name, "arguments": arguments}
                delta = {"tool_calls": [{"index": index, "id": call.call_id, "type": "function", "function": function}]}
            chunks.append({**base, "choices": [{"index": choice, "delta": delta, "finish_reason": None}]})
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        out = b"".join(b"data: " + dumps(c) + b"\n\n" for c in chunks)
        return out + b"data: [DONE]\n\n"
