"""The servicer's tool-rules response phase over a real gRPC channel: what Envoy's `vsr.tool_rules`
filter sends (response headers, then the buffered body) and what comes back; its trace span."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from extproc.observability.tracing import build_tracer
from extproc.settings import TracingSettings
from tests.server.test_grpc_service import Harness, body_only_msg, decision_of, start

POLICY = """
version: 1
models:
  - {name: general, cluster: general}
signals:
  - {name: leaked_secret, type: secrets}
  - {name: mailer, type: tools, called: ["send_*"]}
tool_rules:
  - {name: no_secrets, priority: 20, when: {signal: leaked_secret}, action: block, message: "no credentials"}
  - {name: mail_note, priority: 10, when: {signal: mailer}, action: annotate}
default: {name: general, action: {type: route, models: [general]}}
"""
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def answer(name: str, arguments: dict[str, Any]) -> bytes:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return json.dumps({"id": "chatcmpl-up", "model": "m", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}).encode()


def response_phase(body: bytes, respond: str = "json") -> list[Any]:
    headers = ep.ProcessingRequest(
        response_headers=ep.HttpHeaders(
            headers=base_pb2.HeaderMap(
                headers=[
                    base_pb2.HeaderValue(key=":status", raw_value=b"200"),
                    base_pb2.HeaderValue(key="content-type", raw_value=b"application/json"),
                ]
            )
        )
    )
    headers.metadata_context.filter_metadata["vsr"].update({"respond": respond, "api": "chat_completions"})
    return [headers, ep.ProcessingRequest(response_body=ep.HttpBody(body=body, end_of_stream=True))]


@pytest.fixture
async def harness() -> AsyncIterator[tuple[Harness, InMemorySpanExporter]]:
    server, channel = await start(policy=POLICY)
    exporter = InMemorySpanExporter()
    server.tracer = server.service.tracer = build_tracer(TracingSettings(enabled=True), exporter=exporter)
    yield Harness(server, channel), exporter
    await channel.close()
    await server.stop()


def changed_body(reply: Any) -> tuple[bytes | None, dict[str, str]]:
    common = reply.response_body.response
    headers = {h.header.key: h.header.raw_value.decode() for h in common.header_mutation.set_headers}
    return (common.body_mutation.body if common.body_mutation.HasField("body") else None), headers


async def test_a_request_offering_tools_asks_envoy_for_the_response_phase(harness: tuple[Harness, Any]) -> None:
    client, _ = harness
    tools = [{"type": "function", "function": {"name": "send_email"}}]
    body = json.dumps({"model": "auto", "tools": tools, "messages": [{"role": "user", "content": "hi"}]}).encode()
    [reply] = await client.exchange(body_only_msg(body))
    assert decision_of(reply)["respond"] == "json" and decision_of(reply)["api"] == "chat_completions"
    plain = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}).encode()
    [reply] = await client.exchange(body_only_msg(plain))
    assert "respond" not in decision_of(reply)  # no tools offered: no response phase to pay for


async def test_a_blocked_call_is_replaced_and_traced_without_its_arguments(harness: tuple[Harness, Any]) -> None:
    client, exporter = harness
    replies = await client.exchange(*response_phase(answer("send_email", {"body": f"key {AWS_KEY}"})))
    assert [r.WhichOneof("response") for r in replies] == ["response_headers", "response_body"]
    body, headers = changed_body(replies[1])
    assert body is not None and AWS_KEY.encode() not in body
    assert json.loads(body)["choices"][0]["message"]["content"] == "no credentials"
    assert headers["x-vsr-tool-rule"] == "no_secrets" and headers["content-length"] == str(len(body))
    for _ in range(100):  # the stream's spans are emitted when it closes, just after the last reply
        spans = [s for s in exporter.get_finished_spans() if s.name == "vsr.tool_rules"]
        if spans:
            break
        await asyncio.sleep(0.02)
    assert len(spans) == 1
    attributes = dict(spans[0].attributes or {})
    assert attributes == {"vsr.tool_rules.calls": 1, "vsr.tool_rules.action": "block", "vsr.tool_rules.rule": "no_secrets"}
    assert all(AWS_KEY not in str(v) for s in exporter.get_finished_spans() for v in (s.attributes or {}).values())


async def test_annotate_only_adds_headers_and_an_unmatched_call_is_untouched(harness: tuple[Harness, Any]) -> None:
    client, _ = harness
    replies = await client.exchange(*response_phase(answer("send_email", {"to": "a@example.com"})))
    body, headers = changed_body(replies[1])
    assert body is None and headers == {"x-vsr-tool-rule": "mail_note", "x-vsr-tool-action": "annotate"}
    replies = await client.exchange(*response_phase(answer("lookup", {"q": "weather"})))
    assert changed_body(replies[1]) == (None, {})


async def test_a_non_json_or_failed_answer_passes_unjudged(harness: tuple[Harness, Any]) -> None:
    client, _ = harness
    replies = await client.exchange(*response_phase(b"<html>oops</html>"))
    assert changed_body(replies[1]) == (None, {})
