"""OpenAI legacy Completions (`POST /v1/completions`): a prompt, no roles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from extproc.errors import MalformedRequest
from extproc.images import ImageLimits
from extproc.protocol.answer import Answer, read_choices, redact_choice_calls
from extproc.protocol.formats.base import ApiFormat, ChoiceRead, SystemPromptMode, choices_reply
from extproc.protocol.openai_parser import OpenAIParser, json_type
from extproc.protocol.request import ApiKind, Role, RoutingRequest


class CompletionsParser(OpenAIParser):
    def parse_api(self, data: dict[str, Any]) -> None:
        prompt = data.get("prompt")
        if prompt is None:
            raise MalformedRequest("'prompt' is required", code="missing_field", param="prompt")
        self.request.turn_count = 1
        if isinstance(prompt, str):
            self._add_text(Role.USER, prompt, 0, "content")
            return
        if not isinstance(prompt, list):
            raise MalformedRequest(
                f"'prompt' must be a string, an array of strings or of token ids, not {json_type(prompt)}",
                param="prompt",
            )
        for index, item in enumerate(prompt):
            if isinstance(item, str):
                self._add_text(Role.USER, item, index, "content")
            elif isinstance(item, bool) or not isinstance(item, int | list):
                raise MalformedRequest(f"prompt[{index}] must be a string or token ids", param=f"prompt[{index}]")
            # Token-id prompts carry no text we can read; they route on the other signals.


class CompletionsFormat(ApiFormat):
    kind: ClassVar[ApiKind] = ApiKind.COMPLETIONS
    paths: ClassVar[tuple[str, ...]] = ("/v1/completions",)
    body_key: ClassVar[str | None] = "prompt"
    id_prefix: ClassVar[str] = "cmpl"

    def read(self, data: dict[str, Any], limits: ImageLimits) -> RoutingRequest:
        return CompletionsParser(data, self.kind, limits).parse()

    def reply(self, model: str, text: str, reply_id: str, created: int) -> dict[str, Any]:
        return choices_reply(reply_id, "text_completion", created, model, {"text": text})

    def reply_events(self, model: str, text: str, reply_id: str, created: int) -> list[tuple[str | None, Any]]:
        base = {"id": reply_id, "object": "text_completion", "created": created, "model": model}
        return [
            (None, {**base, "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": None}]}),
            (None, {**base, "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"}]}),
            (None, "[DONE]"),
        ]

    def read_answer(self, doc: dict[str, Any], answer: Answer) -> None:
        read_choices(doc.get("choices"), answer, chat=False)

    def stream_choice(self, choice: dict[str, Any]) -> ChoiceRead | None:
        return (choice.get("text") if isinstance(choice.get("text"), str) else None), [], False

    def redact_calls(self, doc: dict[str, Any], mask: Callable[[str], str]) -> None:
        redact_choice_calls(doc, mask)  # a Completions answer has none; a mislabelled Chat one may

    def insert_system_prompt(
        self, body: dict[str, Any], raw: dict[str, Any], content: str, mode: SystemPromptMode
    ) -> str | None:
        return "system_prompt not applied: legacy completions have no system role"
