"""The servicer's cache paths over a real gRPC channel: a miss hands out a store ticket, the
observability-mode store stream stores the upstream's answer, the next request is a hit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep

from extproc.settings import Settings
from tests.server.test_grpc_service import Harness, body_only_msg, decision_of, start

POLICY = """
version: 1
models:
  - {name: general, cluster: general, upstream_model: llama}
signals:
  - {name: jailbreak, type: keyword, keywords: [jailbreak]}
decisions:
  - {name: block, priority: 10, when: {signal: jailbreak}, action: {type: reject, message: blocked}}
default: {name: general, action: {type: route, models: [general]}, cache: {enabled: true}}
"""

ANSWER = json.dumps(
    {
        "id": "chatcmpl-up",
        "model": "llama",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}],
    }
).encode()


def question(text: str = "What is the capital of France?") -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()


def with_tenant(message: Any, token: str | None = "Bearer alice", cache_control: str | None = None) -> Any:
    fields = {}
    if token is not None:
        fields["tenant:authorization"] = token
    if cache_control is not None:
        fields["cache_control"] = cache_control
    if fields:
        message.metadata_context.filter_metadata["vsr.request"].update(fields)
    return message


def store_stream(ticket: str, chunks: list[bytes], status: str = "200") -> list[Any]:
    """What Envoy's observability-mode store filter sends: response headers, then body chunks."""
    headers = ep.ProcessingRequest(
        observability_mode=True,
        response_headers=ep.HttpHeaders(
            headers=base_pb2.HeaderMap(
                headers=[
                    base_pb2.HeaderValue(key=":status", raw_value=status.encode()),
                    base_pb2.HeaderValue(key="content-type", raw_value=b"application/json"),
                ]
            )
        ),
    )
    headers.metadata_context.filter_metadata["vsr"].update({"cache_ticket": ticket, "cluster": "general"})
    bodies = [
        ep.ProcessingRequest(
            observability_mode=True, response_body=ep.HttpBody(body=chunk, end_of_stream=i == len(chunks) - 1)
        )
        for i, chunk in enumerate(chunks)
    ]
    return [headers, *bodies]


def store_chunks(ticket: str, chunks: list[bytes], status: int = 200) -> list[Any]:
    """What the shipped store filter sends: body chunks only, the first carrying the status as an
    attribute; the `vsr` metadata (the ticket) with each."""
    messages = []
    for i, chunk in enumerate(chunks):
        message = ep.ProcessingRequest(
            observability_mode=True, response_body=ep.HttpBody(body=chunk, end_of_stream=i == len(chunks) - 1)
        )
        message.metadata_context.filter_metadata["vsr"].update({"cache_ticket": ticket, "cluster": "general"})
        if i == 0:
            message.attributes["envoy.filters.http.ext_proc"].update({"response.code": status})
        messages.append(message)
    return messages


def streamed_question(text: str) -> bytes:
    return json.dumps({"model": "auto", "stream": True, "messages": [{"role": "user", "content": text}]}).encode()


