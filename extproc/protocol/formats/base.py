"""What one API format owns, behind the registry (`extproc.protocol.formats`): its paths, its
parser, its error envelope, the replies the router answers itself (whole and as stream events),
where a policy's system prompt goes, and the request fields each format names differently.

A format module subclasses `ApiFormat`; the registry's one line makes it known to the parser,
the renderer of decisions and Envoy's local replies. A format that may be sent upstream as
another (Messages as Chat, to a model that speaks only OpenAI) is given its `Translation` there.
"""

from __future__ import annotations

import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Protocol

from extproc.errors import ErrorFamily, error_type, openai_envelope
from extproc.images import ImageLimits
from extproc.protocol.answer import Answer
from extproc.protocol.jsonbody import dumps
from extproc.protocol.request import ApiKind, RoutingRequest

SystemPromptMode = Literal["insert", "replace"]
# How a format's answer stream is read (`extproc.protocol.answers.StreamReader`): choice deltas as
# they come, the finished response a final event carries, or the message its events assemble.
StreamStyle = Literal["deltas", "final_response", "assembled_message"]
# Where a model family's reasoning setting goes in this format's bodies (`policy.reasoning`): the
# Chat paths of the family, its Responses effort path, or Anthropic's `thinking` field.
ReasoningFields = Literal["chat", "responses", "thinking"]
# One stream choice as read: its text, its tool-call pieces, whether it names tool calls at all.
ChoiceRead = tuple[str | None, list[dict[str, Any]], bool]


class StreamTranslator(Protocol):
    """A translated answer's stream, brought back event by event: fed the upstream's bytes (any
    chunking), it returns the client-format events those bytes complete (`end`: the last bytes)."""

    def feed(self, chunk: bytes, end: bool = False) -> bytes: ...


