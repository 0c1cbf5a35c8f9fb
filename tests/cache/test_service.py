"""Lookup and store over a real Router and the real MiniLM: hits, misses, tenants, controls, TTL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extproc.cache.backends import MemoryCache
from extproc.cache.service import SemanticCache, policy_caches
from extproc.models.text_embedder import TextEmbedder, load_text_embedder
from extproc.router import Router
from extproc.settings import CacheSettings, EmbedderSettings

POLICY = """
cache: {enabled: false, similarity: 0.9, ttl_s: 60}
signals:
  - {name: banned, type: keyword, keywords: [forbidden]}
  - {name: private, type: keyword, keywords: [passport]}
  - {name: long, type: keyword, keywords: [essay]}
decisions:
  - {name: block, priority: 30, when: {signal: banned}, action: {type: reject, message: blocked}}
  - {name: restricted, priority: 20, when: {signal: private}, fail_safe: true, action: {type: route, models: [big-text]}}
  - {name: writing, priority: 10, when: {signal: long}, action: {type: route, models: [big-text]}}
default: {name: general, action: {type: route, models: [text-model]}, cache: {enabled: true}}
"""


@pytest.fixture(scope="module")
def minilm() -> TextEmbedder:
    return load_text_embedder(EmbedderSettings())


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def setup(make_router: Callable[..., Router], minilm: TextEmbedder, clock: Clock) -> Iterator[tuple[Router, SemanticCache]]:
    router = make_router(POLICY)
    # admission: first, so that these tests of lookup and store never depend on how busy this
    # thread (which runs MiniLM inline here) happens to be; adaptive admission has tests below.
    cache = SemanticCache(CacheSettings(admission="first"), MemoryCache(1000, 10_000_000), minilm, clock=clock)
    yield router, cache
    cache.close()


def chat(text: str, *, stream: bool = False, system: str | None = None) -> bytes:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
    return json.dumps({"model": "auto", "messages": messages, "stream": stream}).encode()


def answer(content: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-up",
            "model": "text-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"completion_tokens": 7},
        }
    ).encode()


ALICE = {"authorization": "Bearer alice"}
BOB = {"authorization": "Bearer bob"}


async def ask(router: Router, cache: SemanticCache, body: bytes, tenant: dict[str, str] = ALICE, cache_control: str = "") -> Any:
    outcome = await router.route(body)
    return await cache.lookup(outcome, router.policy.spec, tenant=tenant, cache_control=cache_control)


async def ask_and_answer(router: Router, cache: SemanticCache, body: bytes, content: str, tenant: dict[str, str] = ALICE) -> Any:
    lookup = await ask(router, cache, body, tenant)
    assert lookup.state == "miss" and lookup.ticket is not None
    assert await cache.store(lookup.ticket, 200, "application/json", answer(content)) == "stored"
    return lookup


async def test_miss_then_exact_hit_serves_the_upstreams_answer(setup: tuple[Router, SemanticCache]) -> None:
    router, cache = setup
    await ask_and_answer(router, cache, chat("What is the capital of France?"), "Paris.")
    hit = await ask(router, cache, chat("what is the capital of  France?"))
    assert hit.state == "hit" and hit.reason == "exact" and hit.similarity == 1.0
    assert json.loads(hit.body)["choices"][0]["message"]["content"] == "Paris."
    assert hit.content_type == "application/json" and hit.completion_tokens == 7
    streamed = await ask(router, cache, chat("What is the capital of France?", stream=True))
    assert streamed.state == "hit" and streamed.content_type == "text/event-stream"
    assert b"Paris." in streamed.body and streamed.body.endswith(b"data: [DONE]\n\n")
    assert cache.counters.tokens_saved == 14


async def test_paraphrase_hits_semantically_and_an_unrelated_question_misses(setup: tuple[Router, SemanticCache]) -> None:
    router, cache = setup
    await ask_and_answer(router, cache, chat("What is the capital of France?"), "Paris.")
    hit = await ask(router, cache, chat("What's the capital city of France?"))
    assert hit.state == "hit" and hit.reason == "semantic" and 0.9 <= hit.similarity < 1.0
    assert (await ask(router, cache, chat("What is the capital of Germany?"))).state == "miss"
    assert (await ask(router, cache, chat("How do I sort a list in Python?"))).state == "miss"


async def test_the_rest_of_the_conversation_must_match(setup: tuple[Router, SemanticCache]) -> None:
    router, cache = setup
    await ask_and_answer(router, cache, chat("Summarise our plan.", system="You are a pirate."), "Arr.")
    assert (await ask(router, cache, chat("Summarise our plan.", system="You are a lawyer."))).state == "miss"
    assert (await ask(router, cache, chat("Summarise our plan."))).state == "miss"


async def test_one_tenant_never_gets_anothers_answer(setup: tuple[Router, SemanticCache]) -> None:
    router, cache = setup
    await ask_and_answer(router, cache, chat("What is my account balance?"), "Alice has 100.", tenant=ALICE)
    bob = await ask(router, cache, chat("What is my account balance?"), tenant=BOB)
    assert bob.state == "miss"
    no_tenant = await ask(router, cache, chat("What is my account balance?"), tenant={})
    assert (no_tenant.state, no_tenant.reason, no_tenant.ticket) == ("bypass", "no_tenant", None)


async def test_concurrent_stores_from_many_tenants_stay_apart(setup: tuple[Router, SemanticCache]) -> None:
    router, cache = setup
    tenants = [{"authorization": f"Bearer t{i}"} for i in range(6)]
    question = chat("What is the secret word?")
    lookups = await asyncio.gather(*(ask(router, cache, question, t) for t in tenants))
    await asyncio.gather(
        *(cache.store(lk.ticket, 200, "application/json", answer(f"word of t{i}")) for i, lk in enumerate(lookups))
    )
    hits = await asyncio.gather(*(ask(router, cache, question, t) for t in tenants))
    for i, hit in enumerate(hits):
        assert hit.state == "hit"
        assert json.loads(hit.body)["choices"][0]["message"]["content"] == f"word of t{i}"


async def test_cache_control_no_cache_skips_the_lookup_and_no_store_the_write(setup: tuple[Router, SemanticCache]) -> None:
    router, cache = setup
    await ask_and_answer(router, cache, chat("Name a prime number."), "7.")
    fresh = await ask(router, cache, chat("Name a prime number."), cache_control="no-cache")
    assert (fresh.state, fresh.reason) == ("bypass", "no-cache") and fresh.ticket is not None
    unstored = await ask(router, cache, chat("Name an even number."), cache_control="no-store, max-age=0")
    assert unstored.state == "miss" and unstored.ticket is None
    both = await ask(router, cache, chat("Name a prime number."), cache_control="No-Cache, No-Store")
    assert both.state == "bypass" and both.ticket is None


async def test_entries_expire_after_their_ttl(setup: tuple[Router, SemanticCache], clock: Clock) -> None:
    router, cache = setup
    await ask_and_answer(router, cache, chat("Tell me a fact."), "Water is wet.")
    clock.now += 59
    assert (await ask(router, cache, chat("Tell me a fact."))).state == "hit"
    clock.now += 2
    assert (await ask(router, cache, chat("Tell me a fact."))).state == "miss"


async def test_decisions_without_cache_rejects_and_restricted_handling_are_off(setup: tuple[Router, SemanticCache]) -> None:
    router, cache = setup
    for text in ("this is forbidden", "my passport number is X1234567", "write an essay on rain"):
        lookup = await ask(router, cache, chat(text))
        assert lookup.state == "off" and lookup.ticket is None, text
    assert policy_caches(router.policy.spec)


async def test_only_complete_answers_are_stored(setup: tuple[Router, SemanticCache]) -> None:
    router, cache = setup
    lookup = await ask(router, cache, chat("Count to three."))
    cut = json.dumps({"choices": [{"index": 0, "message": {"content": "1, 2"}, "finish_reason": "length"}]}).encode()
    assert await cache.store(lookup.ticket, 200, "application/json", cut) == "finish_reason"
    assert await cache.store(lookup.ticket, 503, "application/json", answer("x")) == "status"
    assert await cache.store("{not a ticket", 200, "application/json", answer("x")) == "bad_ticket"
    assert (await ask(router, cache, chat("Count to three."))).state == "miss"
    assert cache.counters.stores["finish_reason"] == 1


def test_check_refuses_a_cache_on_decisions_that_do_not_route(policy_errors: Callable[..., list[str]]) -> None:
    errors = policy_errors(
        """
        decisions:
          - {name: block, priority: 1, when: {signal: x}, action: {type: reject, message: blocked}, cache: {enabled: true}}
        signals:
          - {name: x, type: keyword, keywords: [x]}
        default: {name: general, action: {type: route, models: [text-model]}}
        """
    )
    assert any("only routed answers can be cached" in e for e in errors), errors
    assert any("similarity" in e for e in policy_errors(
        """
        cache: {similarity: 1.5}
        default: {name: general, action: {type: route, models: [text-model]}}
        """
    ))


async def test_explain_shows_the_decisions_cache_rule(setup: tuple[Router, SemanticCache]) -> None:
    from extproc.cache.service import explained

    router, _ = setup
    outcome = await router.route(chat("hello"))
    assert explained(outcome, router.policy.spec) == {
        "state": "not_looked_up", "reason": "explain has no tenant", "similarity": 0.9, "ttl_s": 60, "shared": False
    }
    assert explained(await router.route(chat("write an essay")), router.policy.spec) is None


async def test_admission_repeat_stores_only_what_was_asked_before(
    make_router: Callable[..., Router], minilm: TextEmbedder, clock: Clock
) -> None:
    router = make_router(POLICY)
    settings = CacheSettings(admission="repeat", admission_window=3)
    cache = SemanticCache(settings, MemoryCache(1000, 10_000_000), minilm, clock=clock)
    try:
        first = await ask(router, cache, chat("What is the capital of France?"))
        assert (first.state, first.reason, first.ticket) == ("miss", "first_sight", None)  # no store phase
        # The same request again is admitted; once stored, the third is a hit.
        await ask_and_answer(router, cache, chat("what is the capital of  France?"), "Paris.")
        assert (await ask(router, cache, chat("What is the capital of France?"))).state == "hit"
        # A paraphrase of a first sighting is admitted too (the candidate stage is enough) ...
        assert (await ask(router, cache, chat("How tall is the Eiffel Tower?"))).ticket is None
        assert (await ask(router, cache, chat("How tall is the Eiffel Tower exactly?"))).ticket is not None
        # ... but not another tenant's sighting, nor an unrelated question.
        assert (await ask(router, cache, chat("How do I sort a list in Python?"), tenant=BOB)).ticket is None
        assert (await ask(router, cache, chat("How do I sort a list in Python?"))).ticket is None
        # The window is bounded: the oldest sightings are forgotten.
        for text in ("Who painted the Mona Lisa?", "Best soil for tomatoes?", "Explain TCP slow start", "Recipe for pancakes"):
            assert (await ask(router, cache, chat(text))).reason == "first_sight"
        assert cache.sightings is not None and len(cache.sightings) == 3
        assert (await ask(router, cache, chat("How do I sort a list in Python?"))).ticket is None
        assert cache.counters.lookups[("miss", "first_sight")] >= 5
    finally:
        cache.close()


async def test_admission_first_stores_every_miss(setup: tuple[Router, SemanticCache]) -> None:
    router, cache = setup
    assert cache.settings.admission == "first" and cache.sightings is None and cache.load is None
    assert (await ask(router, cache, chat("A question asked exactly once"))).ticket is not None


class FakeLoad:
    """Stands in for ServerLoad: the share the test says."""

    def __init__(self, share: float) -> None:
        self.share = share

    def read(self) -> float:
        return self.share


async def test_admission_adaptive_is_the_default_first_when_idle_repeat_when_busy(
    make_router: Callable[..., Router], minilm: TextEmbedder, clock: Clock
) -> None:
    assert CacheSettings().admission == "adaptive" and CacheSettings().admission_busy == 0.8
    router = make_router(POLICY)
    cache = SemanticCache(CacheSettings(), MemoryCache(1000, 10_000_000), minilm, clock=clock)
    load = FakeLoad(0.1)
    cache.load = load  # type: ignore[assignment]
    try:
        # Headroom: a question asked once is stored, and the second ask hits.
        await ask_and_answer(router, cache, chat("What is the capital of France?"), "Paris.")
        assert (await ask(router, cache, chat("What is the capital of France?"))).state == "hit"
        # Busy: a first sighting gets no ticket (no store phase) ...
        load.share = 0.8
        first = await ask(router, cache, chat("How do I sort a list in Python?"))
        assert (first.state, first.reason, first.ticket) == ("miss", "first_sight", None)
        # ... the second ask, still busy, is admitted, and the third is a hit.
        await ask_and_answer(router, cache, chat("How do I sort a list in Python?"), "sorted(xs)")
        assert (await ask(router, cache, chat("How do I sort a list in Python?"))).state == "hit"
        # Back to headroom: every miss is stored again.
        load.share = 0.79
        assert (await ask(router, cache, chat("Who painted the Mona Lisa?"))).ticket is not None
        assert cache.counters.lookups[("miss", "first_sight")] == 1
    finally:
        cache.close()


async def test_metrics_count_first_sightings_and_show_the_load_adaptive_admission_reads(
    make_router: Callable[..., Router], minilm: TextEmbedder, clock: Clock
) -> None:
    from extproc.observability.metrics import SemanticCacheMetrics

    def samples(metrics: SemanticCacheMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value for family in metrics.collect() for s in family.samples
        }

    router = make_router(POLICY)
    adaptive = SemanticCache(CacheSettings(), MemoryCache(1000, 10_000_000), minilm, clock=clock)
    first = SemanticCache(CacheSettings(admission="first"), MemoryCache(1000, 10_000_000), minilm, clock=clock)
    try:
        adaptive.load = FakeLoad(0.9)  # type: ignore[assignment]
        await ask(router, adaptive, chat("Name a prime number."))
        found = samples(SemanticCacheMetrics(adaptive))
        assert found[("vsr_semantic_cache_admission_load", ())] == 0.9
        assert found[("vsr_semantic_cache_lookups_total", (("outcome", "miss"), ("reason", "first_sight")))] == 1
        assert not any(name == "vsr_semantic_cache_admission_load" for name, _ in samples(SemanticCacheMetrics(first)))
    finally:
        adaptive.close()
        first.close()
