"""What an upstream answer is, whatever its API: its outputs in order (text, tool calls,
reasoning), why it stopped, its model, id and usage. Each format reads its own shapes into it
(`extproc.protocol.formats`, `read_answer`); `extproc.protocol.answers` reads bodies and streams.
Chat's and Completions' `choices` are read here, the two formats sharing them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

OutputKind = Literal["text", "tool_call", "reasoning", "other"]
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


def text_of(value: Any) -> str:
    """A field's value when it is a string, else ""."""
    return value if isinstance(value, str) else ""


def read_choices(choices: Any, answer: Answer, *, chat: bool) -> None:
    """Chat's and Completions' `choices` (`chat`: a choice's `message`; else its `text`)."""
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
        message = choice.get("message") if chat else None
        if not isinstance(message, dict):
            if isinstance(choice.get("text"), str):  # Completions' text (in a Chat answer: not its content)
                answer.outputs.append(Output("other" if chat else "text", (choice["text"],)))
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


def redact_choice_calls(doc: dict[str, Any], mask: Callable[[str], str]) -> None:
    """Mask the arguments of every tool call (and legacy function call) in `choices`' messages."""
    for choice in doc.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        legacy = (message or {}).get("function_call")
        if isinstance(legacy, dict):
            legacy["arguments"] = mask(arguments_text(legacy.get("arguments")))
        for call in (message or {}).get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                function["arguments"] = mask(arguments_text(function.get("arguments")))
