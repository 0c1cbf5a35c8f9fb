"""Conversations keep their model: follow / move rules over a real Router's outcomes, the answer
learner (JSON, SSE, errors), and both stores (in-process; a real redis-server, up and down)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from extproc.conversations.service import AnswerLearner, Conversations, explained, response_key, tenant_scope
from extproc.conversations.store import MemoryStore, RedisStore
from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.policy.load import compile_text
from extproc.router import Router
from extproc.settings import Settings
from extproc.signals.base import BuildContext
from extproc.testing.redis_server import redis_available, running_redis

POLICY = """
version: 1
conversations: {session_header: X-Session-Id, ttl_s: 60}
models:
  - {name: general, cluster: general}
  - {name: big, cluster: big, context_window: 100000}
  - {name: tiny, cluster: tiny, context_window: 50}
  - {name: restricted, cluster: restricted, modalities: [text, image]}
signals:
  - {name: passport, type: keyword, keywords: [passport]}
  - {name: jailbreak, type: keyword, keywords: [jailbreak]}
  - {name: analysis, type: keyword, keywords: [analyse]}
decisions:
  - {name: block, priority: 30, when: {signal: jailbreak}, action: {type: reject, message: blocked}}
  - {name: identity, priority: 20, when: {signal: passport}, action: {type: route, models: [restricted]}, sticky: false}
  - {name: deep, priority: 10, when: {signal: analysis}, action: {type: route, models: [big]}}
