"""The ext_proc servicer: reads Envoy's stream and hands each message to its phase's handler.

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
one `ProcessingResponse`.

The handlers, each with its own state per stream:

- `request_phase.RequestPhase` (`stream_state.RequestState`): the request headers and body,
  the decision, the cache lookup, and the answer that carries the outcome;
- `response_tools.ResponseTools` (`ToolsState`): the response headers and body, judged by the
  tool rules (and the three-message flow's headers for the client); MCP requests;
- `response_store.ResponseStore` (`StoreState`): the store phase, a second ext_proc filter in
  observability mode that streams the upstream's answer for the cache and the conversation
  store without waiting for answers; the stream ends once neither wants more of it.

This module knows no policy and no cache: it owns the backends the handlers read (swapped while
serving: a policy reload, the cache opened after start), counts the streams in flight, times each
phase and keeps each stream's trace.

Tracing (`tracer`, None unless `tracing.enabled`): a stream keeps a `StreamTrace` (its start, the W3C
context from the call's gRPC metadata, the request headers or the `vsr.request` metadata, the
outcome); the router's spans are built right after the decision is sent, and the stream's span ends
with the stream (`extproc.observability.tracing`). Off, every hook is one `is None` test.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Collection
from typing import TYPE_CHECKING, Any

from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc

from extproc.protocol.formats import API_PATHS
from extproc.server import mutations
from extproc.server.loop_lag import LoopLag
from extproc.server.request_phase import RequestPhase
from extproc.server.response_store import ResponseStore, StoreState
from extproc.server.response_tools import ResponseTools, ToolsState
from extproc.server.stream_state import RequestState

if TYPE_CHECKING:
    from extproc.cache.service import SemanticCache
    from extproc.conversations.service import Conversations
    from extproc.fleet.state import Fleet
    from extproc.observability.observer import Observer
    from extproc.observability.tracing import StreamTracer
    from extproc.router import Router


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
        # The backends (`stream_state.Backends`), read by the handlers on every message.
        self.router = router  # None until the policy and models are loaded (health: NOT_SERVING)
        self.inference_paths = frozenset(inference_paths)
        self.debug_headers = debug_headers
        self.observer = observer  # metrics and the decision log; None: nothing recorded
        self.cache = cache  # the semantic cache; None: no lookups, no stores
        self.shed_wait_s = shed_wait_s  # a message read later than this after it arrived is shed; 0: never
        self.conversations = conversations  # conversations kept on their model; None: off
        self.fleet: Fleet | None = None  # what the store phase reports answers to (model selection)
        self.tracer = tracer  # OpenTelemetry spans per stream; None: no trace state at all
        # How late the loop runs (started by the server): a message has waited about that long
        # already when it is read, so its request deadline counts from then (server/loop_lag.py).
        self.loop_lag = LoopLag()
        self.in_flight = 0
        self.on_idle: Callable[[], None] | None = None  # called when the last stream in flight ends
        self.response_tools = ResponseTools(self)
        self.request_phase = RequestPhase(self, self.response_tools)
        self.response_store = ResponseStore(self)

    async def Process(self, request_iterator: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        stream = RequestState()
        tools: ToolsState | None = None
        store: StoreState | None = None
        self.in_flight += 1
        observer = self.observer
        tracer = self.tracer
        try:
            async for request in request_iterator:
                phase = request.WhichOneof("request") or ""
                if request.observability_mode:  # the store phase: Envoy expects no answer
                    if store is None:
                        store = StoreState()
                    if self.response_store.observe(request, phase, store):
                        # Close the stream now: Envoy would hold it open for its deferred-close
                        # timeout (5 s), and thousands of idle streams cost memory and GC time.
                        return
                    continue
                started = time.perf_counter()
                stream.received = time.monotonic() - self.loop_lag.estimate()
                if not stream.started:
                    self._begin(request, phase, stream, started, context)
                if phase == "request_headers":
                    response = await self.request_phase.headers(request.request_headers, stream)
                elif phase == "request_body":
                    response = await self.request_phase.body(request.request_body, stream)
                elif phase == "response_headers":
                    tools = ToolsState()
                    response = self.response_tools.headers(request, stream, tools)
                elif phase == "response_body":
                    if tools is None:
                        tools = ToolsState()
                    response = await self.response_tools.body(request.response_body, stream, tools)
                else:
                    response = mutations.continue_phase(phase)
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
            if self.in_flight == 0 and not self.response_store.pending and self.on_idle is not None:
                self.on_idle()

    def _begin(self, request: Any, phase: str, stream: RequestState, started: float, context: Any) -> None:
        """A stream's first message: its start, its trace, and (one message) the request's attributes."""
        stream.started = started
        if self.tracer is not None:
            stream.trace = self.tracer.begin(context)
            stream.trace.flow = "three_messages" if phase == "request_headers" else "one_message"
        if phase != "request_headers":  # the one-message flow: what the headers would have said
            self.request_phase.read_attributes(request, stream)
