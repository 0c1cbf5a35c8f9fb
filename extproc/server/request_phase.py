"""The request phase: read the client's request, decide it, answer with the outcome.

The request is read from its headers (three-message flow: client `x-vsr-*` headers are stripped
here) or from Envoy's attributes and the `vsr.request` metadata (one-message flow). Its body goes
to the Router; a routed request then follows its conversation and looks in the semantic cache
(one-message flow only: the store phase needs the decision metadata). The outcome becomes one
answer: the routed body with the decision (headers and `vsr` metadata), a cache hit, or an
immediate response (reject, clarify, errors). GET /v1/models is answered from the policy.
MCP requests go to the tool rules (`response_tools`).
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from extproc import headers as vsr
from extproc.errors import RequestError, error_body
from extproc.observability.observer import REQUEST_ID
from extproc.observability.tracing import TRACE_HEADERS
from extproc.policy.models_list import MODELS_PATH, is_models_path, model_body, models_body
from extproc.protocol import anthropic
from extproc.protocol.anthropic import ANTHROPIC_VERSION_HEADER
from extproc.protocol.request import ApiKind
from extproc.protocol.responses import dumps
from extproc.server import mutations, passthrough
from extproc.server.passthrough import PASSTHROUGH_PATHS

if TYPE_CHECKING:
    from extproc.cache.service import CacheLookup
    from extproc.conversations.service import ConversationLookup
    from extproc.outcome import RoutingOutcome
    from extproc.router import Router
    from extproc.server.response_tools import ResponseTools
    from extproc.server.stream_state import Backends, RequestState

log = logging.getLogger("extproc.server")

MAX_TRACE_CHARS = 4096
_TRUTHY = ("1", "true", "yes", "on")
_JSON = {"content-type": "application/json"}


class RequestPhase:
    """The request headers and body of a stream, answered from the Router's outcome."""

    def __init__(self, backends: Backends, tools: ResponseTools) -> None:
        self.backends = backends
        self.tools = tools  # MCP requests are judged by the tool rules

    def read_attributes(self, request: Any, state: RequestState) -> None:
        """One-message flow: path and request id from Envoy's attributes; the debug flag, tenant,
        cache-control and session from the client metadata."""
        path, request_id = mutations.request_attributes(request)
        if path is not None:
            state.path = canonical_path(path)
        state.request_id = request_id
        backends = self.backends
        wants_tenant = backends.cache is not None or backends.conversations is not None
        if backends.debug_headers or wants_tenant:
            client = mutations.metadata_strings(request, vsr.CLIENT_NAMESPACE)
            if backends.debug_headers and vsr.DEBUG_KEY in client:
                state.debug = client[vsr.DEBUG_KEY].strip().lower() in _TRUTHY
            if wants_tenant:
                for key, value in client.items():
                    if key.startswith(vsr.TENANT_PREFIX):
                        state.tenant[key[len(vsr.TENANT_PREFIX) :]] = value
                    elif key == vsr.CACHE_CONTROL_KEY:
                        state.cache_control = value
                    elif key == vsr.SESSION_KEY:
                        state.session = value or None
        if state.trace is not None:
            fields = mutations.metadata_fields(request, vsr.CLIENT_NAMESPACE)
            if fields is not None:
                state.trace.read_metadata(fields)
        REQUEST_ID.set(state.request_id)

    async def headers(self, headers: Any, state: RequestState) -> Any:
        """Three-message flow: strip client routing headers; pass what we do not route."""
        state.headers_seen = True
        method = self._read_headers(headers, state)
        REQUEST_ID.set(state.request_id)  # log records of this request carry it
        stripped = bool(state.stripped)
        if method == "GET" and is_models_path(state.path):
            return self._models(state)
        if method != "POST" or state.path not in self.backends.inference_paths:
            return mutations.continue_request_headers(state.stripped, clear_route_cache=stripped, pass_through=True)
        if headers.end_of_stream:  # no body will follow: decide now
            return await self._decide(b"", state, at_headers=True)
        return mutations.continue_request_headers(state.stripped, clear_route_cache=stripped)

    def _read_headers(self, headers: Any, state: RequestState) -> str:
        """Path, request id, debug flag and client kind from the request headers; the method."""
        method = ""
        for header in headers.headers.headers:
            key = header.key.lower()
            if key.startswith(":"):
                if key == ":path":
                    state.path = canonical_path(mutations.header_value(header))
                elif key == ":method":
                    method = mutations.header_value(header)
            elif key.startswith(vsr.ROUTING_PREFIX):
                if header.key not in state.stripped:
                    state.stripped.append(header.key)
                if key == vsr.DEBUG and self.backends.debug_headers:
                    state.debug = mutations.header_value(header).strip().lower() in _TRUTHY
            elif key == vsr.REQUEST_ID:
                state.request_id = mutations.header_value(header)
            elif key == ANTHROPIC_VERSION_HEADER:
                state.anthropic_client = True
            elif state.trace is not None and key in TRACE_HEADERS:
                state.trace.client_header(key, mutations.header_value(header))
        return method

    async def body(self, body: Any, state: RequestState) -> Any:
        state.body += body.body
        if not body.end_of_stream:  # only in a streamed mode; BUFFERED sends one message
            return mutations.continue_request_body()
        data = bytes(state.body)
        state.body = bytearray()
        router = self.backends.router
        if router is not None and router.policy.spec.mcp.servers and state.path == router.policy.spec.mcp.path:
            return await self.tools.mcp_request(data, state, router)
        if router is not None and not state.headers_seen and state.path in PASSTHROUGH_PATHS:
            return passthrough.answer(router.policy.spec, data)  # embeddings, audio: to the model it names
        if not state.headers_seen and state.path and state.path not in self.backends.inference_paths:
            return mutations.continue_request_body()  # a route that should not have sent us this: untouched
        return await self._decide(data, state, at_headers=False)

    # -- the decision -------------------------------------------------------------------------

    async def _decide(self, body: bytes, state: RequestState, *, at_headers: bool) -> Any:
        router = self.backends.router
        observer = self.backends.observer
        trace = state.trace
        if router is None:
            self._log(state, "not_ready", 503, None)
            return self._failed(state, "not_ready", 503, "The router is still loading its policy and models.")
        if trace is not None:
            trace.route_started = time.perf_counter()
        waited = time.monotonic() - state.received if state.received is not None else 0.0
        try:
            if self.backends.shed_wait_s and waited > self.backends.shed_wait_s:
                outcome = router.shed_unread(waited_s=waited, request_id=state.request_id)
            else:
                outcome = await router.route(
                    body, path=state.path, request_id=state.request_id, received=state.received
                )
        except Exception:
            log.exception("routing failed", extra={"request_id": state.request_id, "path": state.path})
            return self._failed(state, "internal_error", 500, "Internal error while routing the request.")
        if trace is not None:
            trace.outcome = outcome
        conversation, lookup = await self._follow_and_look_up(outcome, router, state)
        if observer is not None:
            extproc_ms = (time.perf_counter() - state.started) * 1000.0
            observer.outcome(outcome, request_id=state.request_id, path=state.path, body=body, extproc_ms=extproc_ms)
        tool_rules = bool(router.policy.tool_rules)
        return self.answer(outcome, state, tool_rules, lookup, conversation, at_headers=at_headers)

    def answer(
        self,
        outcome: RoutingOutcome,
        state: RequestState,
        tool_rules: bool,
        lookup: CacheLookup | None = None,
        conversation: ConversationLookup | None = None,
        *,
        at_headers: bool = False,
    ) -> Any:
        """The one answer to Envoy for a decided request: a cache hit, the routed body with the
        decision, or an immediate response (`extproc explain` shows it as the exact mutations)."""
        if lookup is not None and lookup.state == "hit":
            return self._cache_hit(outcome, state, lookup)
        if outcome.action == "route":
            return self._route(outcome, state, tool_rules, lookup, conversation, at_headers=at_headers)
        self._log(state, outcome.action, outcome.status, outcome.decision)
        immediate = outcome.immediate_response()
        headers = {**self._client_headers(outcome, state), **{k.lower(): v for k, v in immediate.headers.items()}}
        return mutations.immediate(immediate.status, headers, immediate.body, details=f"vsr_{outcome.action}")

    def _failed(self, state: RequestState, failure: str, status: int, message: str) -> Any:
        """No outcome (the router not loaded, or it raised): a server error for the client."""
        if state.trace is not None:
            state.trace.failure = failure
        observer = self.backends.observer
        if observer is not None:
            observer.failure(failure, request_id=state.request_id, path=state.path)
        return _error(status, message, "server_error", failure)

    async def _follow_and_look_up(
        self, outcome: RoutingOutcome, router: Router, state: RequestState
    ) -> tuple[ConversationLookup | None, CacheLookup | None]:
        """A routed one-message request: its conversation, then the cache (its key names the
        model, which the conversation may change); each noted on the outcome."""
        if outcome.action != "route" or state.headers_seen:
            return None, None
        conversations, cache = self.backends.conversations, self.backends.cache
        conversation = lookup = None
        if conversations is not None:
            conversation = await conversations.follow(
                outcome, router.policy.spec, tenant=state.tenant, session=state.session
            )
            if conversation.state != "off":
                outcome.timings_ms["conversation"] = conversation.lookup_ms
                outcome.conversation = conversation.to_dict()
        if cache is not None:
            looked_up = time.perf_counter()
            lookup = await cache.lookup(
                outcome, router.policy.spec, tenant=state.tenant, cache_control=state.cache_control
            )
            outcome.timings_ms["cache"] = (time.perf_counter() - looked_up) * 1000.0
            outcome.cache = lookup.to_dict() if lookup.state != "off" else None
        return conversation, lookup

    def _route(
        self,
        outcome: RoutingOutcome,
        state: RequestState,
        tool_rules: bool,
        lookup: CacheLookup | None,
        conversation: ConversationLookup | None,
        *,
        at_headers: bool,
    ) -> Any:
        """Send the request on: routing headers (three messages), the rewritten body and the decision."""
        upstream_headers = {k.lower(): v for k, v in outcome.request_headers().items()}
        self._log(state, outcome.action, outcome.status, outcome.decision, upstream_headers)
        state.client_headers = self._client_headers(outcome, state)
        if at_headers:
            remove = [h for h in state.stripped if h.lower() not in upstream_headers]
            return mutations.route_request_headers(upstream_headers, remove)
        try:
            new_body = outcome.rewritten_body()
        except RequestError as exc:  # a Messages feature with no Chat form, for an OpenAI-only model
            return mutations.immediate(
                exc.status,
                state.client_headers,
                dumps(anthropic.error_body(exc.status, exc.message)),
                details=exc.code,
            )
        metadata = decision_metadata(outcome, state, tool_rules=tool_rules, lookup=lookup, conversation=conversation)
        return mutations.route_request_body(upstream_headers, new_body, metadata)

    def _cache_hit(self, outcome: RoutingOutcome, state: RequestState, hit: CacheLookup) -> Any:
        """A stored answer, served as an immediate response: the upstream is never called."""
        self._log(state, "cache_hit", 200, outcome.decision)
        headers = self._client_headers(outcome, state)
        headers[vsr.CACHE] = "hit"
        headers[vsr.CACHE_SIMILARITY] = f"{hit.similarity or 0.0:.3f}"
        headers["content-type"] = hit.content_type
        if hit.content_type == "text/event-stream":
            headers["cache-control"] = "no-cache"
        return mutations.immediate(200, headers, hit.body, details="vsr_cache_hit")

    def _models(self, state: RequestState) -> Any:
        """GET /v1/models (and /v1/models/{id}) answered from the policy; never forwarded."""
        router = self.backends.router
        if router is None:
            return _error(503, "The router is still loading its policy and models.", "server_error", "not_ready")
        spec = router.policy.spec
        name = state.path[len(MODELS_PATH) + 1 :]
        if not name:
            body = models_body(spec, anthropic=state.anthropic_client, created=int(time.time()))
            return mutations.immediate(200, _JSON, dumps(body), details="vsr_models")
        found = model_body(spec, name, anthropic=state.anthropic_client)
        if found is None:
            message = f"The model {name!r} does not exist"
            error = (
                anthropic.error_body(404, message)
                if state.anthropic_client
                else error_body(message, "invalid_request_error", "model_not_found")
            )
            return mutations.immediate(404, _JSON, dumps(error), details="vsr_models")
        return mutations.immediate(200, _JSON, dumps(found), details="vsr_models")

    @staticmethod
    def _client_headers(outcome: RoutingOutcome, state: RequestState) -> dict[str, str]:
        """What the client sees: decision, model, matched signals (never the cluster); a trace on request."""
        headers = {k.lower(): v for k, v in outcome.response_headers().items() if k.lower() != vsr.CLUSTER}
        if state.debug:
            headers[vsr.TRACE] = _trace(outcome)
        return headers

    @staticmethod
    def _log(
        state: RequestState,
        action: str,
        status: int,
        decision: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        # Routine routes at DEBUG (Envoy's access log already has a line per request with the
        # decision, model and x-request-id); rejects, clarifications and errors at INFO.
        level = logging.DEBUG if action == "route" else logging.INFO
        if not log.isEnabledFor(level):
            return
        log.log(
            level,
            "routed",
            extra={
                "request_id": state.request_id,
                "path": state.path,
                "action": action,
                "status": status,
                "decision": decision,
                "model": (headers or {}).get(vsr.MODEL),
                "cluster": (headers or {}).get(vsr.CLUSTER),
                "stripped": state.stripped or None,
                "elapsed_ms": round((time.perf_counter() - state.started) * 1000, 3),
            },
        )


def decision_metadata(
    outcome: RoutingOutcome,
    state: RequestState,
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
        vsr.SIGNALS_KEY: state.client_headers.get(vsr.SIGNALS, "none"),
    }
    if vsr.TRACE in state.client_headers:
        metadata[vsr.TRACE_KEY] = state.client_headers[vsr.TRACE]
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
        metadata[vsr.API_KEY] = ApiKind.CHAT.value
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


def canonical_path(raw: str) -> str:
    """The path as an upstream would resolve it: no query, percent-decoded, dot segments and
    repeated or trailing slashes removed. Envoy normalises too (see envoy_config), but the
    inference-path check must not depend on the proxy's settings."""
    path = unquote(raw.split("?", 1)[0].split("#", 1)[0])
    path = posixpath.normpath("/" + path.lstrip("/")) if path else "/"
    return "/" if path in ("", ".") else path


def _trace(outcome: RoutingOutcome) -> str:
    try:
        text = outcome.trace_header()
    except Exception:  # a trace must never break routing
        log.exception("trace_header failed")
        return "unavailable"
    return text if len(text) <= MAX_TRACE_CHARS else text[: MAX_TRACE_CHARS - 3] + "..."


def _error(status: int, message: str, error_type: str, code: str) -> Any:
    body = json.dumps(error_body(message, error_type, code), separators=(",", ":")).encode()
    return mutations.immediate(status, _JSON, body, details=code)
