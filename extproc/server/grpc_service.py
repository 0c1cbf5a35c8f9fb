"""The ext_proc servicer: Envoy's phases mapped onto the transport-free Router, nothing more.

One gRPC stream is one HTTP request. Two Envoy flows are served:

**One message** (the shipped config): Envoy strips client `x-vsr-*` headers itself, runs
ext_proc only on inference routes and sends only the buffered request body, with the request's
path, method and id as attributes (and a client's `x-vsr-debug`, moved to the `vsr.request`
metadata namespace by Envoy's header_to_metadata filter). We answer with the rewritten body and
the decision as `vsr` dynamic metadata, which Envoy's routes match and echo to the client
(see `mutations`). A body-less POST never reaches us: Envoy's route for undecided inference
requests answers 400 itself.

**Three messages** (older configs, still served): Envoy sends, in order, the request headers,
the buffered request body (inference paths only) and the response headers; we answer each with
one `ProcessingResponse`:

- request headers: strip every client-sent `x-vsr-*` header (routing headers included) and
  clear the route cache; let non-inference paths through untouched (a mode override turns
  off the rest of the stream); a request with no body is decided here;
- request body: run the Router; on `route` set the routing headers, rewrite the body and its
  `content-length` and clear the route cache; on reject / clarify / error answer the client
  directly with an immediate response;
- response headers: add `x-vsr-decision`, `x-vsr-model`, `x-vsr-signals` (and a trace when
  debugging was asked for and allowed).

**The cache's store phase** (one-message flow, `cache` set): on routes whose decision carries a
cache ticket, a second ext_proc filter in observability mode streams the upstream's response
body here (the first chunk with the status as an attribute; older configs send the response
headers first) without waiting for answers; we answer nothing, reassemble the body, store it in
the background (`extproc.cache.service`) and end the stream once the answer is complete or
cannot be stored (else Envoy holds it open for its deferred-close timeout). A cache hit is answered at the request
body like a reject: an immediate response, the upstream never called.

Tracing (`tracer`, None unless `tracing.enabled`): a stream keeps a `StreamTrace` (its start, the W3C
context from the call's gRPC metadata, the request headers or the `vsr.request` metadata, the
outcome); the router's spans are built right after the decision is sent, and the stream's span ends
with the stream (`extproc.observability.tracing`). Off, every hook is one `is None` test.
"""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc

from extproc import headers as vsr
from extproc.agents import mcp
from extproc.agents.answer_gate import StreamGate, apply_to_json, calls_in_answer
from extproc.agents.tool_calls import ToolCall, Verdict, judge_calls, redact_arguments
from extproc.errors import RequestError, error_body
from extproc.observability.observer import REQUEST_ID, Observer
from extproc.observability.tracing import TRACE_HEADERS
from extproc.policy.models_list import MODELS_PATH, is_models_path, model_body, models_body
from extproc.protocol import anthropic
from extproc.protocol.anthropic import ANTHROPIC_VERSION_HEADER
from extproc.protocol.request import API_PATHS, ApiKind
from extproc.protocol.responses import dumps
from extproc.protocol.translate import ChatToMessagesStream, chat_to_message
from extproc.protocol.translate import chat_error_to_anthropic as anthropic_error_from_chat
from extproc.server import mutations
from extproc.server.loop_lag import LoopLag

if TYPE_CHECKING:
    from extproc.conversations.service import AnswerLearner, ConversationLookup, Conversations

if TYPE_CHECKING:
    from extproc.cache.service import CacheLookup, SemanticCache
    from extproc.observability.tracing import Attributes, StreamTrace, StreamTracer
    from extproc.outcome import RoutingOutcome
    from extproc.router import Router

log = logging.getLogger("extproc.server")

MAX_TRACE_CHARS = 4096


