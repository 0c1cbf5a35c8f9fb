"""Conversations keep their model: a follow-up goes to the model that holds the conversation.

Two keys name a conversation, both scoped by the tenant (a hash of the request's tenant headers,
as the semantic cache keys its partitions) and stored hashed:

- a Responses request's `previous_response_id`: the state (the earlier turns) lives on the
  server that produced that response, so the follow-up must go there;
- a session header the policy names (`conversations.session_header`, e.g. `x-session-id`), for
  any API: a client's way to keep one conversation on one model (prefix caches, consistency).

`follow` runs after the decision: the safety decisions have had their say (a reject or a
clarification is never overridden; `sticky: false` on a decision, the restricted route for
identity documents in the default policy, moves the conversation to the decision's model; a
fail-safe route under overload is never overridden). Otherwise, when the remembered model can
take the request (modalities, context window), the request goes there.

The mapping is learned from the answer, not from the decision: the store phase (Envoy's
`vsr.cache_store` filter, observability mode) streams the upstream's answer here; on a 200, the
session key and the answer's response id (a Responses answer's `id`, JSON or the first SSE event)
are written with the model that served it, with the policy's TTL.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from extproc.conversations.store import ConversationStore
from extproc.protocol import sse
from extproc.protocol.formats import format_for

if TYPE_CHECKING:
    from extproc.outcome import RoutingOutcome
    from extproc.policy.schema import ModelSpec, Policy

log = logging.getLogger("extproc.conversations")

State = Literal["off", "new", "followed", "same", "moved"]
MAX_LEARN_BYTES = 256 * 1024  # an answer's id is in its first bytes; past this, give up


@dataclass(slots=True)
class ConversationLookup:
    state: State
    reason: str = ""
    key: str = ""  # previous_response / session: which key found it
    remembered: str | None = None  # the model the store remembered
    ticket: str | None = None  # what the store phase learns from the answer
    lookup_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "reason": self.reason or None,
            "key": self.key or None,
            "remembered_model": self.remembered,
            "learns": self.ticket is not None,
            "lookup_ms": round(self.lookup_ms, 3),
        }


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def tenant_scope(tenant: Mapping[str, str]) -> str:
    """The tenant part of every key: a hash of the tenant headers' values ("-" without any)."""
    if not any(tenant.values()):
        return "-"
    return _digest("\n".join(f"{k}={v}" for k, v in sorted(tenant.items())))


def response_key(scope: str, response_id: str) -> str:
    return f"r:{scope}:{_digest(response_id)}"


def session_key(scope: str, session: str) -> str:
    return f"s:{scope}:{_digest(session)}"


@dataclass(slots=True)
class ConversationCounters:
    lookups: Counter[tuple[str, str]] = field(default_factory=Counter)  # (state, reason)
    learned: Counter[str] = field(default_factory=Counter)  # session / response / why not


