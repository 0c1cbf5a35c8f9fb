"""Messages <-> Chat translation: the request, JSON answers, errors, and SSE event by event."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extproc.protocol import sse
from extproc.protocol.formats import messages as anthropic
from extproc.protocol.formats.messages_chat import (
    ChatToMessagesStream,
    Untranslatable,
    chat_error_to_anthropic,
    chat_to_message,
    messages_to_chat,
)


def test_request_translation() -> None:
    raw = {
        "model": "auto",
        "max_tokens": 50,
        "temperature": 0.2,
        "top_k": 5,
        "stop_sequences": ["END"],
        "stream": True,
        "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "metadata": {"user_id": "u1"},
        "thinking": {"type": "enabled", "budget_tokens": 100},
        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object", "properties": {}}}],
        "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": True},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "r"}]},
                    {"type": "text", "text": "thanks"},
                ],
            },
        ],
    }
    chat = messages_to_chat(raw, "upstream/m")
    assert chat["model"] == "upstream/m"
    assert (chat["max_tokens"], chat["temperature"], chat["top_k"], chat["stop"]) == (50, 0.2, 5, ["END"])
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert chat["user"] == "u1" and "thinking" not in chat
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {"name": "f", "parameters": {"type": "object", "properties": {}}, "description": "d"},
        }
    ]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert chat["parallel_tool_calls"] is False
    assert chat["messages"] == [
        {"role": "system", "content": "a\n\nb"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "r"},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]


@pytest.mark.parametrize(("kind", "expected"), [("auto", "auto"), ("any", "required"), ("none", "none")])
def test_tool_choice_words(kind: str, expected: str) -> None:
    raw = {"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": kind}}
    assert messages_to_chat(raw, "m")["tool_choice"] == expected


@pytest.mark.parametrize(
    "block",
    [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
        {"type": "image", "source": {"type": "file", "file_id": "f1"}},
    ],
)
def test_untranslatable_blocks_are_refused(block: dict[str, Any]) -> None:
    with pytest.raises(Untranslatable):
        messages_to_chat({"messages": [{"role": "user", "content": [block]}]}, "m")
    with pytest.raises(Untranslatable):
        messages_to_chat(
            {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web_search_20250305", "name": "w"}]},
            "m",
        )


@pytest.mark.parametrize(
    ("finish", "reason"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"), ("content_filter", "refusal")],
)
def test_json_answer(finish: str, reason: str) -> None:
    doc = {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "message": {
                    "role": "assistant",
                    "content": "hi",
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }
    message = chat_to_message(doc)
    assert message["content"] == [
        {"type": "text", "text": "hi"},
        {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
    ]
    assert message["stop_reason"] == reason
    assert message["usage"] == {"input_tokens": 3, "output_tokens": 4}
    assert message["type"] == "message" and message["id"] == "msg_chatcmpl-1"


def test_bad_tool_arguments_are_kept_not_lost() -> None:
    doc = {"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": "{not json"}}]}}]}
    assert chat_to_message(doc)["content"][0]["input"] == {"_arguments": "{not json"}


def test_error_translation() -> None:
    body = json.dumps({"error": {"message": "model overloaded", "type": "server_error"}}).encode()
    assert json.loads(chat_error_to_anthropic(503, body)) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "model overloaded"},
    }
    assert json.loads(chat_error_to_anthropic(400, b"plain words"))["error"]["message"] == "plain words"
    for odd in (b"\xff\xfe not utf-8", b"[1, 2]", b'{"error": "just a string"}', b"null", b""):
        error = json.loads(chat_error_to_anthropic(502, odd))["error"]
        assert error["type"] == "api_error" and error["message"]  # never empty, never a crash


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"message": "bad input", "type": "BadRequestError", "code": 400}, ("invalid_request_error", "bad input")),
        ({"message": "busy", "code": 503}, ("overloaded_error", "busy")),
        ({"message": "boom", "code": "internal"}, ("api_error", "boom")),  # no status: a server error
        ({}, ("api_error", "upstream error")),
    ],
)
def test_an_error_chunk_mid_stream_becomes_an_error_event(error: dict[str, Any], expected: tuple[str, str]) -> None:
    raw = chat_stream({"role": "assistant", "content": "Hal"}, done=False)
    raw = raw.split(b"\n\n")[0] + b"\n\n" + b"data: " + json.dumps({"error": error}).encode() + b"\n\ndata: [DONE]\n\n"
    events = sse.events(translate(raw, 5))
    names = [name for name, _ in events]
    assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "error"]
    data = json.loads(events[-1][1])
    assert (data["type"], data["error"]["type"], data["error"]["message"]) == ("error", *expected)


def chat_stream(*deltas: dict[str, Any], finish: str = "stop", done: bool = True) -> bytes:
    chunks = [{"id": "c1", "model": "m", "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({"id": "c1", "model": "m", "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 7}})
    out = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


def translate(raw: bytes, size: int) -> bytes:
    stream = ChatToMessagesStream()
    out = b"".join(stream.feed(raw[i : i + size]) for i in range(0, len(raw), size))
    return out + stream.feed(b"", end=True)


@pytest.mark.parametrize("size", [1, 7, 64, 100_000])
def test_stream_event_by_event_any_chunking(size: int) -> None:
    raw = chat_stream(
        {"role": "assistant", "content": ""},
        {"content": "Hel"},
        {"content": "lo"},
        {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]},
        {"tool_calls": [{"index": 1, "id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        finish="tool_calls",
    )
    events = sse.events(translate(raw, size))
    names = [name for name, _ in events]
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    message = anthropic.assembled_message(events)
    assert message is not None
    assert message["content"] == [
        {"type": "text", "text": "Hello"},
        {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
        {"type": "tool_use", "id": "c2", "name": "g", "input": {}},
    ]
    assert message["stop_reason"] == "tool_use"
    assert message["usage"]["output_tokens"] == 7


def test_a_stream_cut_off_ends_with_an_error_event_not_a_clean_stop() -> None:
    raw = b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"par"}}]}\n\n'
    events = sse.events(translate(raw, 10))
    assert "error" in [name for name, _ in events]
    assert anthropic.assembled_message(events) is None


def test_an_upstream_error_chunk_becomes_an_error_event() -> None:
    raw = b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: {"error":{"message":"boom"}}\n\n'
    events = sse.events(translate(raw + b"data: [DONE]\n\n", 9))
    errors = [json.loads(data) for name, data in events if name == "error"]
    assert errors == [{"type": "error", "error": {"type": "api_error", "message": "boom"}}]
    assert "message_stop" not in [name for name, _ in events]