SSE_ANSWER = (
    b'data: {"id":"chatcmpl-up","object":"chat.completion.chunk","model":"llama",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Blue"}}]}\n\n'
    b'data: {"id":"chatcmpl-up","object":"chat.completion.chunk","model":"llama",'
    b'"choices":[{"index":0,"delta":{"content":"."},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


async def observe(harness: Harness, messages: list[Any]) -> list[Any]:
    """Send without waiting for answers (Envoy's observability mode); whatever comes back is wrong.
    The server may close the stream once it has what it needs: later messages are dropped, as
    Envoy drops them."""
    call = harness.stub.Process()
    for message in messages:
        if call.done():
            break
        try:
            await call.write(message)
        except asyncio.InvalidStateError:  # closed between the check and the write
            break
    if not call.done():
        await call.done_writing()
    return [reply async for reply in call]


def store_first(settings: Settings) -> None:
    """admission: first, so that a store never depends on how busy this machine is (the default,
    adaptive, has tests of its own in tests/cache)."""
    settings.cache.admission = "first"


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    server, channel = await start(policy=POLICY, configure=store_first)
    yield Harness(server, channel)
    await channel.close()
    await server.stop()


async def stored(harness: Harness, result: str = "stored", n: int = 1) -> None:
    cache = harness.server.service.cache
    assert cache is not None
    for _ in range(200):
        if cache.counters.stores[result] >= n:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no store {result}: {cache.counters.stores}")


def header_map(reply: Any) -> dict[str, str]:
    return {h.header.key: h.header.raw_value.decode() for h in reply.immediate_response.headers.set_headers}


async def test_miss_store_then_hit(harness: Harness) -> None:
    [miss] = await harness.exchange(with_tenant(body_only_msg(question())))
    decision = decision_of(miss)
    assert decision["cache"] == "miss" and decision["decision"] == "general"
    ticket = decision["cache_ticket"]
    assert "alice" not in ticket  # the tenant travels hashed
    assert await observe(harness, store_stream(ticket, [ANSWER[:20], ANSWER[20:]])) == []
    await stored(harness)
    [hit] = await harness.exchange(with_tenant(body_only_msg(question())))
    assert hit.HasField("immediate_response") and hit.immediate_response.status.code == 200
    headers = header_map(hit)
    assert headers["x-vsr-cache"] == "hit" and headers["x-vsr-cache-similarity"] == "1.000"
    assert headers["x-vsr-decision"] == "general" and headers["content-type"] == "application/json"
    assert hit.immediate_response.body == ANSWER
    # another tenant, and a request without one, are not served alice's answer
    [other] = await harness.exchange(with_tenant(body_only_msg(question()), token="Bearer bob"))
    assert decision_of(other)["cache"] == "miss"
    [anonymous] = await harness.exchange(with_tenant(body_only_msg(question()), token=None))
    assert decision_of(anonymous)["cache"] == "bypass" and "cache_ticket" not in decision_of(anonymous)


async def test_no_cache_and_no_store_from_the_requests_cache_control(harness: Harness) -> None:
    [miss] = await harness.exchange(with_tenant(body_only_msg(question("Name a colour."))))
    await observe(harness, store_stream(decision_of(miss)["cache_ticket"], [ANSWER]))
    await stored(harness)
    [fresh] = await harness.exchange(with_tenant(body_only_msg(question("Name a colour.")), cache_control="no-cache"))
    assert decision_of(fresh)["cache"] == "bypass" and "cache_ticket" in decision_of(fresh)
    [unstored] = await harness.exchange(with_tenant(body_only_msg(question("Name a bird.")), cache_control="no-store"))
    assert decision_of(unstored)["cache"] == "miss" and "cache_ticket" not in decision_of(unstored)


async def test_rejects_are_never_cached(harness: Harness) -> None:
    [reply] = await harness.exchange(with_tenant(body_only_msg(question("jailbreak now"))))
    assert reply.immediate_response.status.code == 403
    assert "x-vsr-cache" not in header_map(reply)


async def test_bad_store_streams_lose_nothing_and_break_nothing(harness: Harness) -> None:
    await observe(harness, store_stream("{not json", [ANSWER]))
    await stored(harness, "bad_ticket")
    [miss] = await harness.exchange(with_tenant(body_only_msg(question("Name a fish."))))
    ticket = decision_of(miss)["cache_ticket"]
    await observe(harness, store_stream(ticket, [ANSWER], status="500"))
    await stored(harness, "status")
    await observe(harness, store_stream(ticket, [b'{"choices": [']))  # cut short
    await stored(harness, "not_json")
    call = harness.stub.Process()  # a store stream that ends before the body does
    for message in store_stream(ticket, [ANSWER[:10], ANSWER[10:]])[:2]:
        await call.write(message)
    await call.done_writing()
    assert [r async for r in call] == []
    [again] = await harness.exchange(with_tenant(body_only_msg(question("Name a fish."))))
    assert decision_of(again)["cache"] == "miss"  # nothing was stored, and the server still answers
    for _ in range(100):  # every stream ended, the cut-short one included (the last closes just after its reply)
        if harness.server.service.in_flight == 0:
            break
        await asyncio.sleep(0.02)
    assert harness.server.service.in_flight == 0


async def test_the_server_closes_a_store_stream_once_it_has_the_answer(harness: Harness) -> None:
    """Envoy holds an observability stream open for its deferred-close timeout (5 s) unless the
    server ends it: thousands of idle streams under load. So it ends after the last body chunk,
    and right after the headers of an answer that will not be stored."""
    [miss] = await harness.exchange(with_tenant(body_only_msg(question("Name a tree."))))
    ticket = decision_of(miss)["cache_ticket"]
    headers, *bodies = store_stream(ticket, [ANSWER[:15], ANSWER[15:]])
    call = harness.stub.Process()
    await call.write(headers)
    await call.write(bodies[0])
    await asyncio.sleep(0.1)
    assert not call.done()  # mid-answer: still listening
    await call.write(bodies[1])  # end_of_stream; no done_writing from our side
    assert await asyncio.wait_for(call.code(), 5) == grpc.StatusCode.OK
    await stored(harness)

    failed = harness.stub.Process()
    await failed.write(store_stream(ticket, [ANSWER], status="503")[0])
    assert await asyncio.wait_for(failed.code(), 5) == grpc.StatusCode.OK  # the body is not needed
    await stored(harness, "status")


async def test_one_message_store_phase_reads_the_status_attribute_and_the_tickets_stream_flag(
    harness: Harness,
) -> None:
    """The shipped config sends no response headers: the status is an attribute, and the ticket
    says whether the answer is SSE (Envoy cannot send the content type)."""
    [miss] = await harness.exchange(with_tenant(body_only_msg(question("Name a metal."))))
    assert await observe(harness, store_chunks(decision_of(miss)["cache_ticket"], [ANSWER[:30], ANSWER[30:]])) == []
    await stored(harness)
    [hit] = await harness.exchange(with_tenant(body_only_msg(question("Name a metal."))))
    assert header_map(hit)["x-vsr-cache"] == "hit" and hit.immediate_response.body == ANSWER

    [streamed] = await harness.exchange(with_tenant(body_only_msg(streamed_question("Name a colour of the sky."))))
    await observe(harness, store_chunks(decision_of(streamed)["cache_ticket"], [SSE_ANSWER[:90], SSE_ANSWER[90:]]))
    await stored(harness, n=2)
    [again] = await harness.exchange(with_tenant(body_only_msg(question("Name a colour of the sky."))))
    assert header_map(again)["x-vsr-cache"] == "hit"
    assert json.loads(again.immediate_response.body)["choices"][0]["message"]["content"] == "Blue."

    [failed] = await harness.exchange(with_tenant(body_only_msg(question("Name a gas."))))
    call = harness.stub.Process()
    await call.write(store_chunks(decision_of(failed)["cache_ticket"], [b'{"error": {}}', b""], status=503)[0])
    assert await asyncio.wait_for(call.code(), 5) == grpc.StatusCode.OK  # not storable: closed at once
    await stored(harness, "status")


async def test_admission_repeat_sends_no_store_ticket_on_a_first_sighting() -> None:
    """Without a ticket Envoy's store routes do not match: a question asked once costs no store phase."""

    def repeat(settings: Settings) -> None:
        settings.cache.admission = "repeat"

    server, channel = await start(policy=POLICY, configure=repeat)
    harness = Harness(server, channel)
    try:
        [first] = await harness.exchange(with_tenant(body_only_msg(question("Name a river."))))
        assert decision_of(first)["cache"] == "miss" and "cache_ticket" not in decision_of(first)
        [second] = await harness.exchange(with_tenant(body_only_msg(question("Name a river."))))
        assert decision_of(second)["cache"] == "miss"
        await observe(harness, store_stream(decision_of(second)["cache_ticket"], [ANSWER]))
        await stored(harness)
        [hit] = await harness.exchange(with_tenant(body_only_msg(question("Name a river."))))
        assert header_map(hit)["x-vsr-cache"] == "hit"
    finally:
        await channel.close()
        await server.stop()