class Conversations:
    """The conversation service: `follow` at the decision, `learn` from the answer."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self.counters = ConversationCounters()
        self.on_lookup: Callable[[str, float], None] | None = None  # (state, seconds), for metrics
        # Why the remembered model should not keep the conversation now (the fleet: down, over its
        # max_waiting); None: it may. Set by the server when model selection's fleet runs.
        self.unavailable: Callable[[ModelSpec], str | None] | None = None

    async def follow(
        self, outcome: RoutingOutcome, policy: Policy, *, tenant: Mapping[str, str], session: str | None
    ) -> ConversationLookup:
        started = time.perf_counter()
        result = await self._follow(outcome, policy, tenant, session)
        result.lookup_ms = (time.perf_counter() - started) * 1000.0
        self.counters.lookups[(result.state, result.reason)] += 1
        if self.on_lookup is not None and result.state != "off":
            self.on_lookup(result.state, time.perf_counter() - started)
        return result

    async def _follow(
        self, outcome: RoutingOutcome, policy: Policy, tenant: Mapping[str, str], session: str | None
    ) -> ConversationLookup:
        spec = policy.conversations
        request = outcome.request
        if not spec.enabled or outcome.action != "route" or request is None or outcome.model is None:
            return ConversationLookup("off")
        session = session if spec.session_header and session else None
        scope = tenant_scope(tenant)
        keys: list[tuple[str, str]] = []
        api_format = format_for(request.api)
        previous = api_format.previous_response_id(request.raw)
        if previous is not None:
            keys.append(("previous_response", response_key(scope, previous)))
        if session is not None:
            keys.append(("session", session_key(scope, session)))
        learns_responses = api_format.keeps_exchange(request.raw)
        if not keys and not learns_responses:
            return ConversationLookup("off")
        lookup = ConversationLookup("new", "no_key" if not keys else "not_found")
        errors = sum(self.store.errors.values())
        for kind, key in keys:
            remembered = await self.store.get(key)
            if remembered is not None:
                lookup.key, lookup.remembered = kind, remembered
                break
        if sum(self.store.errors.values()) > errors:
            lookup.reason = "store_error"
        if lookup.remembered is not None:
            self._apply(outcome, policy, lookup, self.unavailable)
        model = outcome.model
        if session is not None or learns_responses:
            lookup.ticket = json.dumps(
                {
                    "m": model.name,
                    "p": scope,
                    "s": session_key(scope, session) if session is not None else None,
                    "r": learns_responses,
                    "st": request.stream,
                    "t": spec.ttl_s,
                },
                separators=(",", ":"),
            )
        return lookup

    @staticmethod
    def _apply(
        outcome: RoutingOutcome,
        policy: Policy,
        lookup: ConversationLookup,
        unavailable: Callable[[ModelSpec], str | None] | None = None,
    ) -> None:
        """Route to the remembered model where the decision allows it and the model can take it."""
        chosen = outcome.model
        request = outcome.request
        assert chosen is not None and request is not None and lookup.remembered is not None
        if lookup.remembered == chosen.name:
            lookup.state = "same"
            return
        lookup.state = "moved"
        if not policy.sticky(outcome.decision):
            lookup.reason = "decision_not_sticky"
        elif outcome.result.fail_safe:
            lookup.reason = "fail_safe"
        else:
            model = policy.model(lookup.remembered)
            tokens = request.estimated_tokens() if model is not None and model.context_window else 0
            if model is None:
                lookup.reason = "model_gone"  # the policy no longer has it
            elif request.has_images and not model.accepts("image"):
                lookup.reason = "cannot_take_images"
            elif model.context_window is not None and tokens > model.context_window:
                lookup.reason = "context_window"
            elif unavailable is not None and (why := unavailable(model)) is not None:
                lookup.reason = why  # down or overloaded: the decision's (selected) model takes it
            else:
                outcome.result.model = model
                lookup.state, lookup.reason = "followed", ""
                outcome.result.notes.append(
                    f"conversation: {lookup.key} was served by {model.name!r}; kept there (decision "
                    f"{outcome.decision!r} chose {chosen.name!r})"
                )
                return
        outcome.result.notes.append(
            f"conversation: {lookup.key} was served by {lookup.remembered!r}; moved to {chosen.name!r} "
            f"({lookup.reason})"
        )

    # -- the answer ---------------------------------------------------------------------------

    def learner(self, ticket: str) -> AnswerLearner | None:
        try:
            meta = json.loads(ticket)
            return AnswerLearner(
                model=str(meta["m"]),
                scope=str(meta["p"]),
                session=meta.get("s"),
                responses=bool(meta.get("r")),
                stream=bool(meta.get("st")),
                ttl_s=int(meta["t"]),
            )
        except (ValueError, KeyError, TypeError):
            self.counters.learned["bad_ticket"] += 1
            return None

    async def learn(self, learner: AnswerLearner) -> None:
        """Write what the answer taught (called once the learner is done)."""
        if not learner.ok:
            self.counters.learned[learner.why or "status"] += 1
            return
        errors = sum(self.store.errors.values())
        if learner.session is not None:
            await self.store.put(learner.session, learner.model, learner.ttl_s)
            self.counters.learned["session"] += 1
        if learner.response_id is not None:
            await self.store.put(response_key(learner.scope, learner.response_id), learner.model, learner.ttl_s)
            self.counters.learned["response"] += 1
        elif learner.responses:
            self.counters.learned["no_response_id"] += 1
        if sum(self.store.errors.values()) > errors:
            self.counters.learned["store_error"] += 1

    async def close(self) -> None:
        await self.store.close()


@dataclass(slots=True)
class AnswerLearner:
    """Reads an upstream answer, chunk by chunk, for what a conversation needs: a 200 and, for the
    Responses API, the answer's `id`. `done` once it knows (or knows it never will)."""

    model: str
    scope: str
    session: str | None
    responses: bool
    stream: bool
    ttl_s: int
    status: int = 0
    response_id: str | None = None
    done: bool = False
    ok: bool = False
    why: str = ""
    _body: bytearray = field(default_factory=bytearray)

    def feed(self, status: int, chunk: bytes, end: bool) -> bool:
        """Take the next chunk (status: the upstream's, 0 when unknown); True when done."""
        if self.done:
            return True
        if status and status != 200:
            self.done, self.why = True, "status"
            return True
        if not self.responses:  # a session key needs only the status
            self.done = self.ok = True
            return True
        self._body += chunk
        if self.stream:
            self._from_events(end)
        elif end:
            self._from_json()
        if not self.done and len(self._body) > MAX_LEARN_BYTES:
            self.done, self.ok, self.why = True, self.session is not None, "too_large"
        if end and not self.done:
            self.done, self.ok = True, self.session is not None
        return self.done

    def _from_json(self) -> None:
        try:
            doc = json.loads(bytes(self._body))
        except ValueError:
            doc = None
        identifier = doc.get("id") if isinstance(doc, dict) else None
        self._found(identifier)

    def _from_events(self, end: bool) -> None:
        text = bytes(self._body).decode("utf-8", "replace")
        complete = text if end else text[: max(text.rfind("\n\n"), 0)]
        for _, data in sse.events(complete):
            try:
                doc = json.loads(data)
            except ValueError:
                continue
            response = doc.get("response") if isinstance(doc, dict) else None
            if isinstance(response, dict) and isinstance(response.get("id"), str):
                self._found(response["id"])
                return

    def _found(self, identifier: object) -> None:
        self.done = True
        if isinstance(identifier, str) and identifier:
            self.response_id, self.ok = identifier, True
        else:
            self.ok, self.why = self.session is not None, "no_response_id"
        self._body = bytearray()


