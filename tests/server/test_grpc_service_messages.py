"""The servicer with Anthropic Messages over a real gRPC channel: pass-through and translated
routes (decision metadata, rewritten bodies), the translating response phase (JSON, SSE, upstream
errors), Anthropic-shaped rejections, and GET /v1/models answered from the policy."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep

from extproc.protocol import sse
from extproc.protocol.formats import messages as anthropic
from tests.server.test_grpc_service import Harness, body_msg, body_only_msg, decision_of, headers_msg, start

MESSAGES = "/v1/messages"
POLICY = """
version: 1
aliases: [auto]
client_models: [chat-only]
models:
  - {name: native, cluster: native, upstream_model: org/native}
  - {name: chat-only, cluster: chat_only, upstream_model: org/chat, api: [openai], description: "OpenAI only"}
  - {name: hidden, cluster: hidden}
signals:
  - {name: jailbreak, type: keyword, keywords: [jailbreak]}
  - {name: leaked_secret, type: secrets}
decisions:
  - name: jailbreak_block
    priority: 20
    when: {signal: jailbreak}
    action: {type: reject, status: 403, message: blocked, code: jailbreak_block}
tool_rules:
  - {name: no_secrets, priority: 20, when: {signal: leaked_secret}, action: block, message: "no credentials"}
default:
  name: general
  action: {type: route, models: [native]}
  plugins: {system_prompt: {content: "Policy prompt."}}
