"""Lookup and store, as the ext_proc servicer uses them.

**Lookup** (request phase, after the policy routed the request): the decision's cache rule
(`Policy.cache_for`), the tenant partition, then the exact key; on an exact miss, the semantic
stage: the candidate vectors of entries with the same partition and context (cheap, and nothing
at all when the context has no entries), and MiniLM verification of at most `candidates` of
them that pass `similarity - candidate_margin`. A hit needs MiniLM cosine >= the rule's
similarity. A miss that may be stored hands out a *ticket* (JSON, carried by Envoy as `vsr`
dynamic metadata to the store phase): what the answer is to be stored as.

**Store** (response phase, from Envoy's observability-mode store filter): the ticket, the
upstream's status, content type and body; a complete answer (see `answers`) is embedded and
written. Only this server writes tickets (Envoy accepts the `vsr` namespace from ext_proc
only), so the only way to write an entry is to get an answer from an upstream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from extproc.cache.admission import ServerLoad, Sightings
from extproc.cache.backends import CacheBackend, CacheEntry, FloatArray, MemoryCache
from extproc.cache.embedding import StaticEmbedder
from extproc.cache.keys import CacheKey, cache_key, semantically_compatible, tenant_partition
from extproc.cache.stored_answers import NotStorable, StoredAnswer, hit_body, storable_answer
from extproc.protocol.request import ApiKind

if TYPE_CHECKING:
    from extproc.models.executor import HeavyExecutor
    from extproc.models.text_embedder import TextEmbedder
    from extproc.outcome import RoutingOutcome
    from extproc.policy.schema import Policy
    from extproc.router import Router
    from extproc.settings import CacheSettings, Settings

log = logging.getLogger("extproc.cache")
T = TypeVar("T")

State = Literal["hit", "miss", "bypass", "off"]


@dataclass(slots=True)
class CacheLookup:
    """The cache's part in one request: `state` hit/miss/bypass (the client sees it in
    `x-vsr-cache`) or off (the decision does not cache; no header)."""

    state: State
    reason: str = ""  # exact / semantic on a hit; why on a bypass or an unstored miss
    similarity: float | None = None
    ticket: str | None = None  # a miss to be stored: what the store phase needs
    body: bytes = b""
    content_type: str = ""
    completion_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "reason": self.reason or None,
            "similarity": round(self.similarity, 4) if self.similarity is not None else None,
            "store": self.ticket is not None,
        }


@dataclass(slots=True)
class CacheCounters:
    lookups: Counter[tuple[str, str]] = field(default_factory=Counter)  # by (state, reason)
    stores: Counter[str] = field(default_factory=Counter)  # by result (stored, or why not)
    evictions: int = 0
    tokens_saved: int = 0


def cache_control_flags(value: str) -> frozenset[str]:
    return frozenset(part.strip().split("=", 1)[0].lower() for part in value.split(",") if part.strip())


class SemanticCache:
    def __init__(
        self,
        settings: CacheSettings,
        backend: CacheBackend,
        embedder: TextEmbedder,
        executor: HeavyExecutor | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.embedder = embedder
        self.static = StaticEmbedder(embedder)
        self.executor = executor
        self.clock = clock
        self.counters = CacheCounters()
        self.sightings = Sightings(settings.admission_window) if settings.admission != "first" else None
        self.load = ServerLoad() if settings.admission == "adaptive" else None
        self.on_lookup: Callable[[str, float], None] | None = None  # (state, seconds), for metrics

    # -- request phase --------------------------------------------------------------------
    async def lookup(
        self, outcome: RoutingOutcome, policy: Policy, *, tenant: Mapping[str, str], cache_control: str = ""
    ) -> CacheLookup:
        started = time.perf_counter()
        result = await self._lookup(outcome, policy, tenant, cache_control)
        self.counters.lookups[(result.state, result.reason)] += 1
        if result.state == "hit":
            self.counters.tokens_saved += result.completion_tokens
        if self.on_lookup is not None and result.state != "off":
            self.on_lookup(result.state, time.perf_counter() - started)
        return result

    async def _lookup(
        self, outcome: RoutingOutcome, policy: Policy, tenant: Mapping[str, str], cache_control: str
    ) -> CacheLookup:
        rule = policy.cache_for(outcome.decision) if outcome.action == "route" else None
        if rule is None or outcome.request is None or outcome.model is None:
            return CacheLookup("off")
        flags = cache_control_flags(cache_control)
        partition = tenant_partition(dict(tenant), shared=rule.shared)
        if partition is None:
            return CacheLookup("bypass", "no_tenant")
        key = cache_key(outcome.request, outcome.model.name, partition)
        if key is None:
            return CacheLookup("bypass", "not_cacheable")
        store = "no-store" not in flags
        ticket = self._ticket(key, outcome.request.api, rule.ttl_s, outcome.request.stream) if store else None
        if "no-cache" in flags:
            return CacheLookup("bypass", "no-cache", ticket=ticket)
        now = self.clock()
        try:
            entry = await self._call(self.backend.get, partition, key.exact, now)
            similarity, reason = 1.0, "exact"
            if entry is None:
                (entry, similarity), reason = await self._semantic(key, rule.similarity, now), "semantic"
        except Exception:  # a store that fails must never fail the request
            log.exception("cache lookup failed")
            return CacheLookup("miss", "backend_error", ticket=ticket)
        if entry is None:
            if ticket is not None and not self._admitted(key, rule.similarity):
                return CacheLookup("miss", "first_sight")
            return CacheLookup("miss", "" if store else "no-store", ticket=ticket)
        body, content_type = hit_body(outcome.request.api, entry.answer, stream=outcome.request.stream)
        return CacheLookup(
            "hit",
            reason,
            similarity=similarity,
            body=body,
            content_type=content_type,
            completion_tokens=entry.answer.completion_tokens,
        )

    async def _semantic(self, key: CacheKey, similarity: float, now: float) -> tuple[CacheEntry | None, float]:
        if not self.backend.may_have(key.partition, key.context):  # most misses end here, for free
            return None, 0.0
        candidate = self.static.embed(key.query)
        found = await self._call(
            self.backend.candidates, key.partition, key.context, candidate, self.settings.candidates, now
        )
        floor = similarity - self.settings.candidate_margin
        found = [(e, score) for e, score in found if score >= floor and semantically_compatible(key.query, e.query)]
        if not found:
            return None, 0.0
        # MiniLM verifies: the query and the candidates' queries in one batch (the embedder keeps
        # recent texts, so a popular entry's query is embedded once).
        vectors = await self._embed_many([key.query, *(e.query for e, _ in found)])
        best: tuple[CacheEntry | None, float] = (None, 0.0)
        for (entry, _), vector in zip(found, vectors[1:], strict=True):
            score = float(np.dot(vector, vectors[0]))
            if score >= similarity and score > best[1]:
                best = (entry, score)
        return best

    def _admitted(self, key: CacheKey, similarity: float) -> bool:
        """Whether a miss is to be stored: always under `admission: first`, and under
        `adaptive` while the server has headroom (`ServerLoad`); otherwise only what was seen before."""
        if self.sightings is None:
            return True
        if self.load is not None and self.load.read() < self.settings.admission_busy:
            return True
        floor = similarity - self.settings.candidate_margin
        return self.sightings.seen_before(key, self.static.embed(key.query), floor)

    async def _embed_many(self, texts: list[str]) -> FloatArray:
        if self.executor is not None:
            return await self.executor.run(self.embedder.embed, texts)
        return self.embedder.embed(texts)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self.backend.blocking:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    @staticmethod
    def _ticket(key: CacheKey, api: ApiKind, ttl_s: int, stream: bool) -> str:
        # "s": the request streams, so its answer is SSE (the one-message store phase gets the
        # status from Envoy but no headers, the content type included)
        return json.dumps(
            {
                "p": key.partition,
                "c": key.context,
                "k": key.exact,
                "q": key.query,
                "a": api.value,
                "t": ttl_s,
                "s": stream,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )

    # -- response phase -------------------------------------------------------------------
    async def store(self, ticket: str, status: int, content_type: str, body: bytes) -> str:
        """Store the upstream's answer under the ticket; returns `stored` or why not."""
        result = await self._store(ticket, status, content_type, body)
        self.counters.stores[result] += 1
        return result

    async def _store(self, ticket: str, status: int, content_type: str, body: bytes) -> str:
        try:
            meta = json.loads(ticket)
            api = ApiKind(meta["a"])
            key = CacheKey(partition=meta["p"], context=meta["c"], exact=meta["k"], query=meta["q"])
            ttl_s = int(meta["t"])
            streamed = bool(meta.get("s", False))
        except (ValueError, KeyError, TypeError):
            return "bad_ticket"
        if not content_type:  # the one-message store phase: no response headers
            content_type = "text/event-stream" if streamed else "application/json"
        if len(body) > self.settings.max_entry_bytes:
            return "too_large"
        try:
            answer: StoredAnswer = storable_answer(api, status, content_type, body)
        except NotStorable as why:
            return str(why)
        now = self.clock()
        entry = CacheEntry(
            partition=key.partition,
            context=key.context,
            exact=key.exact,
            query=key.query,
            candidate=self.static.embed(key.query),  # MiniLM only when a later lookup verifies it
            answer=answer,
            expires_at=now + ttl_s,
        )
        try:
            self.counters.evictions += await self._call(self.backend.put, entry, now)
        except ValueError as exc:
            log.info("cache store refused: %s", exc)
            return "too_large"
        except Exception:
            log.exception("cache store failed")
            return "backend_error"
        return "stored"

    def close(self) -> None:
        self.backend.close()