class Translation(ABC):
    """How a format's request is sent to an upstream that speaks only `target`, and how the
    answer (JSON, an error, a stream) comes back in the client's format."""

    target: ClassVar[ApiKind]

    @abstractmethod
    def request(self, raw: dict[str, Any], model: str) -> dict[str, Any]:
        """The `target` body for a (parsed, so well-formed) body; a RequestError where it has no
        `target` form."""

    @abstractmethod
    def answer(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A `target` JSON answer in the client's format."""

    @abstractmethod
    def error(self, status: int, body: bytes) -> bytes:
        """An upstream's error body (any shape) in the client's error envelope."""

    @abstractmethod
    def stream(self) -> StreamTranslator:
        """A new translator for one `target` answer stream."""


class ApiFormat(ABC):
    """One API's shapes. Subclasses set the class attributes and the abstract methods."""

    kind: ClassVar[ApiKind]
    paths: ClassVar[tuple[str, ...]]
    error_family: ClassVar[ErrorFamily] = "openai"
    id_prefix: ClassVar[str]
    # The top-level key that names a body of this format on a path that names no API (the
    # parser's guess, in registry order); None: known by its paths only.
    body_key: ClassVar[str | None] = None
    stream_style: ClassVar[StreamStyle] = "deltas"
    reasoning_fields: ClassVar[ReasoningFields] = "chat"

    def __init__(self, translation: Translation | None = None) -> None:
        # How a body is sent to a model that does not speak this format's family (None: never).
        self.translation = translation

    def parse(self, data: dict[str, Any], limits: ImageLimits) -> RoutingRequest:
        """The body (a JSON object) as the one RoutingRequest; a RequestError on bad input."""
        request = self.read(data, limits)
        request.tool_choice = self.tool_choice(data)
        request.end_user = self.end_user(data)
        return request

    @abstractmethod
    def read(self, data: dict[str, Any], limits: ImageLimits) -> RoutingRequest:
        """The format's parser over the body."""

    def error_envelope(
        self, status: int, message: str, *, code: str | None = None, param: str | None = None, kind: str | None = None
    ) -> dict[str, Any]:
        """The error envelope (OpenAI's by default); `kind` overrides the status's type."""
        return openai_envelope(message, kind or error_type(status, self.error_family), code, param)

    def new_reply_id(self) -> tuple[str, int]:
        return f"{self.id_prefix}-vsr-{uuid.uuid4().hex[:24]}", int(time.time())

    @abstractmethod
    def reply(self, model: str, text: str, reply_id: str, created: int) -> dict[str, Any]:
        """A complete assistant reply with `text` (a clarification, a cached answer)."""

    @abstractmethod
    def reply_events(self, model: str, text: str, reply_id: str, created: int) -> list[tuple[str | None, Any]]:
        """The same reply as stream events: (event name or None, data object or terminator text)."""

    def reply_stream(self, model: str, text: str, reply_id: str, created: int) -> bytes:
        out = bytearray()
        for event, data in self.reply_events(model, text, reply_id, created):
            if event is not None:
                out += f"event: {event}\n".encode()
            out += b"data: " + (data.encode() if isinstance(data, str) else dumps(data)) + b"\n\n"
        return bytes(out)

    @abstractmethod
    def insert_system_prompt(
        self, body: dict[str, Any], raw: dict[str, Any], content: str, mode: SystemPromptMode
    ) -> str | None:
        """Put the policy's prompt into `body` (a copy of `raw`); a note when it cannot be applied."""

    # -- upstream answers ------------------------------------------------------------------
    @abstractmethod
    def read_answer(self, doc: dict[str, Any], answer: Answer) -> None:
        """Read a JSON answer's outputs and why it stopped into `answer` (model, id and usage are read already)."""

    def stream_choice(self, choice: dict[str, Any]) -> ChoiceRead | None:
        """A `deltas` stream's choice (None: nothing readable in it)."""
        raise NotImplementedError(f"{self.kind.value} answers do not stream choice deltas")

    @abstractmethod
    def redact_calls(self, doc: dict[str, Any], mask: Callable[[str], str]) -> None:
        """Mask every tool call's arguments in a JSON answer, in place (the tool rules' redact)."""

    def storable_refusal(self, answer: Answer) -> str | None:
        """Why a complete answer is not one text answer the cache may store (None: it is).
        Chat's and Completions' rules: one choice that stopped, naming no tool calls."""
        if answer.choices != 1:
            return "choices"
        if answer.finish_reason != "stop":
            return "finish_reason"
        if answer.names_tool_calls:
            return "tool_call"
        return None

    def usage(self, output_tokens: int) -> dict[str, int]:
        """A stored answer's `usage`: the tokens it took, no prompt (a cache hit costs none)."""
        return {"completion_tokens": output_tokens, "prompt_tokens": 0, "total_tokens": output_tokens}

    def previous_response_id(self, raw: dict[str, Any]) -> str | None:
        """The earlier answer this request continues, by its id (the conversation store's key)."""
        return None

    def keeps_exchange(self, raw: dict[str, Any]) -> bool:
        """Whether the API keeps this exchange server-side, so its answer id can be continued."""
        return False

    def tool_choice(self, raw: dict[str, Any]) -> str | None:
        """`tool_choice` as one word: none / auto / required, or the forced function's name."""
        choice = raw.get("tool_choice")
        if isinstance(choice, str):
            return choice
        if isinstance(choice, dict):
            function = choice.get("function")
            name = function.get("name") if isinstance(function, dict) else choice.get("name")
            return str(name) if name else None
        return None

    def end_user(self, raw: dict[str, Any]) -> str | None:
        """Who the client says the end user is (OpenAI's `user`)."""
        value = raw.get("user")
        return value if isinstance(value, str) and value else None


def choices_reply(reply_id: str, kind: str, created: int, model: str, part: dict[str, Any]) -> dict[str, Any]:
    """A finished OpenAI `choices` answer (Chat's `chat.completion`, Completions' `text_completion`)
    with one choice carrying `part` (its message or text), no tokens counted."""
    choice = {"index": 0, **part, "logprobs": None, "finish_reason": "stop"}
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {"id": reply_id, "object": kind, "created": created, "model": model, "choices": [choice], "usage": usage}
