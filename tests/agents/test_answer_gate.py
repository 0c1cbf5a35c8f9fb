"""Tool calls in upstream answers: found in JSON answers (chat, responses, completions), the
verdict applied to a JSON answer, and `StreamGate` holding a stream's tool calls until judged
(chunk splits anywhere, content before a call passed at once, byte-exact release under allow,
masked under redact, ended with a refusal under block; Responses streams held whole)."""

from __future__ import annotations

import copy
import itertools
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extproc.agents.answer_gate import StreamGate, apply_to_json, calls_in_answer
from extproc.agents.tool_calls import ToolCall, Verdict
from extproc.protocol.request import ApiKind

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
PASSPORT_TEXT = "passport number 123456789"

ALLOW = Verdict(action="allow", rule="ok_rule")
ANNOTATE = Verdict(action="annotate", rule="note_rule")
NONE = Verdict()
BLOCK = Verdict(action="block", rule="secret_block", message="This tool call carried a credential.")
REDACT = Verdict(action="redact", rule="memory_redact")


# -- JSON answers -----------------------------------------------------------------------------------


def chat_answer() -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "big-model",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Saving that.",
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {
                                "name": "save_memory",
                                "arguments": json.dumps({"note": f"my {PASSPORT_TEXT}"}),
                            },
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}},
                        },
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    }


def responses_answer() -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "big-model",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Uploading.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_up",
                "name": "upload",
                "arguments": json.dumps({"body": f"key {AWS_KEY}"}),
                "status": "completed",
            },
        ],
    }


def test_calls_in_chat_answer() -> None:
    calls, text = calls_in_answer(ApiKind.CHAT, chat_answer())
    assert text == "Saving that."
    assert calls == [
        ToolCall("save_memory", json.dumps({"note": f"my {PASSPORT_TEXT}"}), "call_a"),
        ToolCall("get_weather", '{"city": "Paris", "days": 2}', "call_b"),  # an object, as JSON text
    ]


def test_calls_in_chat_answer_across_choices_and_without_calls() -> None:
    doc = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "one"}},
            {
                "index": 1,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "x", "function": {"name": "f", "arguments": None}},
                    ],
                },
            },
            "junk",
        ]
    }
    calls, text = calls_in_answer(ApiKind.CHAT, doc)
    assert text == "one"
    assert calls == [ToolCall("f", "", "x")]
    assert calls_in_answer(ApiKind.CHAT, {"choices": [{"message": {"content": "hi"}}]}) == ([], "hi")


def test_calls_in_responses_answer() -> None:
    calls, text = calls_in_answer(ApiKind.RESPONSES, responses_answer())
    assert text == "Uploading."
    assert calls == [ToolCall("upload", json.dumps({"body": f"key {AWS_KEY}"}), "call_up")]


def test_calls_in_completions_answer_is_text_only() -> None:
    doc = {"choices": [{"index": 0, "text": "Once upon"}, {"index": 1, "text": "a time"}]}
    assert calls_in_answer(ApiKind.COMPLETIONS, doc) == ([], "Once upon\na time")


@pytest.mark.parametrize("doc", [None, [], "text", 3])
def test_calls_in_a_non_object_answer(doc: object) -> None:
    for api in ApiKind:
        assert calls_in_answer(api, doc) == ([], "")


@pytest.mark.parametrize("verdict", [NONE, ALLOW, ANNOTATE])
@pytest.mark.parametrize("api", [ApiKind.CHAT, ApiKind.RESPONSES])
def test_apply_to_json_leaves_the_answer_alone_unless_block_or_redact(api: ApiKind, verdict: Verdict) -> None:
    doc = chat_answer() if api is ApiKind.CHAT else responses_answer()
    before = copy.deepcopy(doc)
    assert apply_to_json(api, doc, verdict) is None
    assert doc == before


def test_apply_to_json_block_gives_a_chat_refusal() -> None:
    body = apply_to_json(ApiKind.CHAT, chat_answer(), BLOCK)
    assert body is not None
    doc = json.loads(body)
    assert doc["object"] == "chat.completion"
    assert doc["model"] == "big-model"
    message = doc["choices"][0]["message"]
    assert message == {"role": "assistant", "content": BLOCK.message}
    assert doc["choices"][0]["finish_reason"] == "stop"
    assert "save_memory" not in body.decode() and "123456789" not in body.decode()