def build_backend(settings: CacheSettings, dim: int) -> CacheBackend:
    if settings.backend == "milvus":
        from extproc.cache.milvus import MilvusCache

        return MilvusCache(
            settings.milvus_uri, dim=dim, collection=settings.milvus_collection, token=settings.milvus_token
        )
    return MemoryCache(settings.max_entries, settings.max_bytes)


def explained(outcome: RoutingOutcome, policy: Policy) -> dict[str, Any] | None:
    """The cache's part for `explain`: the decision's rule; no lookup (explain has no tenant)."""
    rule = policy.cache_for(outcome.decision) if outcome.action == "route" else None
    if rule is None:
        return None
    return {
        "state": "not_looked_up",
        "reason": "explain has no tenant",
        "similarity": rule.similarity,
        "ttl_s": rule.ttl_s,
        "shared": rule.shared,
    }


def policy_caches(policy: Policy) -> bool:
    """Whether any decision of the policy caches its answers."""
    return any(
        policy.cache_for(name) is not None for name in [*(d.name for d in policy.decisions), policy.default.name]
    )


def build_semantic_cache(settings: Settings, router: Router) -> SemanticCache | None:
    """The cache for a loaded router, or None (settings turn it off, the policy caches nothing,
    or there is no MiniLM to embed with: said in the log)."""
    from extproc.models.registry import ModelUnavailable
    from extproc.models.text_embedder import get_text_embedder

    if not settings.cache.enabled or not policy_caches(router.policy.spec):
        return None
    try:
        embedder = get_text_embedder(router.models, settings.embedder)
    except ModelUnavailable as exc:
        log.warning("semantic cache off: no text embedder", extra={"error": str(exc)})
        return None
    backend = build_backend(settings.cache, embedder.dim)
    log.info("semantic cache on", extra={"backend": backend.name})
    return SemanticCache(settings.cache, backend, embedder, router.executor)
