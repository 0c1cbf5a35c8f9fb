"""Which upstream answers are stored, and how streamed ones are reassembled."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extproc.cache.stored_answers import NotStorable, StoredAnswer, hit_body, storable_answer
from extproc.protocol.request import ApiKind


def chat_answer(content: str = "Paris.", finish: str = "stop", **message: Any) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "llama",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content, **message}, "finish_reason": finish}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
    ).encode()


def sse(*chunks: Any) -> bytes:
    return b"".join(b"data: " + (c if isinstance(c, bytes) else json.dumps(c).encode()) + b"\n\n" for c in chunks)


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "llama",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_a_complete_json_answer_is_stored_verbatim() -> None:
    body = chat_answer()
    answer = storable_answer(ApiKind.CHAT, 200, "application/json", body)
    assert answer == StoredAnswer(text="Paris.", body=body, model="llama", completion_tokens=2)


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (500, chat_answer(), "status"),
        (200, chat_answer(finish="length"), "finish_reason"),
        (
            200,
            chat_answer(tool_calls=[{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]),
            "tool_call",
        ),
        (200, b"{not json", "not_json"),
        (
            200,
            json.dumps(
                {
                    "id": "chatcmpl-vsr-1",
                    "model": "vsr/clarify",
                    "choices": [{"index": 0, "message": {"content": "x"}, "finish_reason": "stop"}],
                }
            ).encode(),
            "ours",
        ),
        (
            200,
            json.dumps({"choices": [{"index": 0, "message": {"content": "a"}, "finish_reason": "stop"}] * 2}).encode(),
            "choices",
        ),
    ],
)
def test_incomplete_or_unsafe_answers_are_refused(status: int, body: bytes, reason: str) -> None:
    with pytest.raises(NotStorable, match=reason):
        storable_answer(ApiKind.CHAT, status, "application/json", body)


def test_a_streamed_answer_is_reassembled() -> None:
    body = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Par"}),
        chunk({"content": "is."}),
        chunk({}, "stop"),
        b"[DONE]",
    )
    answer = storable_answer(ApiKind.CHAT, 200, "text/event-stream; charset=utf-8", body)
    assert answer.text == "Paris." and answer.model == "llama"
    stored = json.loads(answer.body)
    assert stored["choices"][0]["message"]["content"] == "Paris."
    assert "-vsr-" not in stored["id"]  # not mistaken for one of our own replies


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (sse(chunk({"content": "Par"})), "incomplete"),  # cut off: no [DONE]
        (sse(chunk({"content": "Par"}), chunk({}, "length"), b"[DONE]"), "finish_reason"),
        (
            sse(chunk({"tool_calls": [{"index": 0, "function": {"name": "f"}}]}), chunk({}, "tool_calls"), b"[DONE]"),
            "tool_call",
        ),
    ],
)
def test_incomplete_streams_are_refused(body: bytes, reason: str) -> None:
    with pytest.raises(NotStorable, match=reason):
        storable_answer(ApiKind.CHAT, 200, "text/event-stream", body)


def test_responses_and_completions_answers() -> None:
    response = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "llama",
        "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]}],
        "usage": {"input_tokens": 2, "output_tokens": 1},
    }
    assert storable_answer(ApiKind.RESPONSES, 200, "application/json", json.dumps(response).encode()).text == "Hi."
    streamed = (
        b"event: response.completed\ndata: "
        + json.dumps({"type": "response.completed", "response": response}).encode()
        + b"\n\n"
    )
    assert storable_answer(ApiKind.RESPONSES, 200, "text/event-stream", streamed).completion_tokens == 1
    call = {**response, "output": [{"type": "function_call", "name": "f", "arguments": "{}"}]}
    with pytest.raises(NotStorable, match="tool_call"):
        storable_answer(ApiKind.RESPONSES, 200, "application/json", json.dumps(call).encode())
    completion = {"id": "cmpl-1", "model": "llama", "choices": [{"index": 0, "text": "Hi.", "finish_reason": "stop"}]}
    assert storable_answer(ApiKind.COMPLETIONS, 200, "application/json", json.dumps(completion).encode()).text == "Hi."


def test_hits_are_served_as_json_or_as_the_requests_stream() -> None:
    answer = storable_answer(ApiKind.CHAT, 200, "application/json", chat_answer())
    body, content_type = hit_body(ApiKind.CHAT, answer, stream=False)
    assert (body, content_type) == (answer.body, "application/json")
    body, content_type = hit_body(ApiKind.CHAT, answer, stream=True)
    assert content_type == "text/event-stream"
    assert body.endswith(b"data: [DONE]\n\n")
    assert storable_answer(ApiKind.CHAT, 200, "text/event-stream", body.replace(b"-vsr-", b"-x-")).text == "Paris."


def messages_answer(blocks: list[dict[str, Any]], stop: str = "end_turn") -> bytes:
    message = {"id": "msg_up", "type": "message", "role": "assistant", "model": "m", "content": blocks}
    return json.dumps({**message, "stop_reason": stop, "usage": {"input_tokens": 2, "output_tokens": 3}}).encode()


def test_messages_answers_json_and_streamed() -> None:
    from extproc.protocol.responses import assistant_reply_stream

    answer = storable_answer(
        ApiKind.MESSAGES, 200, "application/json", messages_answer([{"type": "text", "text": "Lisbon."}])
    )
    assert (answer.text, answer.completion_tokens) == ("Lisbon.", 3)
    streamed = assistant_reply_stream(ApiKind.MESSAGES, "m", "Lisbon.").replace(b"-vsr-", b"-up-")
    from_stream = storable_answer(ApiKind.MESSAGES, 200, "text/event-stream", streamed)
    assert from_stream.text == "Lisbon." and json.loads(from_stream.body)["type"] == "message"
    body, content_type = hit_body(ApiKind.MESSAGES, from_stream, stream=True)
    assert content_type == "text/event-stream" and b"event: message_stop" in body
    tool = [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]
    with pytest.raises(NotStorable, match="tool_call"):
        storable_answer(ApiKind.MESSAGES, 200, "application/json", messages_answer(tool))
    with pytest.raises(NotStorable, match="finish_reason"):
        storable_answer(
            ApiKind.MESSAGES, 200, "application/json", messages_answer([{"type": "text", "text": "Li"}], "max_tokens")
        )
    with pytest.raises(NotStorable, match="incomplete"):
        storable_answer(ApiKind.MESSAGES, 200, "text/event-stream", streamed.rsplit(b"event: message_stop", 1)[0])
    ours = assistant_reply_stream(ApiKind.MESSAGES, "m", "Lisbon.")  # our own reply (a clarification): never stored
    with pytest.raises(NotStorable, match="ours"):
        storable_answer(ApiKind.MESSAGES, 200, "text/event-stream", ours)
