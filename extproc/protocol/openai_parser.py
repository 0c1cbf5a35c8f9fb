"""The parser machinery every API format builds on (`OpenAIParser`: OpenAI's content parts,
images, tools and tool calls, typed errors, `json_type`). Each format's own fields are read by
its module in `extproc.protocol.formats`; `openai.parse_request` picks the format by path."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from extproc.errors import MalformedRequest, PayloadTooLarge
from extproc.images import ImageLimits, inspect_image, parse_data_uri
from extproc.images import RemoteImage as RemoteImage
from extproc.protocol.request import ApiKind, Role, RoutingRequest, TextSegment

_ROLE_MAP = {
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "tool": Role.TOOL,
    "function": Role.TOOL,
}
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal"})
IMAGE_PART_TYPES = frozenset({"image_url", "input_image"})


def json_type(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


class OpenAIParser(ABC):
    """The rules every format's parser shares: typed errors, the image checks, text segments,
    tools and tool calls, `model` and `stream`; a subclass reads its format's fields."""

    def __init__(self, data: dict[str, Any], api: ApiKind, limits: ImageLimits) -> None:
        self.data = data
        self.limits = limits
        self.request = RoutingRequest(api=api, model=None, stream=False, raw=data)

    def parse(self) -> RoutingRequest:
        data, req = self.data, self.request
        model = data.get("model")
        if model is not None and not isinstance(model, str):
            raise MalformedRequest(f"'model' must be a string, not {json_type(model)}", param="model")
        req.model = model or None
        stream = data.get("stream", False)
        if stream is not None and not isinstance(stream, bool):
            raise MalformedRequest(f"'stream' must be a boolean, not {json_type(stream)}", param="stream")
        req.stream = bool(stream)
        self._parse_tools(data.get("tools"))
        self.parse_api(data)
        return req

    @abstractmethod
    def parse_api(self, data: dict[str, Any]) -> None:
        """The format's own fields (its module's parser: `extproc.protocol.formats`)."""

    def message_list(self, data: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
        """`messages`, required, a non-empty array of objects (Chat's and Anthropic's): each with its index."""
        messages = data.get("messages")
        if messages is None:
            raise MalformedRequest("'messages' is required", code="missing_field", param="messages")
        if not isinstance(messages, list):
            raise MalformedRequest(f"'messages' must be an array, not {json_type(messages)}", param="messages")
        if not messages:
            raise MalformedRequest("'messages' must not be empty", param="messages")
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                where = f"messages[{index}]"
                raise MalformedRequest(f"{where} must be an object, not {json_type(message)}", param=where)
            yield index, message

    def count_turn(self, role: Role) -> None:
        if role is Role.USER:
            self.request.turn_count += 1

    def _role(self, value: object, where: str) -> Role:
        if not isinstance(value, str):
            raise MalformedRequest(f"{where}.role must be a string", param=f"{where}.role")
        role = _ROLE_MAP.get(value)
        if role is None:
            raise MalformedRequest(f"{where}.role {value!r} is not one of {sorted(_ROLE_MAP)}", param=f"{where}.role")
        return role

    def _parse_content(self, content: object, role: Role, index: int, where: str) -> None:
        source = "tool_result" if role is Role.TOOL else "content"
        if content is None:
            return
        if isinstance(content, str):
            self._add_text(role, content, index, source)
            return
        if not isinstance(content, list):
            raise MalformedRequest(
                f"{where}.content must be a string or an array of parts, not {json_type(content)}",
                param=f"{where}.content",
            )
        for part_index, part in enumerate(content):
            self._parse_part(part, role, index, f"{where}.content[{part_index}]", source)

    def _parse_part(self, part: object, role: Role, index: int, where: str, source: str) -> None:
        if isinstance(part, str):  # Responses/Completions clients sometimes send bare strings
            self._add_text(role, part, index, source)
            return
        if not isinstance(part, dict):
            raise MalformedRequest(f"{where} must be an object, not {json_type(part)}", param=where)
        kind = part.get("type")
        if not isinstance(kind, str):
            raise MalformedRequest(f"{where}.type must be a string", param=f"{where}.type")
        if kind in TEXT_PART_TYPES:
            text = part.get("text", part.get("refusal"))
            if not isinstance(text, str):
                raise MalformedRequest(f"{where}.text must be a string", param=f"{where}.text")
            self._add_text(role, text, index, source)
        elif kind in IMAGE_PART_TYPES:
            self._parse_image(part, index, where)
        # Other part types (audio, files) are passed through to the upstream untouched.

    def _parse_image(self, part: dict[str, Any], index: int, where: str) -> None:
        ref = part.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        if url is None and part.get("file_id") is not None:
            return  # an uploaded file reference: nothing to inspect here
        if not isinstance(url, str) or not url:
            raise MalformedRequest(f"{where}.image_url must carry a URL string", param=f"{where}.image_url")
        req = self.request
        if len(req.images) + len(req.remote_images) >= self.limits.max_images:
            raise PayloadTooLarge(f"request has more than {self.limits.max_images} images", code="too_many_images")
        lowered = url[:8].lower()
        if lowered.startswith(("http://", "https://")):
            req.remote_images.append(RemoteImage(url=url, message_index=index))
            return
        mime, payload = parse_data_uri(url)
        req.images.append(inspect_image(payload, declared_mime=mime, limits=self.limits, message_index=index))

    def _parse_tool_calls(self, calls: object, index: int, where: str) -> None:
        if calls is None:
            return
        if not isinstance(calls, list):
            raise MalformedRequest(f"{where}.tool_calls must be an array", param=f"{where}.tool_calls")
        for call_index, call in enumerate(calls):
            if not isinstance(call, dict):
                raise MalformedRequest(f"{where}.tool_calls[{call_index}] must be an object")
            function = call.get("function")
            if not isinstance(function, dict):
                raise MalformedRequest(f"{where}.tool_calls[{call_index}].function must be an object")
            self._add_tool_call(function.get("name"), function.get("arguments"), index)

    def _add_tool_call(self, name: object, arguments: object, index: int) -> None:
        self.request.tool_call_count += 1
        if isinstance(name, str) and name:
            self.request.tool_call_names.append(name)
        text = " ".join(v for v in (name, arguments) if isinstance(v, str) and v)
        self._add_text(Role.ASSISTANT, text, index, "tool_call")

    def _parse_tools(self, tools: object) -> None:
        if tools is None:
            return
        if not isinstance(tools, list):
            raise MalformedRequest(f"'tools' must be an array, not {json_type(tools)}", param="tools")
        for tool_index, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise MalformedRequest(f"tools[{tool_index}] must be an object", param=f"tools[{tool_index}]")
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name")
            self.request.tools.append(name if isinstance(name, str) else str(tool.get("type", "tool")))

    def _add_text(self, role: Role, text: str, index: int, source: str) -> None:
        if text:
            self.request.texts.append(TextSegment(role=role, text=text, message_index=index, source=source))
