"""The servicer's conversation paths over a real gRPC channel: the decision hands out a
conversation ticket (and asks for the store phase), the store phase learns the answer's id,
the follow-up is routed to the model that answered; with and without the semantic cache."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep

from extproc.conversations.service import Conversations
from extproc.conversations.store import MemoryStore
from extproc.settings import Settings
from tests.server.test_grpc_service import Harness, body_only_msg, decision_of, start
from tests.server.test_grpc_service_cache import observe

POLICY = """
version: 1
conversations: {session_header: x-session-id}
models:
  - {name: general, cluster: general}
  - {name: big, cluster: big}
signals:
  - {name: analysis, type: keyword, keywords: [analyse]}
decisions:
  - {name: deep, priority: 10, when: {signal: analysis}, action: {type: route, models: [big]}}
default: {name: general, action: {type: route, models: [general]}}
"""


def no_cache(settings: Settings) -> None:
    settings.cache.enabled = False


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    server, channel = await start(policy=POLICY, configure=no_cache)
    server.service.conversations = Conversations(MemoryStore())
    yield Harness(server, channel)
    await channel.close()
    await server.stop()


def with_client(message: Any, session: str | None = None, token: str = "Bearer alice") -> Any:
    fields = {"tenant:authorization": token}
    if session is not None:
        fields["session"] = session
    message.metadata_context.filter_metadata["vsr.request"].update(fields)
    return message


def responses(text: str, previous: str | None = None) -> bytes:
    body: dict[str, Any] = {"model": "auto", "input": text}
    if previous:
        body["previous_response_id"] = previous
    return json.dumps(body).encode()


def answer_chunks(ticket: str, body: bytes, status: int = 200) -> list[Any]:
    """What the store filter sends: body chunks, the first with the status, the `vsr` metadata on each."""
    half = len(body) // 2
    messages = []
    for index, chunk in enumerate([body[:half], body[half:]]):
        message = ep.ProcessingRequest(
            observability_mode=True, response_body=ep.HttpBody(body=chunk, end_of_stream=index == 1)
        )
        message.metadata_context.filter_metadata["vsr"].update({"conversation": ticket, "observe": "1"})
        if index == 0:
            message.attributes["envoy.filters.http.ext_proc"].update({"response.code": status})
        messages.append(message)
    return messages


async def learned(harness: Harness, what: str) -> None:
    conversations = harness.server.service.conversations
    assert conversations is not None
    for _ in range(200):
        if conversations.counters.learned[what]:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never learned {what}: {conversations.counters.learned}")


async def test_a_responses_conversation_follows_its_first_model(harness: Harness) -> None:
    [first] = await harness.exchange(with_client(body_only_msg(responses("please analyse"), path="/v1/responses")))
    decision = decision_of(first)
    assert decision["cluster"] == "big" and decision["observe"] == "1"
    answer = json.dumps({"id": "resp_abc", "object": "response", "status": "completed", "output": []}).encode()
    assert await observe(harness, answer_chunks(decision["conversation"], answer)) == []  # nothing answered
    await learned(harness, "response")
    [follow_up] = await harness.exchange(
        with_client(body_only_msg(responses("and then?", "resp_abc"), path="/v1/responses"))
    )
    assert decision_of(follow_up)["cluster"] == "big"
    # the decision alone would have chosen general: the conversation kept it on big
    [fresh] = await harness.exchange(with_client(body_only_msg(responses("and then?"), path="/v1/responses")))
    assert decision_of(fresh)["cluster"] == "general"


async def test_a_session_follows_and_an_error_answer_teaches_nothing(harness: Harness) -> None:
    chat = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "please analyse"}]}).encode()
    [first] = await harness.exchange(with_client(body_only_msg(chat), session="s-1"))
    ticket = decision_of(first)["conversation"]
    assert await observe(harness, answer_chunks(ticket, b'{"error": "down"}', status=503)) == []
    await learned(harness, "status")
    follow = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "thanks"}]}).encode()
    [again] = await harness.exchange(with_client(body_only_msg(follow), session="s-1"))
    assert decision_of(again)["cluster"] == "general"  # not learned: routed as new
    assert await observe(harness, answer_chunks(ticket, b'{"id": "chatcmpl-1"}')) == []
    await learned(harness, "session")
    [kept] = await harness.exchange(with_client(body_only_msg(follow), session="s-1"))
    assert decision_of(kept)["cluster"] == "big"
    [other_tenant] = await harness.exchange(with_client(body_only_msg(follow), session="s-1", token="Bearer bob"))
    assert decision_of(other_tenant)["cluster"] == "general"


async def test_without_a_key_nothing_is_asked_of_the_store_phase(harness: Harness) -> None:
    chat = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}).encode()
    [reply] = await harness.exchange(with_client(body_only_msg(chat)))
    assert "observe" not in decision_of(reply) and "conversation" not in decision_of(reply)