def test_apply_to_json_block_gives_a_responses_refusal() -> None:
    body = apply_to_json(ApiKind.RESPONSES, responses_answer(), BLOCK)
    assert body is not None
    doc = json.loads(body)
    assert doc["object"] == "response" and doc["status"] == "completed"
    assert doc["model"] == "big-model"
    assert [item["type"] for item in doc["output"]] == ["message"]
    assert doc["output"][0]["content"][0]["text"] == BLOCK.message
    assert AWS_KEY not in body.decode()


def test_apply_to_json_block_without_a_model_names_the_rule() -> None:
    doc = chat_answer()
    del doc["model"]
    body = apply_to_json(ApiKind.CHAT, doc, BLOCK)
    assert body is not None and json.loads(body)["model"] == "vsr/secret_block"


def test_apply_to_json_redact_masks_chat_arguments_and_nothing_else() -> None:
    original = chat_answer()
    body = apply_to_json(ApiKind.CHAT, copy.deepcopy(original), REDACT)
    assert body is not None
    doc = json.loads(body)
    calls = doc["choices"][0]["message"]["tool_calls"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"note": "my passport number [REDACTED:passport]"}
    assert json.loads(calls[1]["function"]["arguments"]) == {"city": "Paris", "days": 2}
    # Everything but the arguments is as the upstream sent it.
    expected = copy.deepcopy(original)
    for call, new in zip(expected["choices"][0]["message"]["tool_calls"], calls, strict=True):
        call["function"]["arguments"] = new["function"]["arguments"]
    assert doc == expected


def test_apply_to_json_redact_masks_responses_arguments_and_nothing_else() -> None:
    original = responses_answer()
    body = apply_to_json(ApiKind.RESPONSES, copy.deepcopy(original), REDACT)
    assert body is not None
    doc = json.loads(body)
    assert json.loads(doc["output"][1]["arguments"]) == {"body": "key [REDACTED:aws_access_key]"}
    expected = copy.deepcopy(original)
    expected["output"][1]["arguments"] = doc["output"][1]["arguments"]
    assert doc == expected


# -- chat streams ------------------------------------------------------------------------------------


def sse(doc: dict[str, Any] | str) -> bytes:
    data = doc if isinstance(doc, str) else json.dumps(doc, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def chunk(delta: dict[str, Any], finish: str | None = None, model: str = "big-model") -> bytes:
    return sse(
        {
            "id": "chatcmpl-up",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def call_start(index: int, call_id: str, name: str) -> bytes:
    return chunk(
        {
            "tool_calls": [
                {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            ]
        }
    )


def call_args(index: int, piece: str) -> bytes:
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})


NOTE_ARGS = json.dumps({"note": f"my {PASSPORT_TEXT}", "tags": ["x"]})
UPLOAD_ARGS = json.dumps({"body": f"key {AWS_KEY}", "n": 2})


def pieces(text: str, count: int) -> list[str]:
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)]


def tool_stream(prefix_text: str = "Sure, saving that. ") -> tuple[bytes, bytes]:
    """(the whole stream, the part before the first tool-call event): content, then two
    tool calls whose arguments come in pieces, the finish chunk and [DONE]."""
    before = chunk({"role": "assistant", "content": ""}) + chunk({"content": prefix_text})
    after = call_start(0, "call_note", "save_memory")
    after += b"".join(call_args(0, p) for p in pieces(NOTE_ARGS, 4))
    after += call_start(1, "call_up", "upload")
    after += b"".join(call_args(1, p) for p in pieces(UPLOAD_ARGS, 3))
    after += chunk({}, "tool_calls") + sse("[DONE]")
    return before + after, before


def plain_stream(text: str = "Hello there, nothing to call.") -> bytes:
    out = chunk({"role": "assistant", "content": ""})
    out += b"".join(chunk({"content": p}) for p in pieces(text, 4))
    return out + chunk({}, "stop") + sse("[DONE]")


def feed_split(gate: StreamGate, data: bytes, cuts: list[int]) -> list[bytes]:
    """Feed `data` cut at `cuts` (sorted, deduplicated); the bytes passed after each chunk."""
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(data))), len(data)]
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    return [gate.feed(c, i == len(chunks) - 1) for i, c in enumerate(chunks)]


def events(data: bytes) -> list[dict[str, Any] | str]:
    """The `data:` payloads of an SSE body, JSON-decoded ([DONE] kept as a string)."""
    out: list[dict[str, Any] | str] = []
    for block in data.decode().split("\n\n"):
        payload = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
        if payload:
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def content_of(data: bytes) -> str:
    return "".join(
        choice["delta"].get("content") or ""
        for event in events(data)
        if isinstance(event, dict)
        for choice in event["choices"]
    )


