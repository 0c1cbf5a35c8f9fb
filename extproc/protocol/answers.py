"""Upstream answers read in one place, from a JSON body (`read_json`) or an SSE stream
(`StreamReader`, fed chunk by chunk; `read_stream` for a whole body), into one `Answer`
(`extproc.protocol.answer`). Each format reads its own shapes (`read_answer`, and for a stream of
choice deltas `stream_choice`); how its stream is read is the format's `stream_style`:

- `deltas` (Chat Completions, Completions): read delta by delta, each choice's text and tool-call
  pieces as they come; complete when `[DONE]` is the last event;
- `final_response` (Responses): read from the last event that carries the finished `response`;
- `assembled_message` (Anthropic Messages): read from the message its events assemble.

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
from typing import Any

from extproc.protocol import sse
from extproc.protocol.answer import LEGACY_CALL as LEGACY_CALL
from extproc.protocol.answer import Answer as Answer
from extproc.protocol.answer import Output as Output
from extproc.protocol.answer import ToolCall as ToolCall
from extproc.protocol.answer import arguments_text as arguments_text
from extproc.protocol.answer import completion_tokens, text_of
from extproc.protocol.formats import format_for
from extproc.protocol.formats.base import ApiFormat
from extproc.protocol.formats.messages import assembled_message
from extproc.protocol.request import ApiKind

# Responses stream events that carry the finished (or given-up) response.
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def read_json(api: ApiKind, doc: Any) -> Answer:
    """A non-streamed answer (or a Responses `response` object, a Messages `message`)."""
    if not isinstance(doc, dict):
        return Answer(choices=0)
    answer = Answer(
        model=text_of(doc.get("model")),
        answer_id=text_of(doc.get("id")),
        completion_tokens=completion_tokens(doc),
        source=doc,
    )
    format_for(api).read_answer(doc, answer)
    return answer


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
    the answer so far (`answer`), in the way its format's `stream_style` says."""

    api: ApiKind
    calls: dict[tuple[int, int], StreamCall] = field(default_factory=dict)  # (choice, tool index)
    _format: ApiFormat = field(init=False)
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
    _final: dict[str, Any] | None = None  # final_response: the last final event's response
    _final_completed: bool = False
    _events: list[tuple[str | None, str]] = field(default_factory=list)  # assembled_message: every event's data
    _objects: list[tuple[str | None, str]] = field(default_factory=list)  # those that are JSON objects

    def __post_init__(self) -> None:
        self._format = format_for(self.api)

    def feed(self, chunk: bytes, end: bool = False) -> list[tuple[bytes, list[ChoiceDelta]]]:
        """Every event the chunk completes, as it came (its blank line included), with what it added."""
        return [(event, self.read_event(event.decode("utf-8", "replace"))) for event in self._splitter.feed(chunk, end)]

    def read_event(self, raw: str) -> list[ChoiceDelta]:
        """Record what one event says; for a stream of deltas, what each choice added."""
        _, data = sse.event(raw)
        if not data:
            return []
        style = self._format.stream_style
        if style == "assembled_message":
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
        if style == "assembled_message":
            self._objects.append((None, data))
            return []
        if style == "final_response":
            final = doc.get("response")
            if doc.get("type") in _FINAL_EVENTS and isinstance(final, dict):
                self._final, self._final_completed = final, doc.get("type") == "response.completed"
            return []
        self._model = text_of(doc.get("model")) or self._model
        self._id = self._id or text_of(doc.get("id"))
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
        read = self._format.stream_choice(choice)
        if read is None:
            return None
        text, pieces, names_calls = read
        self._names_tool_calls = self._names_tool_calls or names_calls
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
        style = self._format.stream_style
        if style == "assembled_message":
            # Read from its JSON events; complete only when every event up to message_stop was one.
            message = assembled_message(self._objects)
            if message is None:  # cut off or an error event: no message
                return Answer(choices=0, complete=False, unreadable=self._unreadable)
            answer = read_json(self.api, message)
            answer.complete = assembled_message(self._events) is not None
            answer.unreadable = self._unreadable
            return answer
        if style == "final_response":
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
