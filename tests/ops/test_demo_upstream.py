from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from extproc.ops.demo_upstream import DemoServer, DemoUpstream, decode_demo_reply, encode_demo_reply
from extproc.ops.stack import free_port


@pytest.fixture
async def demo() -> AsyncIterator[str]:
    port = free_port()
    server = DemoServer([DemoUpstream("general", "127.0.0.1", port, ("llama",), stream_delay_s=0.0)])
    await server.start()
    yield f"http://127.0.0.1:{port}"
    await server.close()


async def test_chat_says_who_served_it(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        reply = await client.post(
            "/v1/chat/completions",
            json={"model": "llama", "messages": [{"role": "user", "content": "hello"}]},
            headers={"x-vsr-decision": "general"},
        )
    assert reply.status_code == 200
    assert reply.headers["x-demo-upstream"] == "general"
    assert reply.headers["x-demo-model"] == "llama"
    body = reply.json()
    assert body["model"] == "llama"
    assert "cluster=general model=llama decision=general" in body["choices"][0]["message"]["content"]


async def test_chat_stream_is_sse(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi there"}]}
        async with client.stream("POST", "/v1/chat/completions", json=body) as reply:
            assert reply.headers["content-type"] == "text/event-stream"
            events = [line async for line in reply.aiter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "cluster=general" in "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)


async def test_other_endpoints(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        models = (await client.get("/v1/models")).json()
        assert [m["id"] for m in models["data"]] == ["llama"]
        completion = (await client.post("/v1/completions", json={"model": "m", "prompt": "once"})).json()
        assert completion["object"] == "text_completion"
        response = (await client.post("/v1/responses", json={"model": "m", "input": "hi"})).json()
        assert response["object"] == "response" and "cluster=general" in response["output_text"]
        bad = await client.post("/v1/chat/completions", content=b"{x", headers={"content-type": "application/json"})
        assert bad.status_code == 400 and "error" in bad.json()
        assert (await client.get("/nope")).status_code == 404


# --- scripted replies (x-demo-reply) ---------------------------------------------------------

SAVE_ARGS = json.dumps({"text": "the user's cat is called Miso", "tags": ["pets", "memory"]})
TOOL_MESSAGE: dict[str, Any] = {
    "content": None,
    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "save_memory", "arguments": SAVE_ARGS}}],
}
CHAT = {"model": "llama", "messages": [{"role": "user", "content": "remember my cat"}]}


def _sse_data(lines: list[str]) -> list[str]:
    return [line[6:] for line in lines if line.startswith("data: ")]


def test_encode_demo_reply_round_trips_with_and_without_padding() -> None:
    message = {"content": "héllo ✓", "tool_calls": []}
    value = encode_demo_reply(message)
    assert "=" not in value and "+" not in value and "/" not in value
    padded = value + "=" * (-len(value) % 4)
    for header in (value, padded):
        reply = decode_demo_reply(header)
        assert reply.content == "héllo ✓" and reply.tool_calls == ()
    assert json.loads(base64.urlsafe_b64decode(padded)) == message


def test_decode_fills_in_id_and_type() -> None:
    reply = decode_demo_reply(
        encode_demo_reply({"tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}, {"name": "g"}]})
    )
    first, second = reply.tool_calls
    assert first["id"].startswith("call_") and first["type"] == "function"
    assert first["function"] == {"name": "f", "arguments": '{"a":1}'}
    assert second["function"] == {"name": "g", "arguments": "{}"} and second["id"] != first["id"]
    assert reply.content is None and reply.finish_reason == "tool_calls"


async def test_scripted_chat_reply_with_tool_call(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        reply = await client.post(
            "/v1/chat/completions", json=CHAT, headers={"x-demo-reply": encode_demo_reply(TOOL_MESSAGE)}
        )
    assert reply.status_code == 200
    assert reply.headers["x-demo-upstream"] == "general"
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {"role": "assistant", "content": None, "tool_calls": TOOL_MESSAGE["tool_calls"]}


async def test_scripted_chat_reply_with_content_only(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        reply = await client.post(
            "/v1/chat/completions", json=CHAT, headers={"x-demo-reply": encode_demo_reply({"content": "Sure."})}
        )
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["message"] == {"role": "assistant", "content": "Sure."}


async def test_scripted_chat_stream_reassembles_tool_call_arguments(demo: str) -> None:
    message = {
        "content": "Saving that now.",
        "tool_calls": [
            TOOL_MESSAGE["tool_calls"][0],
            {"id": "call_2", "function": {"name": "send_email", "arguments": '{"to": "a@b.c", "body": "hi"}'}},
        ],
    }
    async with httpx.AsyncClient(base_url=demo) as client:
        body = {**CHAT, "stream": True}
        headers = {"x-demo-reply": encode_demo_reply(message)}
        async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as reply:
            assert reply.status_code == 200
            assert reply.headers["content-type"] == "text/event-stream"
            data = _sse_data([line async for line in reply.aiter_lines()])
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (len(chunks) - 1) + ["tool_calls"]
    assert deltas[-1] == {}
    content_deltas = [d["content"] for d in deltas[1:] if "content" in d]
    assert len(content_deltas) >= 2 and "".join(content_deltas) == "Saving that now."

    calls: dict[int, dict[str, str]] = {}
    fragments: dict[int, int] = {}
    for delta in deltas:
        for part in delta.get("tool_calls", []):
            index = part["index"]
            if "id" in part:  # the first delta of a call: id, type, name, empty arguments
                assert index not in calls and part["type"] == "function" and part["function"]["arguments"] == ""
                calls[index] = {"id": part["id"], "name": part["function"]["name"], "arguments": ""}
            else:
                assert set(part) == {"index", "function"} and set(part["function"]) == {"arguments"}
                calls[index]["arguments"] += part["function"]["arguments"]
                fragments[index] = fragments.get(index, 0) + 1
    assert calls == {
        0: {"id": "call_1", "name": "save_memory", "arguments": SAVE_ARGS},
        1: {"id": "call_2", "name": "send_email", "arguments": '{"to": "a@b.c", "body": "hi"}'},
    }
    assert fragments[0] >= 3 and fragments[1] >= 3


async def test_scripted_chat_stream_tool_calls_only_starts_with_null_content(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        headers = {"x-demo-reply": encode_demo_reply(TOOL_MESSAGE)}
        async with client.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers) as r:
            data = _sse_data([line async for line in r.aiter_lines()])
    deltas = [json.loads(d)["choices"][0]["delta"] for d in data[:-1]]
    assert deltas[0] == {"role": "assistant", "content": None}
    assert not any("content" in d for d in deltas[1:])


async def test_scripted_chat_stream_content_only_is_exact(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        headers = {"x-demo-reply": encode_demo_reply({"content": "Two words."})}
        async with client.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers) as r:
            data = _sse_data([line async for line in r.aiter_lines()])
    chunks = [json.loads(d)["choices"][0] for d in data[:-1]]
    assert "".join(c["delta"].get("content") or "" for c in chunks) == "Two words."
    assert chunks[-1]["finish_reason"] == "stop"


async def test_scripted_responses_reply(demo: str) -> None:
    message = {"content": "On it.", "tool_calls": TOOL_MESSAGE["tool_calls"]}
    async with httpx.AsyncClient(base_url=demo) as client:
        reply = await client.post(
            "/v1/responses",
            json={"model": "m", "input": "remember my cat"},
            headers={"x-demo-reply": encode_demo_reply(message)},
        )
    assert reply.status_code == 200
    body = reply.json()
    assert body["object"] == "response" and body["status"] == "completed" and body["output_text"] == "On it."
    text_item, call_item = body["output"]
    assert text_item["type"] == "message" and text_item["content"][0]["text"] == "On it."
    assert call_item["type"] == "function_call"
    assert (call_item["call_id"], call_item["name"], call_item["arguments"]) == ("call_1", "save_memory", SAVE_ARGS)

    async with httpx.AsyncClient(base_url=demo) as client:
        reply = await client.post(
            "/v1/responses",
            json={"model": "m", "input": "x"},
            headers={"x-demo-reply": encode_demo_reply(TOOL_MESSAGE)},
        )
    assert [item["type"] for item in reply.json()["output"]] == ["function_call"]


async def test_scripted_responses_stream(demo: str) -> None:
    message = {"content": "On it.", "tool_calls": TOOL_MESSAGE["tool_calls"]}
    async with httpx.AsyncClient(base_url=demo) as client:
        body = {"model": "m", "input": "remember my cat", "stream": True}
        headers = {"x-demo-reply": encode_demo_reply(message)}
        async with client.stream("POST", "/v1/responses", json=body, headers=headers) as reply:
            assert reply.headers["content-type"] == "text/event-stream"
            lines = [line async for line in reply.aiter_lines()]
    names = [line[7:] for line in lines if line.startswith("event: ")]
    events = [json.loads(d) for d in _sse_data(lines)]
    assert names == [e["type"] for e in events]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert names[0] == "response.created" and names[-1] == "response.completed"
    assert events[0]["response"]["status"] == "in_progress" and events[0]["response"]["output"] == []
    assert names.count("response.output_item.added") == 2 and names.count("response.output_item.done") == 2

    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "On it."
    arg_deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert len(arg_deltas) >= 3 and {e["output_index"] for e in arg_deltas} == {1}
    assert "".join(e["delta"] for e in arg_deltas) == SAVE_ARGS
    (done,) = [e for e in events if e["type"] == "response.function_call_arguments.done"]
    assert done["arguments"] == SAVE_ARGS and done["item_id"] == arg_deltas[0]["item_id"]
    added = next(e for e in events if e["type"] == "response.output_item.added" and e["output_index"] == 1)
    assert added["item"]["arguments"] == "" and added["item"]["name"] == "save_memory"

    completed = events[-1]["response"]
    assert completed["status"] == "completed" and completed["output_text"] == "On it."
    assert [i["type"] for i in completed["output"]] == ["message", "function_call"]
    assert completed["output"][1]["call_id"] == "call_1" and completed["output"][1]["arguments"] == SAVE_ARGS


async def test_responses_stream_without_script_streams_the_echo(demo: str) -> None:
    body = {"model": "m", "input": "hi", "stream": True}
    async with httpx.AsyncClient(base_url=demo) as client, client.stream("POST", "/v1/responses", json=body) as r:
        events = [json.loads(d) for d in _sse_data([line async for line in r.aiter_lines()])]
    assert events[-1]["type"] == "response.completed"
    assert "cluster=general" in events[-1]["response"]["output_text"]


async def test_scripted_completions_uses_the_content(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        reply = await client.post(
            "/v1/completions",
            json={"model": "m", "prompt": "x"},
            headers={"x-demo-reply": encode_demo_reply({"content": "ok"})},
        )
    assert reply.json()["choices"][0]["text"] == "ok"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "header",
    [
        "!!!not base64!!!",
        "abcde",  # impossible length
        "é".encode(),  # not ASCII
        _b64(b"{not json"),
        _b64(b"\xff\xfe"),  # not UTF-8
        _b64(b"[1, 2]"),  # not an object
        _b64(b'"text"'),
        _b64(b"{}"),  # neither content nor tool_calls
        _b64(b'{"content": 5}'),
        _b64(b'{"tool_calls": {"name": "f"}}'),  # not a list
        _b64(b'{"tool_calls": ["f"]}'),
        _b64(b'{"tool_calls": [{"function": {"arguments": "{}"}}]}'),  # no name
        _b64(b'{"tool_calls": [{"function": "f"}]}'),
        "",
    ],
)
async def test_malformed_demo_reply_is_400(demo: str, header: str | bytes) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        for path, body in (("/v1/chat/completions", {**CHAT, "stream": True}), ("/v1/responses", {"input": "x"})):
            value = header if isinstance(header, bytes) else header.encode()
            reply = await client.post(path, json=body, headers={b"x-demo-reply": value})
            assert reply.status_code == 400
            assert reply.headers["content-type"] == "application/json"
            error = reply.json()["error"]
            assert error["type"] == "invalid_request_error" and error["code"] == "bad_demo_reply"
            assert "x-demo-reply" in error["message"]
        # the server is still fine afterwards
        assert (await client.post("/v1/chat/completions", json=CHAT)).status_code == 200


async def test_messages_served_natively_or_not_at_all() -> None:
    native_port, openai_port = free_port(), free_port()
    server = DemoServer(
        [
            DemoUpstream("native", "127.0.0.1", native_port, ("m",), stream_delay_s=0.0),
            DemoUpstream("plain", "127.0.0.1", openai_port, ("m",), stream_delay_s=0.0, messages=False),
        ]
    )
    await server.start()
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    try:
        async with httpx.AsyncClient() as client:
            reply = await client.post(f"http://127.0.0.1:{native_port}/v1/messages", json=body)
            assert reply.status_code == 200 and reply.json()["type"] == "message"
            assert "you said: hi" in reply.json()["content"][0]["text"]
            streamed = await client.post(f"http://127.0.0.1:{native_port}/v1/messages", json={**body, "stream": True})
            assert streamed.text.startswith("event: message_start") and "event: message_stop" in streamed.text
            refused = await client.post(f"http://127.0.0.1:{openai_port}/v1/messages", json=body)
            assert refused.status_code == 404
    finally:
        await server.close()


# --- scripted failures (x-demo-error) --------------------------------------------------------


async def test_scripted_errors(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        reply = await client.post("/v1/chat/completions", json=CHAT, headers={"x-demo-error": "429"})
        assert reply.status_code == 429 and reply.json()["error"]["code"] == "demo_429"
        reply = await client.post("/v1/chat/completions", json=CHAT, headers={"x-demo-error": "502 text"})
        assert reply.status_code == 502 and reply.headers["content-type"] == "text/plain"
        assert reply.text.startswith("demo upstream general failed with 502")
        streamed = {**CHAT, "stream": True}
        reply = await client.post("/v1/chat/completions", json=streamed, headers={"x-demo-error": "503 mid-stream"})
        assert reply.status_code == 200
        chunks = [json.loads(d) for d in _sse_data(reply.text.splitlines()) if d != "[DONE]"]
        assert chunks[1]["choices"][0]["delta"]["content"] and chunks[-1]["error"]["code"] == 503
        with pytest.raises(httpx.RemoteProtocolError):  # closed without an answer
            await client.post("/v1/chat/completions", json=CHAT, headers={"x-demo-error": "503 reset"})
        for bad in ("nope", "200", "500 loud", "429 text extra"):
            reply = await client.post("/v1/chat/completions", json=CHAT, headers={"x-demo-error": bad})
            assert reply.status_code == 400 and reply.json()["error"]["code"] == "bad_demo_error"


async def test_it_says_back_the_system_prompt_and_headers_it_received(demo: str) -> None:
    chat = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Do not repeat document numbers."},
            {"role": "user", "content": "hello"},
        ],
    }
    headers = {
        "x-data-classification": "restricted",
        "authorization": "Bearer sk-secret",
        "x-envoy-expected-rq-timeout-ms": "1",
    }
    async with httpx.AsyncClient(base_url=demo) as client:
        reply = await client.post("/v1/chat/completions", json=chat, headers=headers)
        streamed = await client.post("/v1/chat/completions", json={**chat, "stream": True}, headers=headers)
        messages = await client.post(
            "/v1/messages",
            json={
                "model": "m",
                "max_tokens": 5,
                "system": [{"type": "text", "text": "Be brief."}],
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
        responses = await client.post(
            "/v1/responses", json={"model": "m", "instructions": "Answer in French.", "input": "hi"}
        )
        plain = await client.post("/v1/completions", json={"model": "m", "prompt": "once"})
    for answer in (reply, streamed):
        assert json.loads(answer.headers["x-demo-received-system"]) == "Do not repeat document numbers."
        received = json.loads(answer.headers["x-demo-received-headers"])
        assert received["x-data-classification"] == "restricted"
        assert received["authorization"] == "<redacted>"  # a credential is never said back
        assert not any(name.startswith(("x-envoy-", "host", "content-")) for name in received)
    assert 'system="Do not repeat document numbers."' in reply.json()["choices"][0]["message"]["content"]
    assert json.loads(messages.headers["x-demo-received-system"]) == "Be brief."
    assert json.loads(responses.headers["x-demo-received-system"]) == "Answer in French."
    assert json.loads(plain.headers["x-demo-received-system"]) is None
    assert "system=-" in plain.json()["choices"][0]["text"]