# Where Envoy puts the `request_attributes` we ask for, and where header_to_metadata puts the
# client's debug header (one-message flow).
ATTRIBUTES = "envoy.filters.http.ext_proc"
CLIENT_METADATA = "vsr.request"
# What the one-message store filter asks Envoy for in place of the response headers: the status.
# (Envoy cannot send a header as an attribute; the ticket says whether the answer streams.)
RESPONSE_CODE = "response.code"
RESPONSE_ATTRIBUTES = (RESPONSE_CODE,)
# In vsr.request: the configured tenant headers and the request's cache-control (envoy_config).
TENANT_PREFIX = "tenant:"
CACHE_CONTROL_KEY = "cache_control"
RESPOND_KEY = "respond"  # in vsr: the tool rules' response phase this request needs (json, stream, mcp_list)
TICKET_KEY = "cache_ticket"  # in vsr: what the store phase stores the answer as (the store routes match it)
CONVERSATION_KEY = "conversation"  # in vsr: what the store phase learns for the conversation store
OBSERVE_KEY = "observe"  # in vsr: the store phase is wanted (a cache ticket or a conversation ticket)
SESSION_KEY = "session"  # in vsr.request: the policy's session header (envoy_config copies it)
TRANSLATE_KEY = "translate"  # in vsr: the upstream speaks Chat for this Messages request (routes rewrite the path)
_TRUTHY = ("1", "true", "yes", "on")


@dataclass(slots=True)
class _Stream:
    """Per-request state kept between the phases of one ext_proc stream."""

    path: str = ""
    headers_seen: bool = False
    request_id: str | None = None
    debug: bool = False
    stripped: list[str] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)
    client_headers: dict[str, str] = field(default_factory=dict)  # what the response phase adds
    started: float = 0.0
    # time.monotonic() when the latest message arrived (read, less the loop's lateness): the deadline's start
    received: float | None = None
    trace: StreamTrace | None = None  # only while tracing is on
    tenant: dict[str, str] = field(default_factory=dict)  # the cache's tenant headers, from metadata
    cache_control: str = ""
    cache: CacheLookup | None = None
    # the store phase (observability mode): the ticket and the body so far
    store_ticket: str | None = None
    store_started: bool = False  # the first message of the store phase was read
    store_body: bytearray = field(default_factory=bytearray)
    # the tool rules' response phase: what the request said it needs, and the held stream
    respond: str = ""  # json / stream / mcp_list, from the decision metadata
    respond_api: str = ""
    respond_store: bool = False
    response_status: int = 0  # the upstream's, from the response headers (store or tool-rules phase)
    response_type: str = ""  # its content type, lower-cased
    response_body: bytearray = field(default_factory=bytearray)
    gate: StreamGate | None = None
    respond_rules: bool = False  # the policy has tool rules (set when the request is decided)
    anthropic_client: bool = False  # the client sent anthropic-version (GET /v1/models answers in its shape)
    translator: ChatToMessagesStream | None = None  # a Chat answer streamed back as Messages events
    translate: bool = False  # the answer is Chat Completions for a Messages request: translate it back
    session: str | None = None  # the policy's session header, from the vsr.request metadata
    conversation: ConversationLookup | None = None
    learner: AnswerLearner | None = None  # the store phase: what the answer teaches the conversation store
    observe_started: bool = False
    cache_done: bool = False  # the store phase's cache part has what it needs (or never will)


