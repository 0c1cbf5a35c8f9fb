"""OpenAI Responses (`POST /v1/responses`): `instructions`, `input` items, `store`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from extproc.errors import MalformedRequest
from extproc.images import ImageLimits
from extproc.protocol.answer import Answer, Output, ToolCall, arguments_text
from extproc.protocol.formats.base import ApiFormat, SystemPromptMode
from extproc.protocol.openai_parser import IMAGE_PART_TYPES, TEXT_PART_TYPES, OpenAIParser, json_type
from extproc.protocol.request import ApiKind, Role, RoutingRequest


class ResponsesParser(OpenAIParser):
    def parse_api(self, data: dict[str, Any]) -> None:
        instructions = data.get("instructions")
        if instructions is not None:
            if not isinstance(instructions, str):
                raise MalformedRequest("'instructions' must be a string", param="instructions")
            self._add_text(Role.SYSTEM, instructions, -1, "content")
        items = data.get("input")
        if items is None:
            raise MalformedRequest("'input' is required", code="missing_field", param="input")
        if isinstance(items, str):
            self.request.turn_count = 1
            self._add_text(Role.USER, items, 0, "content")
            return
        if not isinstance(items, list):
            raise MalformedRequest(f"'input' must be a string or an array, not {json_type(items)}", param="input")
        for index, item in enumerate(items):
            where = f"input[{index}]"
            if not isinstance(item, dict):
                raise MalformedRequest(f"{where} must be an object, not {json_type(item)}", param=where)
            kind = item.get("type", "message")
            if not isinstance(kind, str):
                raise MalformedRequest(f"{where}.type must be a string", param=f"{where}.type")
            if kind == "message" or "role" in item:
                role = self._role(item.get("role"), where)
                self.count_turn(role)
                self._parse_content(item.get("content"), role, index, where)
            elif kind == "function_call":
                self._add_tool_call(item.get("name"), item.get("arguments"), index)
            elif kind == "function_call_output":
                output = item.get("output")
                if isinstance(output, str):
                    self._add_text(Role.TOOL, output, index, "tool_result")
            elif kind in TEXT_PART_TYPES or kind in IMAGE_PART_TYPES:
                self.request.turn_count = max(self.request.turn_count, 1)
                self._parse_part(item, Role.USER, index, where, "content")


class ResponsesFormat(ApiFormat):
    kind: ClassVar[ApiKind] = ApiKind.RESPONSES
    paths: ClassVar[tuple[str, ...]] = ("/v1/responses",)
    body_key: ClassVar[str | None] = "input"
    id_prefix: ClassVar[str] = "resp"
    stream_style = "final_response"
    reasoning_fields = "responses"

    def read(self, data: dict[str, Any], limits: ImageLimits) -> RoutingRequest:
        return ResponsesParser(data, self.kind, limits).parse()

    def reply(self, model: str, text: str, reply_id: str, created: int) -> dict[str, Any]:
        return {
            "id": reply_id,
            "object": "response",
            "created_at": created,
            "status": "completed",
            "model": model,
            "output": [
                {
                    "id": f"msg-{reply_id}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        }

    def reply_events(self, model: str, text: str, reply_id: str, created: int) -> list[tuple[str | None, Any]]:
        full = self.reply(model, text, reply_id, created)
        started = {**full, "status": "in_progress", "output": []}
        where = {"output_index": 0, "content_index": 0}
        return [
            ("response.created", {"type": "response.created", "response": started}),
            ("response.output_text.delta", {"type": "response.output_text.delta", **where, "delta": text}),
            ("response.output_text.done", {"type": "response.output_text.done", **where, "text": text}),
            ("response.completed", {"type": "response.completed", "response": full}),
        ]

    def read_answer(self, doc: dict[str, Any], answer: Answer) -> None:
        answer.finish_reason = doc.get("status") if isinstance(doc.get("status"), str) else None
        items = doc.get("output")
        answer.outputs = [output_item(item) for item in items] if isinstance(items, list) else []

    def redact_calls(self, doc: dict[str, Any], mask: Callable[[str], str]) -> None:
        for item in doc.get("output") or []:
            if isinstance(item, dict) and item.get("type") == "function_call":
                item["arguments"] = mask(arguments_text(item.get("arguments")))

    def storable_refusal(self, answer: Answer) -> str | None:
        """A completed response with message output only (calls, reasoning and the rest are not stored)."""
        if answer.finish_reason != "completed":
            return "incomplete"
        if not answer.outputs:
            return "no_output"
        if any(output.kind != "text" for output in answer.outputs):
            return "tool_call"
        return None

    def previous_response_id(self, raw: dict[str, Any]) -> str | None:
        previous = raw.get("previous_response_id")
        return previous if isinstance(previous, str) and previous else None

    def keeps_exchange(self, raw: dict[str, Any]) -> bool:
        return raw.get("store") is not False  # Responses stores by default

    def insert_system_prompt(
        self, body: dict[str, Any], raw: dict[str, Any], content: str, mode: SystemPromptMode
    ) -> str | None:
        existing = raw.get("instructions")
        body["instructions"] = content if mode == "replace" or not existing else f"{content}\n\n{existing}"
        return None


def output_item(item: Any) -> Output:
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