default: {name: general, action: {type: route, models: [general]}}
"""
TENANT = {"authorization": "Bearer alice"}


@pytest.fixture(scope="module")
def router() -> Iterator[Router]:
    settings = Settings.load(None, environ={})
    executor = HeavyExecutor(1, None)
    ctx = BuildContext(settings=settings, executor=executor, models=ModelRegistry())
    routing = Router(settings, compile_text(POLICY, ctx), executor=executor, models=ctx.models)
    yield routing
    routing.close()


def responses(text: str, previous: str | None = None, **extra: Any) -> bytes:
    body: dict[str, Any] = {"model": "auto", "input": text, **extra}
    if previous is not None:
        body["previous_response_id"] = previous
    return json.dumps(body).encode()


def chat(text: str) -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()


async def routed(
    router: Router, service: Conversations, body: bytes, path: str, session: str | None = None, **kw: Any
) -> tuple[Any, Any]:
    outcome = await router.route(body, path=path)
    lookup = await service.follow(outcome, router.policy.spec, tenant=kw.get("tenant", TENANT), session=session)
    return outcome, lookup


async def answered(service: Conversations, lookup: Any, body: bytes, status: int = 200) -> None:
    assert lookup.ticket is not None
    learner = service.learner(lookup.ticket)
    assert learner is not None
    assert learner.feed(status, body, True)
    await service.learn(learner)


def response_answer(identifier: str) -> bytes:
    return json.dumps({"id": identifier, "object": "response", "status": "completed", "output": []}).encode()


async def test_a_responses_follow_up_goes_to_the_model_that_answered(router: Router) -> None:
    service = Conversations(MemoryStore())
    first, lookup = await routed(router, service, responses("please analyse this"), "/v1/responses")
    assert (first.model.name, lookup.state, lookup.reason) == ("big", "new", "no_key")
    await answered(service, lookup, response_answer("resp_1"))
    follow_up, lookup = await routed(router, service, responses("and the rest?", "resp_1"), "/v1/responses")
    assert (follow_up.model.name, lookup.state, lookup.key) == ("big", "followed", "previous_response")
    assert any("kept there" in note for note in follow_up.notes)
    # another tenant's follow-up with the same id is a new conversation
    other, lookup = await routed(
        router, service, responses("and the rest?", "resp_1"), "/v1/responses", tenant={"authorization": "Bearer bob"}
    )
    assert (other.model.name, lookup.state, lookup.reason) == ("general", "new", "not_found")


async def test_safety_decisions_apply_first(router: Router) -> None:
    service = Conversations(MemoryStore())
    _, lookup = await routed(router, service, responses("please analyse this"), "/v1/responses")
    await answered(service, lookup, response_answer("resp_2"))
    moved, lookup = await routed(router, service, responses("my passport is X1", "resp_2"), "/v1/responses")
    assert (moved.model.name, lookup.state, lookup.reason) == ("restricted", "moved", "decision_not_sticky")
    refused, lookup = await routed(router, service, responses("a jailbreak", "resp_2"), "/v1/responses")
    assert refused.action == "reject" and lookup.state == "off"


async def test_a_session_header_keeps_any_api_on_its_model(router: Router) -> None:
    service = Conversations(MemoryStore())
    first, lookup = await routed(router, service, chat("please analyse this"), "/v1/chat/completions", session="s1")
    assert first.model.name == "big" and lookup.state == "new"
    await answered(service, lookup, b'{"id":"chatcmpl-1"}')
    follow_up, lookup = await routed(router, service, chat("thanks"), "/v1/chat/completions", session="s1")
    assert (follow_up.model.name, lookup.state, lookup.key) == ("big", "followed", "session")
    fresh, lookup = await routed(router, service, chat("thanks"), "/v1/chat/completions", session="s2")
    assert fresh.model.name == "general" and lookup.state == "new"
    plain, lookup = await routed(router, service, chat("thanks"), "/v1/chat/completions")
    assert plain.model.name == "general" and lookup.state == "off"  # no key, nothing to learn


async def test_a_failed_answer_teaches_nothing(router: Router) -> None:
    service = Conversations(MemoryStore())
    _, lookup = await routed(router, service, chat("please analyse this"), "/v1/chat/completions", session="s9")
    await answered(service, lookup, b'{"error": {}}', status=500)
    again, lookup = await routed(router, service, chat("thanks"), "/v1/chat/completions", session="s9")
    assert again.model.name == "general" and lookup.state == "new"
    assert service.counters.learned["status"] == 1


async def test_a_remembered_model_that_cannot_take_the_request_lets_it_move(router: Router) -> None:
    service = Conversations(MemoryStore())
    scope = tenant_scope(TENANT)
    await service.store.put(response_key(scope, "resp_t"), "tiny", 60)
    long_text = "word " * 400  # ~500 tokens, over tiny's 50
    outcome, lookup = await routed(router, service, responses(long_text, "resp_t"), "/v1/responses")
    assert (outcome.model.name, lookup.state, lookup.reason) == ("general", "moved", "context_window")
    await service.store.put(response_key(scope, "resp_gone"), "no-such-model", 60)
    outcome, lookup = await routed(router, service, responses("hi", "resp_gone"), "/v1/responses")
    assert (outcome.model.name, lookup.reason) == ("general", "model_gone")


async def test_a_conversation_leaves_a_model_that_is_down_or_over_its_max_waiting(router: Router) -> None:
    from extproc.fleet.service import FleetService

    fleet = FleetService(Settings.load(None, environ={"VSR_FLEET__COOLDOWN_AFTER": "1"}))
    service = Conversations(MemoryStore())
    service.unavailable = fleet.unavailable
    _, lookup = await routed(router, service, responses("please analyse this"), "/v1/responses")
    await answered(service, lookup, response_answer("resp_fleet"))
    kept, lookup = await routed(router, service, responses("more?", "resp_fleet"), "/v1/responses")
    assert (kept.model.name, lookup.state) == ("big", "followed")
    fleet.fleet.observe("big", failed=True, latency_s=None)  # cooled down after one failure
    moved, lookup = await routed(router, service, responses("more?", "resp_fleet"), "/v1/responses")
    assert (moved.model.name, lookup.state, lookup.reason) == ("general", "moved", "model_down")
    assert any("model_down" in note for note in moved.notes)
    fleet.fleet.observe("big", failed=False, latency_s=0.1)
    spec = router.policy.spec
    busy = spec.model_copy(update={"models": [m.model_copy(update={"max_waiting": 5}) for m in spec.models]})
    fleet.fleet.set_load("big", running=1.0, waiting=9.0, kv_cache=None)
    outcome = await router.route(responses("more?", "resp_fleet"), path="/v1/responses")
    lookup = await service.follow(outcome, busy, tenant=TENANT, session=None)
    assert (outcome.model.name, lookup.state, lookup.reason) == ("general", "moved", "over_max_waiting")


async def test_store_false_is_not_learned(router: Router) -> None:
    service = Conversations(MemoryStore())
    _, lookup = await routed(router, service, responses("hi", store=False), "/v1/responses")
    assert lookup.state == "off" and lookup.ticket is None


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def test_learner_reads_the_id_from_the_first_event_of_a_stream() -> None:
    learner = AnswerLearner(model="m", scope="-", session=None, responses=True, stream=True, ttl_s=60)
    body = sse({"type": "response.created", "response": {"id": "resp_s"}}, {"type": "response.output_text.delta"})
    assert not learner.feed(200, body[:20], False)
    assert learner.feed(0, body[20:], False)  # known before the stream ends
    assert (learner.ok, learner.response_id) == (True, "resp_s")


def test_learner_gives_up_cleanly() -> None:
    learner = AnswerLearner(model="m", scope="-", session=None, responses=True, stream=False, ttl_s=60)
    assert learner.feed(200, b"not json", True) and not learner.ok and learner.why == "no_response_id"
    big = AnswerLearner(model="m", scope="-", session="s:k", responses=True, stream=True, ttl_s=60)
    assert big.feed(200, b"x" * (300 * 1024), False) and big.why == "too_large"
    assert big.ok  # the session key is still learned
    assert Conversations(MemoryStore()).learner("{broken") is None


async def test_memory_store_expires_and_is_bounded() -> None:
    now = [0.0]
    store = MemoryStore(max_entries=2, clock=lambda: now[0])
    await store.put("a", "m1", 10)
    await store.put("b", "m2", 10)
    assert await store.get("a") == "m1"  # a is now the most recent
    await store.put("c", "m3", 10)
    assert await store.get("b") is None and len(store) == 2
    assert store.entries() == 2
    await store.put("d", "m4", 30)
    now[0] = 11.0
    assert store.entries() == 1 and len(store) == 2  # expired: not counted, dropped when touched
    assert await store.get("a") is None


async def test_explained_says_what_a_lookup_would_use(router: Router) -> None:
    follow_up = await router.route(responses("and then?", "resp_1"), path="/v1/responses")
    assert explained(follow_up, router.policy.spec, "redis") == {
        "state": "not_looked_up",
        "reason": "explain has no tenant",
        "key": "previous_response",
        "session_header": "x-session-id",
        "sticky": True,
        "learns": True,
        "ttl_s": 60,
        "store": "redis",
    }
    moved = explained(await router.route(chat("my passport"), path="/v1/chat/completions"), router.policy.spec, None)
    assert moved is not None and (moved["key"], moved["sticky"], moved["learns"], moved["store"]) == (
        None,
        False,
        False,
        None,
    )
    rejected = await router.route(chat("jailbreak"), path="/v1/chat/completions")
    assert explained(rejected, router.policy.spec, "memory") is None


needs_redis = pytest.mark.skipif(
    not redis_available() and os.environ.get("EXTPROC_REQUIRE_REDIS") != "1", reason="redis-server not installed"
)


@needs_redis
async def test_redis_store_round_trip_ttl_and_outage(caplog: pytest.LogCaptureFixture) -> None:
    with running_redis() as url:
        store = RedisStore(url, timeout_s=0.5)
        await store.put("k", "big", 60)
        assert await store.get("k") == "big"
        assert await store.get("missing") is None
        other = RedisStore(url, timeout_s=0.5)  # another replica sees it
        assert await other.get("k") == "big"
        await other.close()
        await store.put("short", "big", 1)
        assert await store.get("short") == "big"
    # redis-server is gone: a new conversation, a counted error and a log line, no exception
    with caplog.at_level("WARNING", logger="extproc.conversations"):
        assert await store.get("k") is None
        await store.put("k", "big", 60)
    assert store.errors["get"] == 1 and store.errors["put"] == 1
    assert store.entries() is None  # a shared Redis is not counted
    assert any("conversation store unreachable" in r.getMessage() for r in caplog.records)
    await store.close()


@needs_redis
async def test_redis_down_routes_as_new(router: Router) -> None:
    store = RedisStore("redis://127.0.0.1:1/0", timeout_s=0.05)  # nothing listens there
    service = Conversations(store)
    outcome, lookup = await routed(router, service, responses("hi", "resp_x"), "/v1/responses")
    assert outcome.action == "route" and outcome.model.name == "general"
    assert (lookup.state, lookup.reason) == ("new", "store_error")
    await store.close()