def tool_deltas_of(data: bytes) -> list[dict[str, Any]]:
    return [
        piece
        for event in events(data)
        if isinstance(event, dict)
        for choice in event["choices"]
        for piece in choice["delta"].get("tool_calls") or []
    ]


def test_whole_stream_in_one_chunk() -> None:
    stream, before = tool_stream()
    gate = StreamGate(ApiKind.CHAT)
    assert gate.feed(stream, True) == before
    assert gate.ready
    calls, text = gate.calls()
    assert calls == [ToolCall("save_memory", NOTE_ARGS, "call_note"), ToolCall("upload", UPLOAD_ARGS, "call_up")]
    assert text == "Sure, saving that. "
    assert before + gate.release(ALLOW) == stream


def test_content_passes_event_by_event_until_the_first_tool_call() -> None:
    stream, _ = tool_stream()
    frames = [f + b"\n\n" for f in stream.split(b"\n\n") if f]
    gate = StreamGate(ApiKind.CHAT)
    passed: list[bytes] = []
    for i, frame in enumerate(frames):
        assert not gate.ready  # decided only at the end of the stream
        passed.append(gate.feed(frame, i == len(frames) - 1))
    first_call = next(i for i, f in enumerate(frames) if b"tool_calls" in f)
    assert first_call == 2
    assert passed[:first_call] == frames[:first_call]  # each content event at once
    assert all(p == b"" for p in passed[first_call:])  # nothing from the first tool call on
    assert gate.ready  # the stream ended with calls held


def test_gate_is_not_ready_before_the_end() -> None:
    stream, _ = tool_stream()
    gate = StreamGate(ApiKind.CHAT)
    gate.feed(stream, False)
    assert not gate.ready
    assert gate.feed(b"", True) == b""
    assert gate.ready


def check_split(stream: bytes, before: bytes, cuts: list[int]) -> None:
    gate = StreamGate(ApiKind.CHAT)
    passed = b"".join(feed_split(gate, stream, cuts))
    assert passed == before
    assert b"tool_calls" not in passed and b"save_memory" not in passed
    assert gate.ready
    calls, text = gate.calls()
    assert [c.arguments for c in calls] == [NOTE_ARGS, UPLOAD_ARGS]
    assert [(c.name, c.call_id) for c in calls] == [("save_memory", "call_note"), ("upload", "call_up")]
    assert text == "Sure, saving that. "
    assert passed + gate.release(ALLOW) == stream


def test_every_two_way_split_of_an_ascii_stream() -> None:
    stream, before = tool_stream()
    for cut in range(1, len(stream)):
        check_split(stream, before, [cut])


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(st.integers(min_value=1, max_value=2000), max_size=40))
def test_arbitrary_splits_of_an_ascii_stream(cuts: list[int]) -> None:
    stream, before = tool_stream()
    check_split(stream, before, cuts)


def test_single_byte_chunks() -> None:
    stream, before = tool_stream()
    check_split(stream, before, list(range(1, len(stream))))


def test_splits_at_character_boundaries_of_a_multibyte_stream() -> None:
    stream, before = tool_stream("Grüße — 東京 🚀 ")
    text = stream.decode()
    boundaries = [len(text[:i].encode()) for i in range(1, len(text))]
    rng = random.Random(7)
    for _ in range(200):
        cuts = rng.sample(boundaries, rng.randint(1, 30))
        gate = StreamGate(ApiKind.CHAT)
        passed = b"".join(feed_split(gate, stream, cuts))
        assert passed == before
        assert gate.calls()[1] == "Grüße — 東京 🚀 "
        assert passed + gate.release(ALLOW) == stream


def test_split_inside_a_multibyte_character_keeps_the_bytes() -> None:
    stream, before = tool_stream("Grüße ")
    cut = stream.index("ü".encode()) + 1  # between the two bytes of "ü"
    gate = StreamGate(ApiKind.CHAT)
    passed = b"".join(feed_split(gate, stream, [cut]))
    assert passed == before
    assert passed + gate.release(ALLOW) == stream


