"""What one API format owns, behind the registry (`extproc.protocol.formats`): its paths, its
parser, its error envelope, the replies the router answers itself (whole and as stream events),
where a policy's system prompt goes, and the request fields each format names differently.

A format module subclasses `ApiFormat`; the registry's one line makes it known to the parser,
the renderer of decisions and Envoy's local replies.
"""

from __future__ import annotations

import time
import uuid
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

from extproc.errors import ErrorFamily, error_type, openai_envelope
from extproc.images import ImageLimits
from extproc.protocol.jsonbody import dumps
from extproc.protocol.request import ApiKind, RoutingRequest

SystemPromptMode = Literal["insert", "replace"]


class ApiFormat(ABC):
    """One API's shapes. Subclasses set the class attributes and the abstract methods."""

    kind: ClassVar[ApiKind]
    paths: ClassVar[tuple[str, ...]]
    error_family: ClassVar[ErrorFamily] = "openai"
    id_prefix: ClassVar[str]
    # The format a body is sent upstream in when the model does not speak this one (None: never).
    translated_to: ClassVar[ApiKind | None] = None

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
