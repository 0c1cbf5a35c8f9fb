"""Upstream answers read in one place: text, tool calls, finish reason, model and usage from JSON
bodies and SSE streams of each API, streams split anywhere (CRLF framing, a UTF-8 character cut
across chunks)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extproc.protocol.answers import Output, StreamReader, ToolCall, read_json, read_stream
from extproc.protocol.request import ApiKind
from extproc.protocol.responses import assistant_reply_stream


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": "c1", "model": "llama", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def stream(*docs: Any, end: bytes = b"\n") -> bytes:
    lines = [b"data: " + (d if isinstance(d, bytes) else json.dumps(d, ensure_ascii=False).encode()) for d in docs]
    return b"".join(line + end + end for line in lines)


CHAT_STREAM = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Café "}),
    chunk({"content": "au lait ☕"}),
    chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "order", "arguments": '{"size"'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "grand"}'}}]}),
    chunk({}, "tool_calls", usage={"prompt_tokens": 3, "completion_tokens": 9}),
    b"[DONE]",
]


def every_split(body: bytes) -> list[list[bytes]]:
    return [[body[:cut], body[cut:]] for cut in range(len(body) + 1)]


@pytest.mark.parametrize("end", [b"\n", b"\r\n"])
def test_a_chat_stream_reads_the_same_wherever_its_chunks_split(end: bytes) -> None:
    body = stream(*CHAT_STREAM, end=end)
    whole = read_stream(ApiKind.CHAT, body)
    assert whole.texts() == ["", "Café ", "au lait ☕"]
    assert whole.tool_calls() == [ToolCall("order", '{"size": "grand"}', "call_1")]
    assert (whole.finish_reason, whole.model, whole.answer_id, whole.completion_tokens) == (
        "tool_calls",
        "llama",
        "c1",
        9,
    )
    assert whole.complete and not whole.unreadable and whole.choices == 1 and whole.names_tool_calls
    for chunks in every_split(body):  # cuts inside CRLF pairs and inside the multi-byte é and ☕ included
        assert read_stream(ApiKind.CHAT, chunks) == whole
    single_bytes = [body[i : i + 1] for i in range(len(body))]
    assert read_stream(ApiKind.CHAT, single_bytes) == whole


def test_a_utf8_character_cut_across_chunks_is_read_whole() -> None:
    body = stream(chunk({"content": "☕"}), b"[DONE]")
    cut = body.index("☕".encode()) + 1  # inside the character's three bytes
    reader = StreamReader(ApiKind.CHAT)
    assert reader.feed(body[:cut]) == []  # no event is complete yet
    (event, deltas), (done, _) = reader.feed(body[cut:], end=True)
    assert event + done == body and [d.text for d in deltas] == ["☕"]
    assert reader.answer().texts() == ["☕"]


def test_stream_events_tell_what_each_choice_added() -> None:
    reader = StreamReader(ApiKind.CHAT)
    [(_, first), (_, second)] = reader.feed(stream(*CHAT_STREAM[1:2], *CHAT_STREAM[3:4]))
    assert [(d.choice, d.text, d.carries_call) for d in first] == [(0, "Café ", False)]
    assert [(d.choice, d.text, d.carries_call) for d in second] == [(0, None, True)]


def test_an_unfinished_or_unreadable_chat_stream() -> None:
    cut_off = read_stream(ApiKind.CHAT, stream(chunk({"content": "Par"})))
    assert not cut_off.complete and cut_off.texts() == ["Par"]
    junk = read_stream(ApiKind.CHAT, stream(chunk({"content": "Par"}), b"{not json", b"[DONE]"))
    assert junk.complete and junk.unreadable
    early_done = read_stream(ApiKind.CHAT, stream(b"[DONE]", chunk({}, "stop"), b"[DONE]"))
    assert early_done.unreadable  # a [DONE] before the end is not how a stream ends


def test_json_answers_of_each_api() -> None:
    chat = {
        "id": "chatcmpl-1",
        "model": "big",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "content": "Saving.",
                    "tool_calls": [{"id": "t1", "function": {"name": "save", "arguments": {"note": "x"}}}],
                },
            }
        ],
        "usage": {"completion_tokens": 4},
    }
    answer = read_json(ApiKind.CHAT, chat)
    assert answer.outputs == [
        Output("text", ("Saving.",)),
        Output("tool_call", call=ToolCall("save", '{"note": "x"}', "t1")),
    ]
    assert (answer.finish_reason, answer.model, answer.completion_tokens, answer.choices) == ("tool_calls", "big", 4, 1)
    completion = read_json(ApiKind.COMPLETIONS, {"choices": [{"text": "Hi.", "finish_reason": "stop"}]})
    assert completion.texts() == ["Hi."] and completion.tool_calls() == []
    response = {
        "status": "completed",
        "output": [
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "thinking"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "Hi."}]},
            {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"},
        ],
        "usage": {"output_tokens": 2},
    }
    answer = read_json(ApiKind.RESPONSES, response)
    assert answer.texts() == ["Hi."] and answer.every_text() == ["thinking", "Hi."]
    assert answer.tool_calls() == [ToolCall("f", "{}", "c")] and answer.finish_reason == "completed"
    message = {
        "model": "m",
        "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "hm"},
            {"type": "text", "text": "Ok."},
            {"type": "tool_use", "name": "g", "input": {}},
        ],
    }
    answer = read_json(ApiKind.MESSAGES, message)
    assert [o.kind for o in answer.outputs] == ["reasoning", "text", "tool_call"]
    assert answer.tool_calls() == [ToolCall("g", "{}", "")] and answer.finish_reason == "tool_use"
    assert read_json(ApiKind.CHAT, ["not", "an", "object"]).choices == 0


def test_responses_and_messages_streams_read_their_final_answer() -> None:
    response = {
        "model": "r",
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hi."}]}],
    }
    body = (
        b'event: response.created\r\ndata: {"type": "response.created"}\r\n\r\n'
        + b"event: response.completed\r\ndata: "
        + json.dumps({"type": "response.completed", "response": response}).encode()
        + b"\r\n\r\n"
    )
    answer = read_stream(ApiKind.RESPONSES, [body[:70], body[70:]])
    assert answer.complete and answer.texts() == ["Hi."] and answer.source == response
    messages = assistant_reply_stream(ApiKind.MESSAGES, "m", "Lisbon é").replace(b"\n", b"\r\n")
    answer = read_stream(ApiKind.MESSAGES, [messages[:41], messages[41:]])
    assert answer.complete and answer.texts() == ["Lisbon é"] and answer.model == "m"
    cut_off = read_stream(ApiKind.MESSAGES, messages.rsplit(b"event: message_stop", 1)[0])
    assert not cut_off.complete and cut_off.outputs == []