def store_backend(settings: Any) -> str | None:
    """The store the settings' `conversations` section names (None: conversations off)."""
    conf = settings.conversations
    return str(conf.backend) if conf.enabled else None


def explained(outcome: RoutingOutcome, policy: Policy, store: str | None) -> dict[str, Any] | None:
    """The conversation part for `explain`: which keys the request carries, whether the decision
    keeps a conversation on its model, and the server's store (`store_backend`; None: off); no
    lookup (explain has no tenant, nor the client's headers, so no session key). None when the
    policy keeps no conversations or the request is not routed."""
    spec = policy.conversations
    request = outcome.request
    if not spec.enabled or outcome.action != "route" or request is None:
        return None
    api_format = format_for(request.api)
    return {
        "state": "not_looked_up",
        "reason": "explain has no tenant",
        "key": "previous_response" if api_format.previous_response_id(request.raw) is not None else None,
        "session_header": spec.session_header,
        "sticky": policy.sticky(outcome.decision),
        "learns": api_format.keeps_exchange(request.raw),
        "ttl_s": spec.ttl_s,
        "store": store,
    }


def build_conversations(settings: Any) -> Conversations | None:
    """The service for the settings' `conversations` section (None when off)."""
    conf = settings.conversations
    if store_backend(settings) is None:
        return None
    store: ConversationStore
    if conf.backend == "redis":
        from extproc.conversations.store import RedisStore

        store = RedisStore(conf.redis_url, timeout_s=conf.timeout_ms / 1000.0)
    else:
        from extproc.conversations.store import MemoryStore

        store = MemoryStore(conf.max_entries)
    log.info("conversation store", extra={"store": store.name})
    return Conversations(store)
