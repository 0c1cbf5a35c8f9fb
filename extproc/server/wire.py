"""The one renderer of a decision onto the wire: the headers Envoy sets on the upstream request,
the headers the client sees, the `vsr` dynamic metadata Envoy's routes read, and the answers the
server gives itself (rejections, clarifications, overload, request errors, the server's own
failures), each in the request's API shape (`extproc.protocol.formats`).

Everything is rendered from the outcome's values in one pass, never from another rendering (the
metadata does not re-read header strings). `mutations` turns the result into Envoy's messages.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from extproc import headers as vsr
from extproc.errors import RequestError
from extproc.protocol.formats import error_body
from extproc.protocol.request import ApiKind
from extproc.protocol.responses import assistant_reply, assistant_reply_stream, dumps

if TYPE_CHECKING:
    from extproc.cache.service import CacheLookup
    from extproc.conversations.service import ConversationLookup
    from extproc.outcome import RoutingOutcome

log = logging.getLogger("extproc.server")

MAX_TRACE_CHARS = 4096
JSON_TYPE = {"content-type": "application/json"}


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer the server gives itself: the upstream is never called."""

    status: int
    headers: dict[str, str]
    body: bytes
    details: str = ""


@dataclass(frozen=True, slots=True)
class Route:
    """A routed request on the wire: upstream headers, the client's, the rewritten body (None at
    the headers phase), the decision as `vsr` metadata; or, when the body cannot be sent in the
    model's format, the `refusal` instead."""

    upstream_headers: dict[str, str]
    client_headers: dict[str, str]
    body: bytes | None = None
    metadata: dict[str, object] | None = None
    refusal: Answer | None = None


def upstream_headers(outcome: RoutingOutcome) -> dict[str, str]:
    """Headers set (overwritten) on the request Envoy forwards: routing plus plugin headers."""
    headers = {k.lower(): v for k, v in outcome.plugins.set_headers.items()}
    if outcome.decision is not None:
        headers[vsr.DECISION] = outcome.decision
    if outcome.model is not None:
        headers[vsr.CLUSTER] = outcome.cluster or outcome.model.cluster
        headers[vsr.MODEL] = outcome.model.name
    if (reasoning := outcome.reasoning) is not None:
        headers[vsr.REASONING] = reasoning
    return headers


def client_headers(outcome: RoutingOutcome, trace: str | None = None) -> dict[str, str]:
    """Headers the client sees: why its request went where it went (never the cluster); the
    compact trace when the client asked for it."""
    headers = {
        vsr.DECISION: outcome.decision or "none",
        vsr.MODEL: outcome.model.name if outcome.model is not None else "none",
        vsr.SIGNALS: _signals(outcome),
    }
    if (reasoning := outcome.reasoning) is not None:
        headers[vsr.REASONING] = reasoning
    if (selection := outcome.selection_header) is not None:
        headers[vsr.SELECTION] = selection
    if (unknown := outcome.unknown_model_header) is not None:
        headers[vsr.UNKNOWN_MODEL] = unknown
    if trace is not None:
        headers[vsr.TRACE] = trace
    return headers


def _signals(outcome: RoutingOutcome) -> str:
    return ",".join(outcome.matched_signals()) or "none"


def trace_of(outcome: RoutingOutcome, debug: bool) -> str | None:
    """The x-vsr-trace value when the client asked for one (None otherwise); never breaks routing."""
    if not debug:
        return None
    try:
        text = outcome.trace_header()
    except Exception:
        log.exception("trace_header failed")
        return "unavailable"
    return text if len(text) <= MAX_TRACE_CHARS else text[: MAX_TRACE_CHARS - 3] + "..."


def route(
    outcome: RoutingOutcome,
    *,
    debug: bool,
    tool_rules: bool,
    lookup: CacheLookup | None = None,
    conversation: ConversationLookup | None = None,
    at_headers: bool = False,
) -> Route:
    """A routed request rendered: its headers, then (one message flow) the body rewritten for the
    model and the decision's metadata, which reads what the rewrite settled (the reasoning sent)."""
    trace = trace_of(outcome, debug)
    upstream = upstream_headers(outcome)
    client = client_headers(outcome, trace)
    if at_headers:
        return Route(upstream, client)
    try:
        body = outcome.rewritten_body()
    except RequestError as exc:  # a Messages feature with no Chat form, for an OpenAI-only model
        refusal = error_answer(outcome.api, exc.status, exc.message, code=exc.code, headers=client)
        return Route(upstream, client, refusal=refusal)
    metadata = decision_metadata(outcome, trace, tool_rules=tool_rules, lookup=lookup, conversation=conversation)
    return Route(upstream, client, body, metadata)


