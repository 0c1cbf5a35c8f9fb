"""OpenAI Chat Completions (`POST /v1/chat/completions`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from extproc.images import ImageLimits
from extproc.protocol.answer import LEGACY_CALL, Answer, read_choices, redact_choice_calls
from extproc.protocol.formats.base import ApiFormat, ChoiceRead, SystemPromptMode, choices_reply
from extproc.protocol.openai_parser import OpenAIParser
from extproc.protocol.request import ApiKind, Role, RoutingRequest

CHAT_PATH = "/v1/chat/completions"


class ChatParser(OpenAIParser):
    def parse_api(self, data: dict[str, Any]) -> None:
        for index, message in self.message_list(data):
            where = f"messages[{index}]"
            role = self._role(message.get("role"), where)
            self.count_turn(role)
            self._parse_content(message.get("content"), role, index, where)
            if role is Role.ASSISTANT:
                self._parse_tool_calls(message.get("tool_calls"), index, where)


class ChatFormat(ApiFormat):
    kind: ClassVar[ApiKind] = ApiKind.CHAT
    paths: ClassVar[tuple[str, ...]] = (CHAT_PATH,)
    body_key: ClassVar[str | None] = "messages"
    id_prefix: ClassVar[str] = "chatcmpl"

    def read(self, data: dict[str, Any], limits: ImageLimits) -> RoutingRequest:
        return ChatParser(data, self.kind, limits).parse()

    def reply(self, model: str, text: str, reply_id: str, created: int) -> dict[str, Any]:
        message = {"role": "assistant", "content": text}
        return choices_reply(reply_id, "chat.completion", created, model, {"message": message})

    def reply_events(self, model: str, text: str, reply_id: str, created: int) -> list[tuple[str | None, Any]]:
        base = {"id": reply_id, "object": "chat.completion.chunk", "created": created, "model": model}

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        return [
            (None, chunk({"role": "assistant", "content": ""}, None)),
            (None, chunk({"content": text}, None)),
            (None, chunk({}, "stop")),
            (None, "[DONE]"),
        ]

    def read_answer(self, doc: dict[str, Any], answer: Answer) -> None:
        read_choices(doc.get("choices"), answer, chat=True)

    def stream_choice(self, choice: dict[str, Any]) -> ChoiceRead | None:
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            return None
        names_calls = bool(delta.get("tool_calls") or delta.get("function_call"))
        text = delta.get("content") if isinstance(delta.get("content"), str) else None
        pieces = [p for p in delta.get("tool_calls") or [] if isinstance(p, dict)]
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
            pieces.append({"index": LEGACY_CALL, "function": legacy})
        return text, pieces, names_calls

    def redact_calls(self, doc: dict[str, Any], mask: Callable[[str], str]) -> None:
        redact_choice_calls(doc, mask)

    def insert_system_prompt(
        self, body: dict[str, Any], raw: dict[str, Any], content: str, mode: SystemPromptMode
    ) -> str | None:
        messages = raw.get("messages") or []
        ours = {"role": "system", "content": content}
        if mode == "replace":
            messages = [m for m in messages if not (isinstance(m, dict) and m.get("role") in ("system", "developer"))]
        body["messages"] = [ours, *messages]
        return None
