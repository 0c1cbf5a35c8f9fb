"""Upstream answers read in one place: their text, tool calls, finish reason, model and usage,
in each API's shapes (Chat Completions, Completions, Responses, Anthropic Messages), from a JSON
body (`read_json`) or an SSE stream (`StreamReader`, fed chunk by chunk; `read_stream` for a
whole body).

An answer reads as its outputs in order: a Chat choice's content and tool calls, a Messages
content block, a Responses output item. What to make of them is the caller's: the semantic cache
stores only a complete text answer (`extproc.cache.stored_answers`), the tool rules judge the
calls (`extproc.agents.answer_gate`). Streams are split into events on bytes
(`sse.EventSplitter`), so CRLF framing and a UTF-8 character split across chunks read right.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from extproc.protocol import sse
from extproc.protocol.formats.messages import assembled_message
from extproc.protocol.request import ApiKind

OutputKind = Literal["text", "tool_call", "reasoning", "other"]
# Responses stream events that carry the finished (or given-up) response.
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
LEGACY_CALL = -1  # a Chat stream's deprecated `function_call` (one per choice), beside indexed tool calls


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: str  # as the model or client sent them: usually a JSON object's text
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class Output:
    """One piece of an answer: text (a message's content parts), a tool call, the model's
    reasoning, or anything else (an unknown block or item, which a store must not take as text)."""

    kind: OutputKind
    texts: tuple[str, ...] = ()
    call: ToolCall | None = None


@dataclass(slots=True)
class Answer:
    outputs: list[Output] = field(default_factory=list)
    # Why it stopped: a Chat/Completions choice's `finish_reason` (the first choice's; a stream's
    # last one given), a Responses `status`, a Messages `stop_reason`.
    finish_reason: str | None = None
    model: str = ""
    answer_id: str = ""
    completion_tokens: int = 0
    choices: int = 1  # Chat/Completions: how many choices (a stream: the highest index + 1)
    # Chat: a `tool_calls` or `function_call` field is set (well-formed or not).
    names_tool_calls: bool = False
    # A stream ended as its API ends one (`[DONE]` last, `response.completed`, `message_stop`
    # with nothing unreadable before it); a JSON body always is.
    complete: bool = True
    # A stream event whose data is not a JSON object (a Chat stream: nor its one last `[DONE]`).
    unreadable: bool = False
    # The JSON object it was read from: the body, a Responses stream's final `response`, the
    # message a Messages stream assembled (None for a Chat or Completions stream).
    source: dict[str, Any] | None = None

    def texts(self) -> list[str]:
        """The answer's own text, in order: what a text-only answer consists of."""
        return [text for output in self.outputs if output.kind == "text" for text in output.texts]

    def every_text(self) -> list[str]:
        """All the text it carries, reasoning and unknown parts included (what a judge reads)."""
        return [text for output in self.outputs for text in output.texts]

    def tool_calls(self) -> list[ToolCall]:
        return [output.call for output in self.outputs if output.call is not None]


def arguments_text(arguments: Any) -> str:
    """A call's arguments as text: a string as it came, anything else as JSON."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False) if arguments is not None else ""


def completion_tokens(doc: dict[str, Any]) -> int:
    """The answer's output tokens from its `usage` (0 when not given)."""
    usage = doc.get("usage")
    if isinstance(usage, dict):
        for key in ("completion_tokens", "output_tokens"):
            value = usage.get(key)
            if isinstance(value, int) and value >= 0:
                return value
    return 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# -- JSON bodies -------------------------------------------------------------------------------


def read_json(api: ApiKind, doc: Any) -> Answer:
    """A non-streamed answer (or a Responses `response` object, a Messages `message`)."""
    if not isinstance(doc, dict):
        return Answer(choices=0)
    answer = Answer(
        model=_str(doc.get("model")),
        answer_id=_str(doc.get("id")),
        completion_tokens=completion_tokens(doc),
        source=doc,
    )
    if api is ApiKind.MESSAGES:
        answer.finish_reason = doc.get("stop_reason") if isinstance(doc.get("stop_reason"), str) else None
        blocks = doc.get("content")
        answer.outputs = [_block(block) for block in blocks] if isinstance(blocks, list) else []
    elif api is ApiKind.RESPONSES:
        answer.finish_reason = doc.get("status") if isinstance(doc.get("status"), str) else None
        items = doc.get("output")
        answer.outputs = [_item(item) for item in items] if isinstance(items, list) else []
    else:
        _read_choices(api, doc.get("choices"), answer)
    return answer


def _block(block: Any) -> Output:
    """A Messages content block: tool_use blocks are the calls, their `input` the arguments."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "tool_use":
        call = ToolCall(str(block.get("name") or ""), arguments_text(block.get("input")), str(block.get("id") or ""))
        return Output("tool_call", call=call)
    if kind == "text" and isinstance(block.get("text"), str):
        return Output("text", (block["text"],))
    return Output("reasoning" if kind in _REASONING_BLOCKS else "other")


def _item(item: Any) -> Output:
    """A Responses output item; its content parts' texts (a message's `output_text` parts)."""
    if not isinstance(item, dict):
        return Output("other")
    kind = item.get("type")
    parts = [p for p in item.get("content") or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    if kind == "function_call":
        arguments = arguments_text(item.get("arguments"))
        return Output(
            "tool_call", call=ToolCall(str(item.get("name") or ""), arguments, str(item.get("call_id") or ""))
        )
    if kind == "message":
        return Output("text", tuple(p["text"] for p in parts if p.get("type") == "output_text"))
    return Output("reasoning" if kind == "reasoning" else "other", tuple(p["text"] for p in parts))


def _read_choices(api: ApiKind, choices: Any, answer: Answer) -> None:
    if not isinstance(choices, list):
        answer.choices = 0
        return
    first = choices[0] if choices else None
    answer.choices = len(choices) if isinstance(first, dict) else 0  # a first entry that is no choice: none
    if isinstance(first, dict) and isinstance(first.get("finish_reason"), str):
        answer.finish_reason = first["finish_reason"]
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message") if api is ApiKind.CHAT else None
        if not isinstance(message, dict):
            if isinstance(choice.get("text"), str):  # Completions' text (in a Chat answer: not its content)
                answer.outputs.append(Output("text" if api is not ApiKind.CHAT else "other", (choice["text"],)))
            continue
        answer.names_tool_calls = answer.names_tool_calls or bool(
            message.get("tool_calls") or message.get("function_call")
        )
        if isinstance(message.get("content"), str):
            answer.outputs.append(Output("text", (message["content"],)))
        legacy = message.get("function_call")
        if isinstance(legacy, dict):
            call = ToolCall(str(legacy.get("name") or ""), arguments_text(legacy.get("arguments")))
            answer.outputs.append(Output("tool_call", call=call))
        for entry in message.get("tool_calls") or []:
            function = entry.get("function") if isinstance(entry, dict) else None
            if isinstance(function, dict):
                name, arguments = str(function.get("name") or ""), arguments_text(function.get("arguments"))
                answer.outputs.append(Output("tool_call", call=ToolCall(name, arguments, str(entry.get("id") or ""))))


# -- streams -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChoiceDelta:
    """What one choice of one Chat/Completions stream event added: its text, and whether it
    carried a piece of a tool call."""

    choice: int
    text: str | None
    carries_call: bool


@dataclass(slots=True)
class StreamCall:
    """A Chat stream's tool call, assembled from its deltas."""

    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class StreamReader:
    """Reads a stream as its chunks come (`feed`), or event by event (`read_event`), and tells
    the answer so far (`answer`). Chat and Completions streams are read delta by delta; Responses
    streams are read from their final `response`; Messages streams from the message their events
    assemble."""

    api: ApiKind
    calls: dict[tuple[int, int], StreamCall] = field(default_factory=dict)  # (choice, tool index)
    _splitter: sse.EventSplitter = field(default_factory=sse.EventSplitter)
    _texts: list[str] = field(default_factory=list)
    _finish: str | None = None
    _model: str = ""
    _id: str = ""
    _tokens: int = 0
    _choices: int = 0
    _names_tool_calls: bool = False
    _done: bool = False  # the last event with data was `[DONE]`
    _unreadable: bool = False
    _final: dict[str, Any] | None = None  # Responses: the last final event's response
    _final_completed: bool = False
    _events: list[tuple[str | None, str]] = field(default_factory=list)  # Messages: every event's data
    _objects: list[tuple[str | None, str]] = field(default_factory=list)  # Messages: those that are JSON objects

    def feed(self, chunk: bytes, end: bool = False) -> list[tuple[bytes, list[ChoiceDelta]]]:
        """Every event the chunk completes, as it came (its blank line included), with what it added."""
        return [(event, self.read_event(event.decode("utf-8", "replace"))) for event in self._splitter.feed(chunk, end)]

    def read_event(self, raw: str) -> list[ChoiceDelta]:
        """Record what one event says; for Chat and Completions, what each choice added."""
        _, data = sse.event(raw)
        if not data:
            return []
        if self.api is ApiKind.MESSAGES:
            self._events.append((None, data))
        if self._done:  # a `[DONE]` that was not the last event
            self._unreadable = True
        self._done = data.strip() == "[DONE]"
        if self._done:
            return []
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            self._unreadable = True
            return []
        if self.api is ApiKind.MESSAGES:
            self._objects.append((None, data))
            return []
        if self.api is ApiKind.RESPONSES:
            final = doc.get("response")
            if doc.get("type") in _FINAL_EVENTS and isinstance(final, dict):
                self._final, self._final_completed = final, doc.get("type") == "response.completed"
            return []
        self._model = _str(doc.get("model")) or self._model
        self._id = self._id or _str(doc.get("id"))
        self._tokens = completion_tokens(doc) or self._tokens
        return [
            delta
            for position, choice in enumerate(doc.get("choices") or [])
            if (delta := self._choice(position, choice))
        ]

    def _choice(self, position: int, choice: Any) -> ChoiceDelta | None:
        if not isinstance(choice, dict):
            return None
        index = choice.get("index", position)
        if not isinstance(index, int):  # no choice number: read in place, but not one single choice
            index, self._choices = position, max(self._choices, 2)
        self._choices = max(self._choices, index + 1)
        if self.api is not ApiKind.CHAT:
            text = choice.get("text") if isinstance(choice.get("text"), str) else None
            pieces: list[dict[str, Any]] = []
        else:
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                return None
            self._names_tool_calls = self._names_tool_calls or bool(
                delta.get("tool_calls") or delta.get("function_call")
            )
            text = delta.get("content") if isinstance(delta.get("content"), str) else None
            pieces = [p for p in delta.get("tool_calls") or [] if isinstance(p, dict)]
            legacy = delta.get("function_call")
            if isinstance(legacy, dict):
                pieces.append({"index": LEGACY_CALL, "function": legacy})
        if text is not None:
            self._texts.append(text)
        for piece in pieces:
            self._call_piece(index, piece)
        if choice.get("finish_reason"):
            self._finish = str(choice["finish_reason"])
        return ChoiceDelta(index, text, bool(pieces))

    def _call_piece(self, choice: int, piece: dict[str, Any]) -> None:
        index = piece.get("index")
        call = self.calls.setdefault((choice, index if isinstance(index, int) else 0), StreamCall())
        call.call_id = str(piece.get("id") or call.call_id)
        function = piece.get("function") or {}
        if isinstance(function, dict):
            call.name = str(function.get("name") or call.name)
            if isinstance(function.get("arguments"), str):
                call.arguments.append(function["arguments"])

    def answer(self) -> Answer:
        """The answer the events so far carry (call it once the stream ended)."""
        if self.api is ApiKind.MESSAGES:
            # Read from its JSON events; complete only when every event up to message_stop was one.
            message = assembled_message(self._objects)
            if message is None:  # cut off or an error event: no message
                return Answer(choices=0, complete=False, unreadable=self._unreadable)
            answer = read_json(self.api, message)
            answer.complete = assembled_message(self._events) is not None
            answer.unreadable = self._unreadable
            return answer
        if self.api is ApiKind.RESPONSES:
            answer = read_json(self.api, self._final or {})
            answer.complete, answer.unreadable = self._final_completed, self._unreadable
            answer.source = self._final
            return answer
        outputs = [Output("text", tuple(self._texts))] if self._texts else []
        calls = [ToolCall(c.name, "".join(c.arguments), c.call_id) for _, c in sorted(self.calls.items())]
        outputs.extend(Output("tool_call", call=call) for call in calls)
        return Answer(
            outputs=outputs,
            finish_reason=self._finish,
            model=self._model,
            answer_id=self._id,
            completion_tokens=self._tokens,
            choices=self._choices,
            names_tool_calls=self._names_tool_calls,
            complete=self._done,
            unreadable=self._unreadable,
        )


def read_stream(api: ApiKind, body: bytes | Sequence[bytes]) -> Answer:
    """The answer a whole stream carries (one body, or its chunks in order)."""
    reader = StreamReader(api)
    for chunk in [body] if isinstance(body, bytes) else body:
        reader.feed(chunk)
    reader.feed(b"", end=True)
    return reader.answer()
