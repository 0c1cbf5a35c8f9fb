"""The one transport-free request every signal reads, whatever OpenAI API it came from."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from extproc.images import DecodedImage, RemoteImage


class ApiKind(StrEnum):
    CHAT = "chat_completions"
    RESPONSES = "responses"
    COMPLETIONS = "completions"


class Role(StrEnum):
    SYSTEM = "system"  # includes "developer" and Responses `instructions`
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class TextSegment:
    """One piece of text with the role that sent it.

    `message_index` is the position of the message (or input item) it came from; `source`
    says where inside it: "content", "tool_call" (function name and arguments), "tool_result".
    """

    role: Role
    text: str
    message_index: int
    source: str = "content"


@dataclass(slots=True)
class RoutingRequest:
    """Everything the router needs from one OpenAI-style request."""

    api: ApiKind
    model: str | None
    stream: bool
    texts: list[TextSegment] = field(default_factory=list)
    images: list[DecodedImage] = field(default_factory=list)
    remote_images: list[RemoteImage] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)  # declared tool (function) names
    tool_call_count: int = 0
    turn_count: int = 0  # user messages (Chat) / user input items (Responses); 1 for Completions
    raw: dict[str, Any] = field(default_factory=dict)  # the parsed JSON body, for rewriting

    def iter_text(self, roles: Collection[Role] | None = None) -> Iterator[TextSegment]:
        """Text segments sent by `roles` (all roles when None), in request order."""
        for segment in self.texts:
            if roles is None or segment.role in roles:
                yield segment

    def joined_text(self, roles: Collection[Role] | None = None) -> str:
        """The text of `roles`, one segment per paragraph."""
        return "\n\n".join(s.text for s in self.iter_text(roles))

    @property
    def has_images(self) -> bool:
        return bool(self.images) or bool(self.remote_images)

    @property
    def modalities(self) -> frozenset[str]:
        return frozenset({"text", "image"}) if self.has_images else frozenset({"text"})
