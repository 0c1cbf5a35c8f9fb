"""The one transport-free request every signal reads, whatever API format it came from
(`extproc.protocol.formats` parses each into it)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from extproc.images import DecodedImage, RemoteImage


class ApiKind(StrEnum):
    CHAT = "chat_completions"
    RESPONSES = "responses"
    COMPLETIONS = "completions"
    MESSAGES = "messages"  # Anthropic Messages


# The token estimate is deliberately cheap and tokenizer-free: ceil(UTF-8 bytes / 4) over every
# text segment of every role, plus 4 tokens of chat-format overhead per message. Four bytes is
# about one token for English with BPE vocabularies; a CJK character takes 3 UTF-8 bytes, so it
# counts 0.75 tokens, and 2-byte scripts (Cyrillic, Greek) 0.5, which tracks real tokenizers far
# better than characters / 4. Images are not counted: their cost depends on the serving model.
BYTES_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4


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
    tool_call_names: list[str] = field(default_factory=list)  # names of the tool calls in the history
    turn_count: int = 0  # user messages (Chat) / user input items (Responses); 1 for Completions
    raw: dict[str, Any] = field(default_factory=dict)  # the parsed JSON body, for rewriting
    # Set when the texts are not at hand (a request rebuilt from a decision-log record).
    token_estimate: int | None = None
    # Read by the request's format (`ApiFormat.parse`), each API naming them its own way:
    tool_choice: str | None = None  # one word: none / auto / required, or the forced function's name
    end_user: str | None = None  # OpenAI's `user`, Messages' `metadata.user_id`

    def iter_text(self, roles: Collection[Role] | None = None) -> Iterator[TextSegment]:
        """Text segments sent by `roles` (all roles when None), in request order."""
        for segment in self.texts:
            if roles is None or segment.role in roles:
                yield segment

    def joined_text(self, roles: Collection[Role] | None = None) -> str:
        """The text of `roles`, one segment per paragraph."""
        return "\n\n".join(s.text for s in self.iter_text(roles))

    def estimated_tokens(self) -> int:
        """A tokenizer-free estimate of the prompt's tokens, over all roles' text."""
        if self.token_estimate is not None:
            return self.token_estimate
        return estimate_tokens(self.texts)

    @property
    def stores(self) -> bool:
        """The Responses API's `store: true`: the exchange is kept server-side (a memory write)."""
        return self.raw.get("store") is True

    @property
    def has_images(self) -> bool:
        return bool(self.images) or bool(self.remote_images)

    @property
    def modalities(self) -> frozenset[str]:
        return frozenset({"text", "image"}) if self.has_images else frozenset({"text"})


def estimate_tokens(texts: Iterable[TextSegment]) -> int:
    """ceil(UTF-8 bytes / BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE per message, over `texts`."""
    size = 0
    messages: set[int] = set()
    for segment in texts:
        text = segment.text
        size += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        messages.add(segment.message_index)
    return -(-size // BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)


def tool_choice_word(choice: object) -> str | None:
    """Messages' tool_choice as the RoutingRequest's word: auto / none / required, or the tool's name."""
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool":
        name = choice.get("name")
        return str(name) if name else None
    return {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))