def decision_metadata(
    outcome: RoutingOutcome,
    trace: str | None,
    *,
    tool_rules: bool,
    lookup: CacheLookup | None,
    conversation: ConversationLookup | None,
) -> dict[str, object]:
    """The decision for Envoy's routes (one-message flow): they match `cluster` and echo the rest;
    `respond` and `observe` turn on the response phases (tool rules, the store phase)."""
    model = outcome.model
    metadata: dict[str, object] = {
        vsr.CLUSTER_KEY: outcome.cluster or "",
        vsr.DECISION_KEY: outcome.decision or "none",
        vsr.MODEL_KEY: model.name if model is not None else "none",
        vsr.SIGNALS_KEY: _signals(outcome),
    }
    if trace is not None:
        metadata[vsr.TRACE_KEY] = trace
    if outcome.plugins.set_headers:
        metadata[vsr.HEADERS_KEY] = dict(outcome.plugins.set_headers)
    if outcome.reasoning is not None:
        metadata[vsr.REASONING_KEY] = outcome.reasoning
    request = outcome.request
    if request is not None and (request.tools or request.stores) and tool_rules:
        metadata[vsr.RESPOND_KEY] = "stream" if request.stream else "json"
        metadata[vsr.API_KEY] = request.api.value
        if request.stores:
            metadata[vsr.STORE_KEY] = "true"
    if request is not None and outcome.translates:  # the answer comes back as Chat: translated back
        metadata[vsr.RESPOND_KEY] = "stream" if request.stream else "json"
        metadata[vsr.API_KEY] = outcome.wire_api.value
        metadata[vsr.TRANSLATE_KEY] = "chat"
    if lookup is not None and lookup.state != "off":
        metadata[vsr.CACHE_KEY] = lookup.state
        if lookup.ticket is not None:
            metadata[vsr.TICKET_KEY] = lookup.ticket
            metadata[vsr.OBSERVE_KEY] = "1"
    if conversation is not None and conversation.ticket is not None:
        metadata[vsr.CONVERSATION_KEY] = conversation.ticket
        metadata[vsr.OBSERVE_KEY] = "1"
    if (unknown := outcome.unknown_model_header) is not None:
        metadata[vsr.UNKNOWN_MODEL_KEY] = unknown
    if (selection := outcome.selection_header) is not None and model is not None:
        # The store phase reports the answer's status and time to its first byte to the fleet.
        metadata[vsr.SELECTION_KEY] = selection
        selected = outcome.result.selection
        fails_over = selected is not None and selected.failover and outcome.cluster != model.cluster
        if fails_over and selected is not None and selected.fallback is not None:
            # An answer from it is a failover: the store phase tells them apart by Envoy's attributes.
            metadata[vsr.FLEET_FALLBACK_KEY] = selected.fallback.name
        metadata[vsr.FLEET_KEY] = fleet_ticket(model.name)
        metadata[vsr.OBSERVE_KEY] = "1"
    return metadata


def fleet_ticket(model: str) -> str:
    """What the store phase needs to report an answer to the fleet: the model and when it was sent
    (wall clock: the store phase may run in another worker process of this host)."""
    return f"{time.time():.6f} {model}"


def immediate_response(outcome: RoutingOutcome, *, debug: bool = False) -> Answer:
    """The answer sent without reaching an upstream: a clarifying reply, or the rejection or
    request error in the request's API shape (with retry-after when the policy gave one)."""
    headers = client_headers(outcome, trace_of(outcome, debug))
    details = f"vsr_{outcome.action}"
    if outcome.action == "clarify":
        assert outcome.message is not None
        model = f"vsr/{outcome.decision}"
        if outcome.request is not None and outcome.request.stream:
            body = assistant_reply_stream(outcome.api, model, outcome.message)
            headers["content-type"] = "text/event-stream"
            headers["cache-control"] = "no-cache"
        else:
            body = dumps(assistant_reply(outcome.api, model, outcome.message))
            headers["content-type"] = "application/json"
        return Answer(200, headers, body, details)
    error = outcome.error
    if outcome.action == "error" and error is not None:
        kind = error.error_type
        doc = error_body(outcome.api, outcome.status, error.message, code=error.code, param=error.param, kind=kind)
    elif outcome.action == "reject":
        message = outcome.message or "request rejected by policy"
        doc = error_body(outcome.api, outcome.status, message, code=outcome.code)
        if outcome.result.retry_after_s is not None:
            headers["retry-after"] = str(outcome.result.retry_after_s)
    else:
        raise ValueError(f"a {outcome.action} outcome has no immediate response")
    headers["content-type"] = "application/json"
    return Answer(outcome.status, headers, dumps(doc), details)


def error_answer(
    api: ApiKind,
    status: int,
    message: str,
    *,
    code: str,
    kind: str | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """An error of the server's own (no decision to render, or a body it cannot send) in `api`'s shape."""
    body = dumps(error_body(api, status, message, code=code, kind=kind))
    return Answer(status, {**(headers or {}), **JSON_TYPE}, body, code)