class ExtProcService(ep_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    """Envoy ext_proc `Process` stream handler around a swappable router."""

    def __init__(
        self,
        router: Router | None = None,
        *,
        inference_paths: Collection[str] = tuple(API_PATHS),
        debug_headers: bool = False,
        observer: Observer | None = None,
        tracer: StreamTracer | None = None,
        cache: SemanticCache | None = None,
        shed_wait_s: float = 0.0,
        conversations: Conversations | None = None,
    ) -> None:
        self.router = router  # None until the policy and models are loaded (health: NOT_SERVING)
        self.inference_paths = frozenset(inference_paths)
        self.debug_headers = debug_headers
        self.observer = observer  # metrics and the decision log; None: nothing recorded
        self.tracer = tracer  # OpenTelemetry spans per stream; None: no trace state at all
        self.cache = cache  # the semantic cache; None: no lookups, no stores
        # How late the loop runs (started by the server): a message has waited about that long
        # already when it is read, so its request deadline counts from then (server/loop_lag.py).
        self.loop_lag = LoopLag()
        self.shed_wait_s = shed_wait_s  # a message read later than this after it arrived is shed; 0: never
        self.conversations = conversations  # conversations kept on their model; None: off
        self.in_flight = 0
        self._stores: set[asyncio.Task[Any]] = set()  # background stores (cache, conversations), kept until done
        self.on_idle: Callable[[], None] | None = None  # called when the last stream in flight ends

    async def Process(self, request_iterator: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        stream = _Stream()
        self.in_flight += 1
        observer = self.observer
        tracer = self.tracer
        try:
            async for request in request_iterator:
                phase = request.WhichOneof("request")
                if request.observability_mode:  # the cache's store phase: Envoy expects no answer
                    if self._observe(request, phase or "", stream):
                        # Close the stream now: Envoy would hold it open for its deferred-close
                        # timeout (5 s), and thousands of idle streams cost memory and GC time.
                        return
                    continue
                started = time.perf_counter()
                stream.received = time.monotonic() - self.loop_lag.estimate()
                if not stream.started:
                    stream.started = started
                    if tracer is not None:
                        stream.trace = tracer.begin(context)
                        stream.trace.flow = "three_messages" if phase == "request_headers" else "one_message"
                    if phase != "request_headers":  # the one-message flow: what the headers would have said
                        self._read_attributes(request, stream)
                if phase == "request_headers":
                    response = await self._request_headers(request.request_headers, stream)
                elif phase == "request_body":
                    response = await self._request_body(request.request_body, stream)
                elif phase == "response_headers":
                    response = self._response_headers(request, stream)
                elif phase == "response_body":
                    response = await self._response_body(request.response_body, stream)
                else:
                    response = mutations.continue_phase(phase or "")
                if observer is not None:
                    observer.phase(phase or "unknown", time.perf_counter() - started)
                yield response
                if tracer is not None and stream.trace is not None and stream.trace.outcome is not None:
                    # after the answer went out: the spans cost no latency, and the outcome is let go
                    tracer.decided(stream.trace, path=stream.path, request_id=stream.request_id)
                if response.HasField("immediate_response"):
                    return
        finally:
            self.in_flight -= 1
            if stream.trace is not None and tracer is not None:
                tracer.finish(stream.trace, path=stream.path, request_id=stream.request_id)
            if self.in_flight == 0 and not self._stores and self.on_idle is not None:
                self.on_idle()

    # -- phases -------------------------------------------------------------------------------

    def _observe(self, request: Any, phase: str, stream: _Stream) -> bool:
        """The store phase: the upstream's answer for the cache and the conversation store.
        True when neither wants more of this stream."""
        if not stream.observe_started:
            stream.observe_started = True
            stream.learner = self._learner_of(request)
        learned = self._learn(request, phase, stream) if stream.learner is not None else True
        if not stream.cache_done:
            stream.cache_done = self._observe_cache(request, phase, stream)
        return learned and stream.cache_done

    def _learner_of(self, request: Any) -> AnswerLearner | None:
        if self.conversations is None:
            return None
        meta = request.metadata_context.filter_metadata.get(mutations.DECISION_NAMESPACE)
        ticket = meta.fields.get(CONVERSATION_KEY) if meta is not None else None
        return self.conversations.learner(ticket.string_value) if ticket is not None else None

    def _learn(self, request: Any, phase: str, stream: _Stream) -> bool:
        learner, conversations = stream.learner, self.conversations
        assert learner is not None and conversations is not None
        if phase == "response_headers":
            status, _ = _status_and_type(request.response_headers)
            chunk, end = b"", request.response_headers.end_of_stream
        elif phase == "response_body":
            status = learner.status or _response_attributes(request)[0]
            chunk, end = request.response_body.body, request.response_body.end_of_stream
        else:
            return False
        learner.status = learner.status or status
        if not learner.feed(status, chunk, end):
            return False
        stream.learner = None
        task = asyncio.create_task(conversations.learn(learner))
        self._stores.add(task)
        task.add_done_callback(self._stores.discard)
        return True

    def _observe_cache(self, request: Any, phase: str, stream: _Stream) -> bool:
        """The cache's part: collect the answer; store it once it is complete. True when done."""
        cache = self.cache
        if cache is None:
            return True
        if phase == "response_headers":  # configs before the one-message store phase send them
            stream.store_ticket = _ticket_of(request)
            stream.response_status, stream.response_type = _status_and_type(request.response_headers)
            stream.store_started = True
            if not self._storable(stream, cache):
                return True
            end = request.response_headers.end_of_stream
        elif phase == "response_body":
            if not stream.store_started:  # one message: status and type come as attributes
                stream.store_ticket = _ticket_of(request)
                stream.response_status, stream.response_type = _response_attributes(request)
                stream.store_started = True
                if not self._storable(stream, cache):
                    return True
            if len(stream.store_body) + len(request.response_body.body) > cache.settings.max_entry_bytes:
                cache.counters.stores["too_large"] += 1
                return True
            stream.store_body += request.response_body.body
            end = request.response_body.end_of_stream
        else:
            return False
        if not end:
            return False
        ticket, stream.store_ticket = stream.store_ticket, None
        if ticket is None:
            return True
        task = asyncio.create_task(
            cache.store(ticket, stream.response_status, stream.response_type, bytes(stream.store_body))
        )
        stream.store_body = bytearray()
        self._stores.add(task)
        task.add_done_callback(self._stores.discard)
        return True

    @staticmethod
    def _storable(stream: _Stream, cache: SemanticCache) -> bool:
        """Whether the answer can be stored at all, known from its status (cache.answers stores
        only 200s): if not, the rest of the stream is not needed."""
        if stream.store_ticket is None:
            return False
        if stream.response_status != 200:
            cache.counters.stores["status"] += 1
            return False
        return True

    def _read_attributes(self, request: Any, stream: _Stream) -> None:
        """Path and request id from Envoy's attributes; the debug flag from the client metadata."""
        if ATTRIBUTES in request.attributes:
            fields = request.attributes[ATTRIBUTES].fields
            if "request.path" in fields:
                stream.path = canonical_path(fields["request.path"].string_value)
            if "request.id" in fields:
                stream.request_id = fields["request.id"].string_value or None
        client = request.metadata_context.filter_metadata.get(CLIENT_METADATA)
        if client is not None:
            if self.debug_headers and "debug" in client.fields:
                stream.debug = client.fields["debug"].string_value.strip().lower() in _TRUTHY
            if self.cache is not None or self.conversations is not None:
                for key, value in client.fields.items():
                    if key.startswith(TENANT_PREFIX):
                        stream.tenant[key[len(TENANT_PREFIX) :]] = value.string_value
                    elif key == CACHE_CONTROL_KEY:
                        stream.cache_control = value.string_value
                    elif key == SESSION_KEY:
                        stream.session = value.string_value or None
        if stream.trace is not None and CLIENT_METADATA in request.metadata_context.filter_metadata:
            stream.trace.read_metadata(request.metadata_context.filter_metadata[CLIENT_METADATA].fields)
        REQUEST_ID.set(stream.request_id)

    async def _request_headers(self, headers: Any, stream: _Stream) -> Any:
        stream.headers_seen = True
        method = ""
        for header in headers.headers.headers:
            key = header.key.lower()
            if key.startswith(":"):
                if key == ":path":
                    stream.path = canonical_path(_value(header))
                elif key == ":method":
                    method = _value(header)
            elif key.startswith(vsr.ROUTING_PREFIX):
                if header.key not in stream.stripped:
                    stream.stripped.append(header.key)
                if key == vsr.DEBUG and self.debug_headers:
                    stream.debug = _value(header).strip().lower() in _TRUTHY
            elif key == "x-request-id":
                stream.request_id = _value(header)
            elif key == ANTHROPIC_VERSION_HEADER:
                stream.anthropic_client = True
            elif stream.trace is not None and key in TRACE_HEADERS:
                stream.trace.client_header(key, _value(header))
        REQUEST_ID.set(stream.request_id)  # log records of this request carry it
        stripped = bool(stream.stripped)
        if method == "GET" and is_models_path(stream.path):
            return self._models(stream)
        if method != "POST" or stream.path not in self.inference_paths:
            return mutations.continue_request_headers(stream.stripped, clear_route_cache=stripped, pass_through=True)
        if headers.end_of_stream:  # no body will follow: decide now
            return await self._decide(b"", stream, at_headers=True)
        return mutations.continue_request_headers(stream.stripped, clear_route_cache=stripped)

    async def _request_body(self, body: Any, stream: _Stream) -> Any:
        stream.body += body.body
        if not body.end_of_stream:  # only in a streamed mode; BUFFERED sends one message
            return mutations.continue_request_body()
        data = bytes(stream.body)
        stream.body = bytearray()
        router = self.router
        if router is not None and router.policy.spec.mcp.servers and stream.path == router.policy.spec.mcp.path:
            return await self._mcp_request(data, stream, router)
        if not stream.headers_seen and stream.path and stream.path not in self.inference_paths:
            return mutations.continue_request_body()  # a route that should not have sent us this: untouched
        return await self._decide(data, stream, at_headers=False)

    # -- the decision -------------------------------------------------------------------------

    async def _decide(self, body: bytes, stream: _Stream, *, at_headers: bool) -> Any:
        router = self.router
        observer = self.observer
        trace = stream.trace
        if router is None:
            if trace is not None:
                trace.failure = "not_ready"
            self._log(stream, "not_ready", 503, None)
            if observer is not None:
                observer.failure("not_ready", request_id=stream.request_id, path=stream.path)
            return _error(503, "The router is still loading its policy and models.", "server_error", "not_ready")
        if trace is not None:
            trace.route_started = time.perf_counter()
        waited = time.monotonic() - stream.received if stream.received is not None else 0.0
        try:
            if self.shed_wait_s and waited > self.shed_wait_s:
                outcome = router.shed_unread(waited_s=waited, request_id=stream.request_id)
            else:
                outcome = await router.route(
                    body, path=stream.path, request_id=stream.request_id, received=stream.received
                )
        except Exception:
            if trace is not None:
                trace.failure = "internal_error"
            log.exception("routing failed", extra={"request_id": stream.request_id, "path": stream.path})
            if observer is not None:
                observer.failure("internal_error", request_id=stream.request_id, path=stream.path)
            return _error(500, "Internal error while routing the request.", "server_error", "internal_error")
        if trace is not None:
            trace.outcome = outcome
        stream.respond_rules = bool(router.policy.tool_rules)
        if outcome.action == "route" and self.conversations is not None and not stream.headers_seen:
            # before the cache: its key names the model, and the conversation may change it
            stream.conversation = await self.conversations.follow(
                outcome, router.policy.spec, tenant=stream.tenant, session=stream.session
            )
            if stream.conversation.state != "off":
                outcome.timings_ms["conversation"] = stream.conversation.lookup_ms
                outcome.conversation = stream.conversation.to_dict()
        if outcome.action == "route" and self.cache is not None and not stream.headers_seen:
            looked_up = time.perf_counter()
            stream.cache = await self.cache.lookup(
                outcome, router.policy.spec, tenant=stream.tenant, cache_control=stream.cache_control
            )
            outcome.timings_ms["cache"] = (time.perf_counter() - looked_up) * 1000.0
            outcome.cache = stream.cache.to_dict() if stream.cache.state != "off" else None
        if observer is not None:
            extproc_ms = (time.perf_counter() - stream.started) * 1000.0
            observer.outcome(outcome, request_id=stream.request_id, path=stream.path, body=body, extproc_ms=extproc_ms)

        if stream.cache is not None and stream.cache.state == "hit":
            return self._cache_hit(outcome, stream, stream.cache)

        if outcome.action == "route":
            upstream_headers = {k.lower(): v for k, v in outcome.request_headers().items()}
            self._log(stream, outcome.action, outcome.status, outcome.decision, upstream_headers)
            stream.client_headers = self._client_headers(outcome, stream)
            if at_headers:
                remove = [h for h in stream.stripped if h.lower() not in upstream_headers]
                return mutations.route_request_headers(upstream_headers, remove)
            try:
                new_body = outcome.rewritten_body()
            except RequestError as exc:  # a Messages feature with no Chat form, for an OpenAI-only model
                return mutations.immediate(
                    exc.status,
                    stream.client_headers,
                    dumps(anthropic.error_body(exc.status, exc.message)),
                    details=exc.code,
                )
            return mutations.route_request_body(upstream_headers, new_body, self._decision_metadata(outcome, stream))

        self._log(stream, outcome.action, outcome.status, outcome.decision)
        immediate = outcome.immediate_response()
        headers = {**self._client_headers(outcome, stream), **{k.lower(): v for k, v in immediate.headers.items()}}
        return mutations.immediate(immediate.status, headers, immediate.body, details=f"vsr_{outcome.action}")

    # -- the tool rules' response phase -----------------------------------------------------------

    def _response_headers(self, request: Any, stream: _Stream) -> Any:
        """Three-message flow: our headers for the client. Tool rules: note what the answer is."""
        meta = request.metadata_context.filter_metadata.get(mutations.DECISION_NAMESPACE)
        fields = meta.fields if meta is not None else {}
        if RESPOND_KEY not in fields:
            return mutations.response_headers(stream.client_headers)
        stream.respond = fields[RESPOND_KEY].string_value
        stream.respond_api = fields["api"].string_value if "api" in fields else ApiKind.CHAT.value
        stream.respond_store = "store" in fields
        stream.translate = TRANSLATE_KEY in fields
        stream.response_status, stream.response_type = _status_and_type(request.response_headers)
        if stream.respond == "stream" and stream.response_status == 200 and "event-stream" in stream.response_type:
            stream.gate = StreamGate(ApiKind(stream.respond_api))
            if stream.translate:
                stream.translator = ChatToMessagesStream()
        return mutations.response_headers({})

    async def _response_body(self, body: Any, stream: _Stream) -> Any:
        router = self.router
        if stream.translate and stream.response_status != 200 and stream.respond == "json":
            return self._translated_error(body, stream)
        if not stream.respond or stream.response_status != 200 or router is None:
            return mutations.continue_phase("response_body")
        if stream.gate is not None:  # a stream: pass what carries no tool call, hold the rest
            gate = stream.gate
            passed = gate.feed(body.body, body.end_of_stream)
            if not body.end_of_stream or not gate.ready:
                if stream.translator is not None:
                    passed = stream.translator.feed(passed, body.end_of_stream)
                return mutations.response_body(passed, clear=not passed)
            calls, text = gate.calls()
            verdict = await self._judge(router, calls, text, stream)
            out = passed + gate.release(verdict)
            if stream.translator is not None:
                out = stream.translator.feed(out, end=True)
            return mutations.response_body(out, clear=not out)
        stream.response_body += body.body
        if not body.end_of_stream:
            return mutations.continue_phase("response_body")
        data = bytes(stream.response_body)
        stream.response_body = bytearray()
        if stream.respond == "mcp_list":
            return await self._mcp_list(data, stream, router)
        try:
            doc = json.loads(data)
        except ValueError:
            return mutations.continue_phase("response_body")
        api = ApiKind(stream.respond_api)
        calls, text = calls_in_answer(api, doc)
        verdict = await self._judge(router, calls, text, stream)
        new_body = apply_to_json(api, doc, verdict) if isinstance(doc, dict) else None
        if stream.translate and isinstance(doc, dict):
            judged = json.loads(new_body) if new_body is not None else doc
            new_body = dumps(chat_to_message(judged))
        headers = verdict.headers()
        if new_body is not None:
            headers["content-length"] = str(len(new_body))
        return mutations.response_body(new_body, headers)

    async def _judge(self, router: Router, calls: list[ToolCall], text: str, stream: _Stream) -> Verdict:
        if not calls and not stream.respond_store:
            return Verdict()  # a plain answer to a request that offered tools: nothing to judge
        started = time.perf_counter()
        try:
            verdict = await judge_calls(router.policy, router.executor, calls, text=text, store=stream.respond_store)
        except Exception:  # a judge that cannot run blocks: an unchecked tool call must not pass
            log.exception("tool rules failed", extra={"request_id": stream.request_id})
            return Verdict(
                action="block", rule="tool_rules_error", message="The gateway could not check this tool call."
            )
        if verdict.rule is not None:
            log.info(
                "tool rule", extra={"request_id": stream.request_id, "rule": verdict.rule, "action": verdict.action}
            )
        if stream.trace is not None:  # names and counts only: never arguments
            attributes: Attributes = {"vsr.tool_rules.calls": len(calls), "vsr.tool_rules.action": verdict.action}
            if verdict.rule is not None:
                attributes = {**attributes, "vsr.tool_rules.rule": verdict.rule}
            stream.trace.add_span("vsr.tool_rules", started, time.perf_counter(), attributes)
        return verdict

    def _translated_error(self, body: Any, stream: _Stream) -> Any:
        """An OpenAI-only upstream's error for a Messages client, in Anthropic's envelope."""
        stream.response_body += body.body
        if not body.end_of_stream:
            return mutations.continue_phase("response_body")
        data = anthropic_error_from_chat(stream.response_status, bytes(stream.response_body))
        stream.response_body = bytearray()
        headers = {"content-length": str(len(data)), "content-type": "application/json"}
        return mutations.response_body(data, headers)

    def _models(self, stream: _Stream) -> Any:
        """GET /v1/models (and /v1/models/{id}) answered from the policy; never forwarded."""
        router = self.router
        if router is None:
            return _error(503, "The router is still loading its policy and models.", "server_error", "not_ready")
        spec = router.policy.spec
        name = stream.path[len(MODELS_PATH) + 1 :]
        if not name:
            body = models_body(spec, anthropic=stream.anthropic_client, created=int(time.time()))
            return mutations.immediate(200, {"content-type": "application/json"}, dumps(body), details="vsr_models")
        found = model_body(spec, name, anthropic=stream.anthropic_client)
        if found is None:
            message = f"The model {name!r} does not exist"
            error = (
                anthropic.error_body(404, message)
                if stream.anthropic_client
                else error_body(message, "invalid_request_error", "model_not_found")
            )
            return mutations.immediate(404, {"content-type": "application/json"}, dumps(error), details="vsr_models")
        return mutations.immediate(200, {"content-type": "application/json"}, dumps(found), details="vsr_models")

    # -- MCP ----------------------------------------------------------------------------------

    async def _mcp_request(self, data: bytes, stream: _Stream, router: Router) -> Any:
        spec = router.policy.spec.mcp
        try:
            message = mcp.parse_message(data)
            call = message.tool_call()
        except mcp.McpProblem as problem:
            status = 400 if problem.code in (mcp.PARSE_ERROR, mcp.INVALID_REQUEST) else 200
            body = mcp.error_body(problem.request_id, problem.code, str(problem))
            return mutations.immediate(status, {"content-type": "application/json"}, body, details="vsr_mcp_invalid")
        metadata: dict[str, object] = {"decision": f"mcp:{message.method}", "signals": "none"}
        if call is not None:
            verdict = await self._judge(router, [call], "", stream)
            headers = {"content-type": "application/json", **verdict.headers()}
            if verdict.action == "block":
                body = mcp.error_body(message.request_id, mcp.POLICY_DENIED, verdict.message, {"rule": verdict.rule})
                return mutations.immediate(200, headers, body, details="vsr_mcp_denied")
            if verdict.action == "redact":
                data = message.with_arguments(redact_arguments(call.arguments)[0])
            metadata["signals"] = ",".join(verdict.matched) or "none"
            if verdict.rule is not None:
                metadata["decision"] = f"mcp:{verdict.rule}"
        server = mcp.server_for(spec, call.name if call is not None else None)
        if server is None:
            body = mcp.error_body(
                message.request_id, -32602, f"No MCP server serves tool {call.name if call else ''!r}"
            )
            return mutations.immediate(200, {"content-type": "application/json"}, body, details="vsr_mcp_no_server")
        metadata["cluster"] = server.cluster
        metadata["model"] = server.name
        if message.method == "tools/list" and router.policy.tool_rules:
            metadata[RESPOND_KEY] = "mcp_list"
        return mutations.route_request_body({}, data, metadata)

    async def _mcp_list(self, data: bytes, stream: _Stream, router: Router) -> Any:
        """Hide the tools a rule blocks on their name alone."""
        doc, names = mcp.listed_tools(data, stream.response_type)
        if doc is None or not names:
            return mutations.continue_phase("response_body")
        hidden = set()
        for name in names:
            verdict = await self._judge(router, [ToolCall(name, "{}")], "", stream)
            if verdict.action == "block":
                hidden.add(name)
        if not hidden:
            return mutations.continue_phase("response_body")
        body = mcp.without_tools(doc, hidden, stream.response_type)
        return mutations.response_body(
            body, {"content-length": str(len(body)), "x-vsr-mcp-hidden": ",".join(sorted(hidden))}
        )

    def _cache_hit(self, outcome: RoutingOutcome, stream: _Stream, hit: CacheLookup) -> Any:
        """A stored answer, served as an immediate response: the upstream is never called."""
        self._log(stream, "cache_hit", 200, outcome.decision)
        headers = self._client_headers(outcome, stream)
        headers[vsr.CACHE] = "hit"
        headers[vsr.CACHE_SIMILARITY] = f"{hit.similarity or 0.0:.3f}"
        headers["content-type"] = hit.content_type
        if hit.content_type == "text/event-stream":
            headers["cache-control"] = "no-cache"
        return mutations.immediate(200, headers, hit.body, details="vsr_cache_hit")

    @staticmethod
    def _decision_metadata(outcome: RoutingOutcome, stream: _Stream) -> dict[str, object]:
        """The decision for Envoy's routes (one-message flow): they match `cluster` and echo the rest."""
        model = outcome.model
        metadata: dict[str, object] = {
            "cluster": model.cluster if model is not None else "",
            "decision": outcome.decision or "none",
            "model": model.name if model is not None else "none",
            "signals": stream.client_headers.get(vsr.SIGNALS, "none"),
        }
        if vsr.TRACE in stream.client_headers:
            metadata["trace"] = stream.client_headers[vsr.TRACE]
        if outcome.plugins.set_headers:
            metadata["headers"] = dict(outcome.plugins.set_headers)
        if outcome.reasoning is not None:
            metadata["reasoning"] = outcome.reasoning
        request = outcome.request
        if request is not None and (request.tools or request.stores) and stream.respond_rules:
            metadata[RESPOND_KEY] = "stream" if request.stream else "json"
            metadata["api"] = request.api.value
            if request.stores:
                metadata["store"] = "true"
        if request is not None and outcome.translates:  # the answer comes back as Chat: translated back
            metadata[RESPOND_KEY] = "stream" if request.stream else "json"
            metadata["api"] = ApiKind.CHAT.value
            metadata[TRANSLATE_KEY] = "chat"
        lookup = stream.cache
        if lookup is not None and lookup.state != "off":
            metadata["cache"] = lookup.state
            if lookup.ticket is not None:
                metadata[TICKET_KEY] = lookup.ticket
                metadata[OBSERVE_KEY] = "1"
        conversation = stream.conversation
        if conversation is not None and conversation.ticket is not None:
            metadata[CONVERSATION_KEY] = conversation.ticket
            metadata[OBSERVE_KEY] = "1"
        return metadata

    def _client_headers(self, outcome: RoutingOutcome, stream: _Stream) -> dict[str, str]:
        """What the client sees: decision, model, matched signals (never the cluster); a trace on request."""
        headers = {k.lower(): v for k, v in outcome.response_headers().items() if k.lower() != vsr.CLUSTER}
        if stream.debug:
            headers[vsr.TRACE] = _trace(outcome)
        return headers

    def _log(
        self,
        stream: _Stream,
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
                "request_id": stream.request_id,
                "path": stream.path,
                "action": action,
                "status": status,
                "decision": decision,
                "model": (headers or {}).get(vsr.MODEL),
                "cluster": (headers or {}).get(vsr.CLUSTER),
                "stripped": stream.stripped or None,
                "elapsed_ms": round((time.perf_counter() - stream.started) * 1000, 3),
            },
        )


def canonical_path(raw: str) -> str:
    """The path as an upstream would resolve it: no query, percent-decoded, dot segments and
    repeated or trailing slashes removed. Envoy normalises too (see envoy_config), but the
    inference-path check must not depend on the proxy's settings."""
    path = unquote(raw.split("?", 1)[0].split("#", 1)[0])
    path = posixpath.normpath("/" + path.lstrip("/")) if path else "/"
    return "/" if path in ("", ".") else path


def _status_and_type(headers: Any) -> tuple[int, str]:
    """The upstream response's status and (lower-cased) content type, from a response-headers message."""
    status, content_type = 0, ""
    for header in headers.headers.headers:
        key = header.key.lower()
        if key == ":status":
            status = int(_value(header) or 0)
        elif key == "content-type":
            content_type = _value(header).lower()
    return status, content_type


def _ticket_of(request: Any) -> str | None:
    """The store ticket our decision wrote to the `vsr` metadata (the store routes match it)."""
    meta = request.metadata_context.filter_metadata.get(mutations.DECISION_NAMESPACE)
    ticket = meta.fields.get(TICKET_KEY) if meta is not None else None
    return ticket.string_value if ticket is not None else None


def _response_attributes(request: Any) -> tuple[int, str]:
    """The upstream response's status from the attributes the one-message store filter asks for
    (0 when absent), and an unknown content type (the store reads it from the ticket)."""
    if ATTRIBUTES not in request.attributes:
        return 0, ""
    value = request.attributes[ATTRIBUTES].fields.get(RESPONSE_CODE)
    if value is None:
        return 0, ""
    if value.HasField("number_value"):
        return int(value.number_value), ""
    text = value.string_value
    return (int(text) if text.isdigit() else 0), ""


def _value(header: Any) -> str:
    """Envoy sends header values in `raw_value` (bytes); older versions in `value`."""
    raw: bytes = header.raw_value
    return raw.decode("utf-8", "replace") if raw else str(header.value)


def _trace(outcome: RoutingOutcome) -> str:
    try:
        text = outcome.trace_header()
    except Exception:  # a trace must never break routing
        log.exception("trace_header failed")
        return "unavailable"
    return text if len(text) <= MAX_TRACE_CHARS else text[: MAX_TRACE_CHARS - 3] + "..."


def _error(status: int, message: str, error_type: str, code: str) -> Any:
    body = json.dumps(error_body(message, error_type, code), separators=(",", ":")).encode()
    return mutations.immediate(status, {"content-type": "application/json"}, body, details=code)