"""
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    server, channel = await start(policy=POLICY)
    yield Harness(server, channel)
    await channel.close()
    await server.stop()


def messages(text: str, model: str = "auto", **extra: Any) -> bytes:
    return json.dumps(
        {"model": model, "max_tokens": 32, "messages": [{"role": "user", "content": text}], **extra}
    ).encode()


async def test_native_model_gets_the_messages_body_with_model_and_system_rewritten(harness: Harness) -> None:
    [reply] = await harness.exchange(body_only_msg(messages("hello"), path=MESSAGES))
    body = json.loads(reply.request_body.response.body_mutation.body)
    assert body["model"] == "org/native" and body["system"] == "Policy prompt."
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    decision = decision_of(reply)
    assert decision["cluster"] == "native" and "translate" not in decision and "respond" not in decision


async def test_openai_only_model_gets_chat_completions_and_the_response_phase(harness: Harness) -> None:
    [reply] = await harness.exchange(body_only_msg(messages("hello", model="chat-only", stream=True), path=MESSAGES))
    body = json.loads(reply.request_body.response.body_mutation.body)
    assert body["model"] == "org/chat"
    assert body["messages"] == [{"role": "system", "content": "Policy prompt."}, {"role": "user", "content": "hello"}]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    decision = decision_of(reply)
    assert (decision["cluster"], decision["translate"], decision["respond"], decision["api"]) == (
        "chat_only",
        "chat",
        "stream",
        "chat_completions",
    )


async def test_untranslatable_request_is_refused_before_the_upstream(harness: Harness) -> None:
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}
    body = json.dumps(
        {
            "model": "chat-only",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": [pdf, {"type": "text", "text": "x"}]}],
        }
    ).encode()
    [reply] = await harness.exchange(body_only_msg(body, path=MESSAGES))
    immediate = reply.immediate_response
    assert immediate.status.code == 400
    doc = json.loads(immediate.body)
    assert doc["type"] == "error" and doc["error"]["type"] == "invalid_request_error"
    assert "document" in doc["error"]["message"]


async def test_rejections_and_request_errors_in_anthropic_shape(harness: Harness) -> None:
    [reply] = await harness.exchange(body_only_msg(messages("a jailbreak please"), path=MESSAGES))
    assert reply.immediate_response.status.code == 403
    assert json.loads(reply.immediate_response.body) == {
        "type": "error",
        "error": {"type": "permission_error", "message": "blocked"},
    }
    [reply] = await harness.exchange(body_only_msg(b"{not json", path=MESSAGES))
    assert reply.immediate_response.status.code == 400
    assert json.loads(reply.immediate_response.body)["error"]["type"] == "invalid_request_error"
    [reply] = await harness.exchange(body_only_msg(b"{not json"))  # the same on the Chat path: OpenAI's shape
    assert "type" not in json.loads(reply.immediate_response.body)


def response_phase(
    body: bytes, *, respond: str, status: int = 200, content_type: str = "application/json"
) -> list[Any]:
    headers = ep.ProcessingRequest(
        response_headers=ep.HttpHeaders(
            headers=base_pb2.HeaderMap(
                headers=[
                    base_pb2.HeaderValue(key=":status", raw_value=str(status).encode()),
                    base_pb2.HeaderValue(key="content-type", raw_value=content_type.encode()),
                ]
            )
        )
    )
    headers.metadata_context.filter_metadata["vsr"].update(
        {"respond": respond, "api": "chat_completions", "translate": "chat"}
    )
    if respond == "json":
        return [headers, ep.ProcessingRequest(response_body=ep.HttpBody(body=body, end_of_stream=True))]
    half = len(body) // 2
    return [
        headers,
        ep.ProcessingRequest(response_body=ep.HttpBody(body=body[:half], end_of_stream=False)),
        ep.ProcessingRequest(response_body=ep.HttpBody(body=body[half:], end_of_stream=True)),
    ]


def chat_answer(content: str | None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    finish = "tool_calls" if calls else "stop"
    return {
        "id": "chatcmpl-up",
        "model": "org/chat",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def body_of(reply: Any) -> bytes:
    return bytes(reply.response_body.response.body_mutation.body)


async def test_json_answer_translated_back_with_its_length(harness: Harness) -> None:
    replies = await harness.exchange(*response_phase(json.dumps(chat_answer("hi there")).encode(), respond="json"))
    common = replies[1].response_body.response
    message = json.loads(common.body_mutation.body)
    assert message["type"] == "message" and message["content"] == [{"type": "text", "text": "hi there"}]
    assert message["stop_reason"] == "end_turn"
    headers = {h.header.key: h.header.raw_value.decode() for h in common.header_mutation.set_headers}
    assert headers["content-length"] == str(len(common.body_mutation.body))


async def test_a_blocked_tool_call_is_judged_then_translated(harness: Harness) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "send", "arguments": json.dumps({"k": AWS_KEY})}}
    replies = await harness.exchange(*response_phase(json.dumps(chat_answer(None, [call])).encode(), respond="json"))
    message = json.loads(body_of(replies[1]))
    assert message["content"] == [{"type": "text", "text": "no credentials"}]
    assert AWS_KEY not in json.dumps(message)
    call["function"]["arguments"] = json.dumps({"city": "Paris"})
    replies = await harness.exchange(*response_phase(json.dumps(chat_answer(None, [call])).encode(), respond="json"))
    message = json.loads(body_of(replies[1]))
    assert message["content"] == [{"type": "tool_use", "id": "c1", "name": "send", "input": {"city": "Paris"}}]
    assert message["stop_reason"] == "tool_use"


async def test_upstream_error_translated_to_anthropic_shape(harness: Harness) -> None:
    error = json.dumps({"error": {"message": "no such model", "type": "invalid_request_error"}}).encode()
    replies = await harness.exchange(*response_phase(error, respond="json", status=404))
    assert json.loads(body_of(replies[1])) == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "no such model"},
    }


def header_changes(reply: Any) -> tuple[dict[str, str], list[str]]:
    mutation = reply.response_headers.response.header_mutation
    return {h.header.key: h.header.raw_value.decode() for h in mutation.set_headers}, list(mutation.remove_headers)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, json.dumps({"error": {"message": "slow down", "code": 429}}).encode(), ("rate_limit_error", "slow down")),
        (503, b"upstream connect error or disconnect/reset before headers", ("overloaded_error", "upstream connect")),
        (500, b"\xff\xfe{not json", ("api_error", "{not json")),
    ],
)
async def test_streamed_request_upstream_error_becomes_anthropic_json(
    harness: Harness, status: int, body: bytes, expected: tuple[str, str]
) -> None:
    replies = await harness.exchange(*response_phase(body, respond="stream", status=status, content_type="text/plain"))
    set_headers, removed = header_changes(replies[0])
    assert set_headers == {"content-type": "application/json"} and removed == ["content-length"]
    assert replies[1].response_body.response.body_mutation.clear_body  # held until the body ends
    error = json.loads(body_of(replies[2]))
    assert error["type"] == "error" and error["error"]["type"] == expected[0]
    assert expected[1] in error["error"]["message"]


async def test_an_error_without_a_body_gets_the_envelope_with_the_headers(harness: Harness) -> None:
    headers = response_phase(b"", respond="stream", status=502)[0]
    headers.response_headers.end_of_stream = True
    [reply] = await harness.exchange(headers)
    common = reply.response_headers.response
    assert common.status == ep.CommonResponse.CONTINUE_AND_REPLACE
    error = json.loads(common.body_mutation.body)
    assert error == {"type": "error", "error": {"type": "api_error", "message": "upstream answered 502"}}
    assert header_changes(reply)[0]["content-length"] == str(len(common.body_mutation.body))


async def test_a_huge_error_body_is_held_only_in_part(harness: Harness) -> None:
    body = b"x" * (1 << 20)
    replies = await harness.exchange(*response_phase(body, respond="json", status=500))
    error = json.loads(body_of(replies[1]))["error"]
    assert error["type"] == "api_error" and 0 < len(error["message"]) <= 500


async def test_sse_answer_translated_event_by_event(harness: Harness) -> None:
    chunks = [
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "lo"}}]},
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    raw = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    replies = await harness.exchange(*response_phase(raw, respond="stream", content_type="text/event-stream"))
    out = b"".join(body_of(r) for r in replies[1:])
    events = sse.events(out)
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
    message = anthropic.assembled_message(events)
    assert message is not None and message["content"] == [{"type": "text", "text": "Hello"}]
    assert b"chat.completion" not in out and b"[DONE]" not in out


def models_request(path: str = "/v1/models", anthropic_client: bool = False) -> Any:
    extra = [("anthropic-version", "2023-06-01")] if anthropic_client else []
    return headers_msg(path, "GET", extra=extra, eos=True)


async def test_models_are_answered_from_the_policy(harness: Harness) -> None:
    [reply] = await harness.exchange(models_request())
    assert reply.immediate_response.status.code == 200
    doc = json.loads(reply.immediate_response.body)
    assert doc["object"] == "list"
    assert [(m["id"], m["object"], m["owned_by"]) for m in doc["data"]] == [
        ("auto", "model", "vsr"),
        ("chat-only", "model", "vsr"),
    ]  # `native` and `hidden` are reachable only through the policy: not listed
    [reply] = await harness.exchange(models_request(anthropic_client=True))
    doc = json.loads(reply.immediate_response.body)
    assert [m["id"] for m in doc["data"]] == ["auto", "chat-only"]
    assert doc["has_more"] is False and doc["first_id"] == "auto" and doc["last_id"] == "chat-only"
    assert all(m["type"] == "model" for m in doc["data"])


async def test_one_model_and_an_unknown_one(harness: Harness) -> None:
    [reply] = await harness.exchange(models_request("/v1/models/chat-only"))
    assert json.loads(reply.immediate_response.body)["id"] == "chat-only"
    [reply] = await harness.exchange(models_request("/v1/models/hidden"))
    assert reply.immediate_response.status.code == 404
    assert json.loads(reply.immediate_response.body)["error"]["code"] == "model_not_found"
    [reply] = await harness.exchange(models_request("/v1/models/hidden", anthropic_client=True))
    assert json.loads(reply.immediate_response.body)["error"]["type"] == "not_found_error"


async def test_while_the_router_loads_each_api_gets_its_own_error_shape() -> None:
    """The 503 before the policy loads (no outcome to render) is Anthropic's envelope on
    /v1/messages, both flows, and for an Anthropic client's /v1/models; OpenAI's elsewhere."""
    server, channel = await start(policy=POLICY, load=False)
    harness = Harness(server, channel)
    try:
        body = messages("hello")
        one_message = (await harness.exchange(body_only_msg(body, path=MESSAGES)))[-1]
        three_messages = (await harness.exchange(headers_msg(MESSAGES), body_msg(body)))[-1]
        listing = (await harness.exchange(models_request(anthropic_client=True)))[-1]
        for reply in (one_message, three_messages, listing):
            assert reply.immediate_response.status.code == 503
            doc = json.loads(reply.immediate_response.body)
            assert doc["type"] == "error" and doc["error"]["type"] == "overloaded_error", doc
            assert "loading" in doc["error"]["message"]
        chat = (await harness.exchange(body_only_msg(b'{"messages": []}')))[-1]
        openai_listing = (await harness.exchange(models_request()))[-1]
        for reply in (chat, openai_listing):
            doc = json.loads(reply.immediate_response.body)
            assert doc["error"]["type"] == "server_error" and doc["error"]["code"] == "not_ready", doc
    finally:
        await channel.close()
        await server.stop()