def test_crlf_framed_stream_holds_its_tool_calls() -> None:
    stream, _ = tool_stream()
    crlf = stream.replace(b"\n\n", b"\r\n\r\n")
    gate = StreamGate(ApiKind.CHAT)
    passed = b"".join(feed_split(gate, crlf, [len(crlf) // 2]))
    assert gate.ready
    assert b"save_memory" not in passed
    assert [c.name for c in gate.calls()[0]] == ["save_memory", "upload"]


def test_tool_call_delta_with_a_null_index_is_held() -> None:
    bad = chunk({"tool_calls": [{"index": None, "id": "c1", "function": {"name": "run_shell", "arguments": "{}"}}]})
    gate = StreamGate(ApiKind.CHAT)
    assert gate.feed(bad + sse("[DONE]"), True) == b""
    assert gate.ready and [c.name for c in gate.calls()[0]] == ["run_shell"]


@pytest.mark.parametrize("verdict", [NONE, ALLOW, ANNOTATE])
def test_release_under_allow_is_the_held_bytes_unchanged(verdict: Verdict) -> None:
    stream, before = tool_stream()
    gate = StreamGate(ApiKind.CHAT)
    passed = b"".join(feed_split(gate, stream, [len(before) + 17, len(stream) - 5]))
    released = gate.release(verdict)
    assert released == stream[len(before) :]
    assert passed + released == stream


def test_release_under_redact_masks_each_calls_arguments_once() -> None:
    stream, before = tool_stream(prefix_text="")
    gate = StreamGate(ApiKind.CHAT)
    passed = b"".join(feed_split(gate, stream, [100, 400, 900]))
    assert passed == before
    released = gate.release(REDACT)
    assert AWS_KEY.encode() not in released and b"123456789" not in released
    decoded = events(released)
    assert decoded[-1] == "[DONE]"
    assert decoded[-2]["choices"][0]["finish_reason"] == "tool_calls"  # type: ignore[index]
    assert all(e["model"] == "big-model" for e in decoded if isinstance(e, dict))
    deltas = tool_deltas_of(released)
    assert [(d["index"], d["id"], d["function"]["name"]) for d in deltas] == [
        (0, "call_note", "save_memory"),
        (1, "call_up", "upload"),
    ]
    assert json.loads(deltas[0]["function"]["arguments"]) == {
        "note": "my passport number [REDACTED:passport]",
        "tags": ["x"],
    }
    assert json.loads(deltas[1]["function"]["arguments"]) == {"body": "key [REDACTED:aws_access_key]", "n": 2}
    assert content_of(passed + released) == ""


def test_release_under_redact_keeps_content_that_came_after_the_first_call() -> None:
    stream = call_start(0, "c1", "save_memory") + call_args(0, NOTE_ARGS) + chunk({"content": "Done."})
    stream += chunk({}, "tool_calls") + sse("[DONE]")
    gate = StreamGate(ApiKind.CHAT)
    assert gate.feed(stream, True) == b""
    released = gate.release(REDACT)
    assert content_of(released) == "Done."
    assert b"123456789" not in released


def test_release_under_redact_does_not_repeat_content_already_passed() -> None:
    stream, before = tool_stream(prefix_text="Sure, saving that. ")
    gate = StreamGate(ApiKind.CHAT)
    passed = gate.feed(stream, True)
    assert passed == before
    assert content_of(passed + gate.release(REDACT)) == "Sure, saving that. "


def test_release_under_block_ends_the_stream_with_the_message() -> None:
    stream, before = tool_stream()
    gate = StreamGate(ApiKind.CHAT)
    passed = b"".join(feed_split(gate, stream, [len(before) - 3, len(before) + 50]))
    assert passed == before
    released = gate.release(BLOCK)
    assert released.endswith(b"data: [DONE]\n\n")
    assert AWS_KEY.encode() not in released and b"save_memory" not in released
    assert tool_deltas_of(released) == []
    decoded = events(released)
    assert decoded[-1] == "[DONE]"
    assert decoded[-2]["choices"][0]["finish_reason"] == "stop"  # type: ignore[index]
    assert all(e["model"] == "big-model" for e in decoded if isinstance(e, dict))
    # The client saw the content before the call, then the refusal.
    assert content_of(passed + released) == "Sure, saving that. " + BLOCK.message


def test_release_under_block_without_a_model_names_the_rule() -> None:
    stream = call_start(0, "c1", "run_shell") + call_args(0, "{}") + sse("[DONE]")
    stream = stream.replace(b'"model": "big-model", ', b"")
    gate = StreamGate(ApiKind.CHAT)
    gate.feed(stream, True)
    released = gate.release(BLOCK)
    assert content_of(released) == BLOCK.message
    models = {e["model"] for e in events(released) if isinstance(e, dict)}
    assert models == {"vsr/secret_block"}


def test_stream_without_tool_calls_is_never_ready_and_passes_everything() -> None:
    stream = plain_stream("Grüße, 東京 — nothing to call.")
    text = stream.decode()
    boundaries = [len(text[:i].encode()) for i in range(1, len(text))]
    rng = random.Random(3)
    for cuts in [[], *[rng.sample(boundaries, rng.randint(1, 25)) for _ in range(100)]]:
        gate = StreamGate(ApiKind.CHAT)
        passed = feed_split(gate, stream, cuts)
        assert b"".join(passed) == stream
        assert not gate.ready
        assert gate.calls() == ([], "Grüße, 東京 — nothing to call.")


def test_plain_stream_events_pass_as_soon_as_they_are_complete() -> None:
    stream = plain_stream()
    frames = [f + b"\n\n" for f in stream.split(b"\n\n") if f]
    gate = StreamGate(ApiKind.CHAT)
    for frame in frames[:-1]:
        assert gate.feed(frame[:10], False) == b""
        assert gate.feed(frame[10:], False) == frame
    assert gate.feed(frames[-1], True) == frames[-1]
    assert not gate.ready


def test_non_json_and_comment_events_pass_through() -> None:
    stream = b": keep-alive\n\n" + b"event: ping\ndata: not json\n\n" + chunk({"content": "hi"}) + sse("[DONE]")
    gate = StreamGate(ApiKind.CHAT)
    assert gate.feed(stream, True) == stream
    assert not gate.ready


# -- Responses streams ---------------------------------------------------------------------------------


def responses_stream(response: dict[str, Any]) -> bytes:
    """Responses SSE for a finished `response`: typed events ending with response.completed."""
    seq = 0
    frames: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        nonlocal seq
        doc = {"type": kind, "sequence_number": seq, **fields}
        seq += 1
        frames.append(f"event: {kind}\ndata: {json.dumps(doc, ensure_ascii=False)}\n\n".encode())

    pending = {**response, "status": "in_progress", "output": []}
    emit("response.created", response=pending)
    for index, item in enumerate(response["output"]):
        emit("response.output_item.added", output_index=index, item=item)
        if item["type"] == "message":
            emit("response.output_text.delta", output_index=index, content_index=0, delta=item["content"][0]["text"])
        else:
            for piece in pieces(item["arguments"], 3):
                emit("response.function_call_arguments.delta", output_index=index, delta=piece)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return b"".join(frames)


def test_responses_stream_is_held_whole_and_judged_on_completion() -> None:
    stream = responses_stream(responses_answer())
    gate = StreamGate(ApiKind.RESPONSES)
    passed = feed_split(gate, stream, [50, 300, 301, 700, len(stream) - 2])
    assert b"".join(passed) == b""
    assert gate.ready
    calls, text = gate.calls()
    assert calls == [ToolCall("upload", json.dumps({"body": f"key {AWS_KEY}"}), "call_up")]
    assert text == "Uploading."
    assert gate.release(ALLOW) == stream


def test_responses_stream_without_calls_is_still_held_and_released_unchanged() -> None:
    answer = responses_answer()
    answer["output"] = answer["output"][:1]
    stream = responses_stream(answer)
    gate = StreamGate(ApiKind.RESPONSES)
    assert gate.feed(stream, True) == b""
    assert gate.ready
    assert gate.calls() == ([], "Uploading.")
    assert gate.release(NONE) == stream


@pytest.mark.parametrize("verdict", [BLOCK, REDACT])
def test_responses_stream_block_or_redact_is_replaced_by_a_refusal_stream(verdict: Verdict) -> None:
    stream = responses_stream(responses_answer())
    gate = StreamGate(ApiKind.RESPONSES)
    gate.feed(stream, True)
    released = gate.release(verdict)
    assert AWS_KEY.encode() not in released and b"function_call" not in released
    decoded = [e for e in events(released) if isinstance(e, dict)]
    assert [e["type"] for e in decoded][-1] == "response.completed"
    final = decoded[-1]["response"]
    assert final["model"] == "big-model"
    assert [item["type"] for item in final["output"]] == ["message"]
    assert final["output"][0]["content"][0]["text"] == verdict.message


def test_responses_stream_ending_incomplete_still_reports_its_calls() -> None:
    answer = responses_answer()
    stream = responses_stream({**answer, "status": "incomplete"})
    stream = stream.replace(b"response.completed", b"response.incomplete")
    gate = StreamGate(ApiKind.RESPONSES)
    gate.feed(stream, True)
    assert gate.ready
    assert [c.name for c in gate.calls()[0]] == ["upload"]
