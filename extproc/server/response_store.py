"""The store phase: the upstream's answer, kept for the semantic cache and the conversation store.

On routes whose decision metadata says `observe`, a second ext_proc filter in observability mode
streams the upstream's response body here (the first chunk with the status as an attribute; older
configs send the response headers first) without waiting for answers: we answer nothing,
reassemble the body and store it in the background (`extproc.cache.service`,
`extproc.conversations.service`). The stream can end once neither store wants more of it (else
Envoy holds it open for its deferred-close timeout).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extproc import headers as vsr
from extproc.server import mutations

if TYPE_CHECKING:
    from extproc.cache.service import SemanticCache
    from extproc.conversations.service import AnswerLearner
    from extproc.server.stream_state import Backends


@dataclass(slots=True)
class StoreState:
    """One store-phase stream: the answer so far, for each store that wants it."""

    started: bool = False  # the first message was read
    learner: AnswerLearner | None = None  # what the answer teaches the conversation store
    cache_done: bool = False  # the cache has what it needs (or never will)
    cache_started: bool = False  # the cache read the status and ticket
    ticket: str | None = None  # what the cache stores the answer as
    status: int = 0  # the upstream's
    content_type: str = ""  # lower-cased; "" from attributes (the cache reads it from the ticket)
    body: bytearray = field(default_factory=bytearray)
    fleet_done: bool = True  # the fleet has this answer's status and first-byte time (or wants none)


class ResponseStore:
    """Feeds the store phase's messages to the cache and the conversation store."""

    def __init__(self, backends: Backends) -> None:
        self.backends = backends
        self.pending: set[asyncio.Task[Any]] = set()  # background stores, kept until done

    def observe(self, request: Any, phase: str, store: StoreState) -> bool:
        """One message of the store phase. True when neither store wants more of this stream."""
        if not store.started:
            store.started = True
            store.learner = self._learner_of(request)
            store.fleet_done = self._report_to_fleet(request, phase)
        learned = self._learn(request, phase, store) if store.learner is not None else True
        if not store.cache_done:
            store.cache_done = self._observe_cache(request, phase, store)
        return learned and store.cache_done and store.fleet_done

    def _report_to_fleet(self, request: Any, phase: str) -> bool:
        """The answer's first message: its status and the time since the request was sent go to
        the fleet (latency selection, cooldowns). A 5xx, or no status (Envoy's local reply for a
        connection failure arrives as 503), counts as a failure. On a failover route Envoy also
        says which host answered and after how many attempts (`answered_by`): an answer from the
        fallback is the chosen model's failure and a failover, counted per model."""
        fleet = self.backends.fleet
        if fleet is None:
            return True
        metadata = mutations.metadata_strings(request, vsr.DECISION_NAMESPACE)
        ticket, fallback = metadata.get(vsr.FLEET_KEY), metadata.get(vsr.FLEET_FALLBACK_KEY, "")
        if ticket is None:
            return True
        sent, _, model = ticket.partition(" ")
        try:
            elapsed = max(time.time() - float(sent), 0.0)
        except ValueError:
            return True
        if phase == "response_headers":
            status, _ = mutations.status_and_type(request.response_headers)
        elif phase == "response_body":
            status = mutations.response_status_attribute(request)
        else:
            return True
        failed = status == 0 or status >= 500
        answered = answered_by(self.backends, request, model, fallback) if fallback else model
        if answered == model:
            fleet.observe(model, failed=failed, latency_s=None if failed else elapsed)
            return True
        # The chosen model failed (or Envoy had already ejected it); the fallback answered. Its time
        # includes the failed attempt, so it is no latency sample of the fallback's.
        fleet.observe(model, failed=True, latency_s=None)
        fleet.observe_failover(model, answered)
        fleet.observe(answered, failed=failed, latency_s=None)
        return True

    def _run(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    def _learner_of(self, request: Any) -> AnswerLearner | None:
        conversations = self.backends.conversations
        if conversations is None:
            return None
        ticket = mutations.metadata_strings(request, vsr.DECISION_NAMESPACE).get(vsr.CONVERSATION_KEY)
        return conversations.learner(ticket) if ticket is not None else None

    def _learn(self, request: Any, phase: str, store: StoreState) -> bool:
        learner, conversations = store.learner, self.backends.conversations
        assert learner is not None and conversations is not None
        if phase == "response_headers":
            status, _ = mutations.status_and_type(request.response_headers)
            chunk, end = b"", request.response_headers.end_of_stream
        elif phase == "response_body":
            status = learner.status or mutations.response_status_attribute(request)
            chunk, end = request.response_body.body, request.response_body.end_of_stream
        else:
            return False
        learner.status = learner.status or status
        if not learner.feed(status, chunk, end):
            return False
        store.learner = None
        self._run(conversations.learn(learner))
        return True

    def _observe_cache(self, request: Any, phase: str, store: StoreState) -> bool:
        """The cache's part: collect the answer; store it once it is complete. True when done."""
        cache = self.backends.cache
        if cache is None:
            return True
        if phase == "response_headers":  # configs before the one-message store phase send them
            store.ticket = _ticket_of(request)
            store.status, store.content_type = mutations.status_and_type(request.response_headers)
            store.cache_started = True
            if not _storable(store, cache):
                return True
            end = request.response_headers.end_of_stream
        elif phase == "response_body":
            if not store.cache_started:  # one message: the status comes as an attribute
                store.ticket = _ticket_of(request)
                store.status, store.content_type = mutations.response_status_attribute(request), ""
                store.cache_started = True
                if not _storable(store, cache):
                    return True
            if len(store.body) + len(request.response_body.body) > cache.settings.max_entry_bytes:
                cache.counters.stores["too_large"] += 1
                return True
            store.body += request.response_body.body
            end = request.response_body.end_of_stream
        else:
            return False
        if not end:
            return False
        ticket, store.ticket = store.ticket, None
        if ticket is None:
            return True
        self._run(cache.store(ticket, store.status, store.content_type, bytes(store.body)))
        store.body = bytearray()
        return True


def _ticket_of(request: Any) -> str | None:
    """The store ticket our decision wrote to the `vsr` metadata (the store routes match it)."""
    return mutations.metadata_strings(request, vsr.DECISION_NAMESPACE).get(vsr.TICKET_KEY)


def _storable(store: StoreState, cache: SemanticCache) -> bool:
    """Whether the answer can be stored at all, known from its status (cache.stored_answers stores
    only 200s): if not, the rest of the stream is not needed."""
    if store.ticket is None:
        return False
    if store.status != 200:
        cache.counters.stores["status"] += 1
        return False
    return True


def answered_by(backends: Backends, request: Any, model: str, fallback: str) -> str:
    """Which of a failover route's two models answered, from what Envoy says of the upstream: the
    host's address when it is the policy address of one of them, else the attempt count (a second
    attempt is the retry on the aggregate's next priority, the fallback). Without either: `model`."""
    address = mutations.attribute_text(request, vsr.UPSTREAM_ADDRESS)
    router = backends.router
    if address and router is not None:
        for spec in router.policy.spec.models:
            if spec.name in (model, fallback) and spec.address == address:
                return spec.name
    attempts = mutations.attribute_text(request, vsr.UPSTREAM_ATTEMPTS)
    return fallback if attempts.isdigit() and int(attempts) > 1 else model
