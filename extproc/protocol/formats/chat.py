"""OpenAI Chat Completions (`POST /v1/chat/completions`)."""

from __future__ import annotations

from typing import Any, ClassVar

from extproc.images import ImageLimits
from extproc.protocol.formats.base import ApiFormat, SystemPromptMode
from extproc.protocol.openai_parser import OpenAIParser
from extproc.protocol.request import ApiKind, Role, RoutingRequest


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
    paths: ClassVar[tuple[str, ...]] = ("/v1/chat/completions",)
    id_prefix: ClassVar[str] = "chatcmpl"

    def read(self, data: dict[str, Any], limits: ImageLimits) -> RoutingRequest:
        return ChatParser(data, self.kind, limits).parse()

    def reply(self, model: str, text: str, reply_id: str, created: int) -> dict[str, Any]:
        message = {"role": "assistant", "content": text}
        return {
            "id": reply_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

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

    def insert_system_prompt(
        self, body: dict[str, Any], raw: dict[str, Any], content: str, mode: SystemPromptMode
    ) -> str | None:
        messages = raw.get("messages") or []
        ours = {"role": "system", "content": content}
        if mode == "replace":
            messages = [m for m in messages if not (isinstance(m, dict) and m.get("role") in ("system", "developer"))]
        body["messages"] = [ours, *messages]
        return None
