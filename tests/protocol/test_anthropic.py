"""Anthropic Messages: parsing into the RoutingRequest, bad input, and our own replies' shapes."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from PIL import Image

from extproc.errors import MalformedRequest, PayloadTooLarge, RequestError
from extproc.images import ImageLimits
from extproc.protocol import sse
from extproc.protocol.formats import error_body
from extproc.protocol.formats import messages as anthropic
from extproc.protocol.openai import parse_request
from extproc.protocol.request import ApiKind, Role
from extproc.protocol.responses import assistant_reply, assistant_reply_stream, rewrite_body

MESSAGES = "/v1/messages"


def png() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), "red").save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def parse(body: dict[str, Any], **kwargs: Any) -> Any:
    return parse_request(json.dumps(body), path=MESSAGES, **kwargs)


def test_full_request_parses_by_role_and_source() -> None:
    request = parse(
        {
            "model": "auto",
            "max_tokens": 100,
            "stream": True,
            "system": [{"type": "text", "text": "be brief"}],
            "metadata": {"user_id": "user-7"},
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "weather?"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png()}},
                        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "x"},
                        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
                    ],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
            ],
        }
    )
    assert request.api is ApiKind.MESSAGES
    assert (request.model, request.stream, request.tools) == ("auto", True, ["get_weather"])
    assert request.tool_choice == "required"
    assert request.end_user == "user-7"
    assert request.turn_count == 1  # the tool-result message continues the assistant's turn
    assert (len(request.images), len(request.remote_images)) == (1, 1)
    assert request.images[0].format == "PNG"
    assert request.tool_call_names == ["get_weather"]
    assert [(s.role, s.text, s.source) for s in request.texts] == [
        (Role.SYSTEM, "be brief", "content"),
        (Role.USER, "weather?", "content"),
        (Role.USER, "doc", "content"),
        (Role.ASSISTANT, 'get_weather {"city": "Paris"}', "tool_call"),
        (Role.TOOL, "sunny", "tool_result"),
    ]


def test_tool_result_blocks_are_tool_text_and_their_images_are_checked() -> None:
    request = parse(
        {
            "model": "auto",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [
                                {"type": "text", "text": "page text"},
                                {
                                    "type": "image",
                                    "source": {"type": "base64", "media_type": "image/png", "data": png()},
                                },
                            ],
                        },
                        {"type": "text", "text": "and summarise"},
                    ],
                }
            ],
        }
    )
    assert [(s.role, s.source) for s in request.iter_text()] == [(Role.TOOL, "tool_result"), (Role.USER, "content")]
    assert len(request.images) == 1 and request.turn_count == 1


def test_string_content_and_system_string() -> None:
    request = parse({"model": "m", "system": "sys", "messages": [{"role": "user", "content": "hi"}]})
    assert request.joined_text([Role.SYSTEM]) == "sys"
    assert request.joined_text([Role.USER]) == "hi"
    assert request.tool_choice is None and request.end_user is None


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"model": "m"}, "'messages' is required"),
        ({"model": "m", "messages": []}, "must not be empty"),
        ({"model": "m", "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}]}, ".text must be a string"),
        ({"model": "m", "system": 3, "messages": [{"role": "user", "content": "x"}]}, "'system'"),
        ({"model": "m", "system": [{"type": "image"}], "messages": [{"role": "user", "content": "x"}]}, "system[0]"),
        ({"model": "m", "tool_choice": "auto", "messages": [{"role": "user", "content": "x"}]}, "'tool_choice'"),
        ({"model": "m", "tool_choice": {"type": "tool"}, "messages": [{"role": "user", "content": "x"}]}, "name"),
        ({"model": "m", "thinking": True, "messages": [{"role": "user", "content": "x"}]}, "'thinking'"),
        ({"model": "m", "metadata": {"user_id": 5}, "messages": [{"role": "user", "content": "x"}]}, "user_id"),
        ({"model": "m", "max_tokens": "5", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_use", "name": "f", "input": {}}]}]},
            "assistant messages",
        ),
        (
            {
                "model": "m",
                "messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": []}]}],
            },
            ".input must be an object",
        ),
        (
            {"model": "m", "messages": [{"role": "assistant", "content": [{"type": "tool_result", "content": "x"}]}]},
            "user messages",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "ftp"}}]}]},
            "source.type",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "file:///etc"}}]}
                ],
            },
            "http(s) URL",
        ),
    ],
)
def test_bad_input_gets_a_precise_error(body: dict[str, Any], fragment: str) -> None:
    with pytest.raises(MalformedRequest) as raised:
        parse(body)
    assert fragment in raised.value.message


def test_bad_image_data_and_too_many_images() -> None:
    bad = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "!!notbase64"}}
    with pytest.raises(RequestError) as raised:
        parse({"model": "m", "messages": [{"role": "user", "content": [bad]}]})
    assert raised.value.code == "invalid_base64"
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png()}}
    with pytest.raises(PayloadTooLarge):
        parse({"model": "m", "messages": [{"role": "user", "content": [image] * 3}]}, limits=ImageLimits(max_images=2))


def test_system_prompt_plugin_in_messages_form() -> None:
    raw = {"model": "auto", "system": "client", "messages": [{"role": "user", "content": "x"}]}
    body, notes = rewrite_body(raw, ApiKind.MESSAGES, "m1", "ours", "insert")
    assert json.loads(body)["system"] == "ours\n\nclient" and not notes
    blocks = {**raw, "system": [{"type": "text", "text": "client"}]}
    body, _ = rewrite_body(blocks, ApiKind.MESSAGES, "m1", "ours", "insert")
    assert json.loads(body)["system"] == [{"type": "text", "text": "ours"}, {"type": "text", "text": "client"}]
    body, _ = rewrite_body(blocks, ApiKind.MESSAGES, "m1", "ours", "replace")
    assert json.loads(body) == {**blocks, "model": "m1", "system": "ours"}
    assert raw["system"] == "client"  # the parsed request is not modified


def test_our_replies_in_messages_shape() -> None:
    reply = assistant_reply(ApiKind.MESSAGES, "vsr/clarify", "Which one?")
    assert reply["type"] == "message" and reply["content"] == [{"type": "text", "text": "Which one?"}]
    assert reply["stop_reason"] == "end_turn" and "-vsr-" in reply["id"]
    stream = assistant_reply_stream(ApiKind.MESSAGES, "vsr/clarify", "Which one?")
    events = sse.events(stream)
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(json.loads(data)["type"] == name for name, data in events)
    assembled = anthropic.assembled_message(events)
    assert assembled is not None and assembled["content"] == [{"type": "text", "text": "Which one?"}]


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (422, "invalid_request_error"),  # any other 4xx
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),  # any other 5xx
        (503, "overloaded_error"),
        (529, "overloaded_error"),
    ],
)
def test_error_envelope(status: int, kind: str) -> None:
    assert error_body(ApiKind.MESSAGES, status, "no") == {"type": "error", "error": {"type": kind, "message": "no"}}


def test_assembled_message_refuses_a_cut_off_or_failed_stream() -> None:
    whole = sse.events(assistant_reply_stream(ApiKind.MESSAGES, "m", "hello"))
    assert anthropic.assembled_message(whole[:-1]) is None  # no message_stop
    failed = [*whole[:3], ("error", json.dumps({"type": "error", "error": {"type": "api_error", "message": "x"}}))]
    assert anthropic.assembled_message(failed) is None
