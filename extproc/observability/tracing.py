"""OpenTelemetry traces of the ext_proc streams, built after the fact from what the core measured.

The core (router, signals, policy) knows nothing of OpenTelemetry; it already times what a trace
shows: `RoutingOutcome.timings_ms` (parse, signals, decide, total) and each signal's
`SignalResult.latency_ms`. While tracing is on, the servicer keeps a `StreamTrace` per stream
(the start time, the W3C trace context it found, when it called the router, the outcome). Once the
decision has been sent to Envoy, `StreamTracer.decided` starts the stream's span and lays out the
router's spans with explicit times (off the request's latency; the outcome, which holds the
request body, is let go then rather than kept while a three-message stream waits for the upstream);
`StreamTracer.finish` ends the stream's span when the stream closes:

    envoy.service.ext_proc.v3.ExternalProcessor/Process    SERVER span: the stream, first message to close
      vsr.parse
      vsr.signals
        vsr.signal <name>      one per signal result; starts with the stage, lasts the signal's latency
      vsr.decide
      ...                      later stages: see STAGES and StreamTrace.add_span

The parent comes from W3C `traceparent` / `tracestate`, first found of: the gRPC metadata of the
`Process` call (Envoy puts its own ext_proc span there when Envoy traces), else what the client
sent (the request headers in the three-message flow; the `vsr.request` metadata in the one-message
flow when Envoy's config copies them there). Nothing found: the stream starts a trace.

Attributes hold the decision and facts about it (decision, action, model, cluster, policy version,
status, signal statuses and scores), never request content: no text, no image bytes, no signal
evidence, no error messages (they may quote the request).

OpenTelemetry is imported by `build_tracer` only when `tracing.enabled` is set; with tracing off
the servicer holds no tracer and this module's hooks are never reached.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extproc.observability.row import DecisionRow
from extproc.outcome import RoutingOutcome
from extproc.policy.conditions import Tri

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

    from extproc.settings import TracingSettings

log = logging.getLogger("extproc.tracing")

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
TRACE_HEADERS = frozenset((TRACEPARENT, TRACESTATE))
DEFAULT_SERVICE_NAME = "vsr-extproc"
ROOT_SPAN = "envoy.service.ext_proc.v3.ExternalProcessor/Process"
# The router's stages, in the order they run, each a child span laid end to end from the moment
# the servicer called the router. A stage the router adds to `timings_ms` (e.g. "cache" for a
# semantic cache lookup) gets its span by being listed here in its place.
STAGES: tuple[str, ...] = ("parse", "signals", "decide")
Attributes = dict[str, str | bool | int | float | list[str]]


@dataclass(slots=True)
class ExtraSpan:
    """A span the servicer adds for work outside the router (cache, response rules): perf_counter times."""

    name: str
    start: float
    end: float
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class StreamTrace:
    """What one stream's spans are built from; filled by the servicer while tracing is on."""

    started: float  # perf_counter at the first message
    started_ns: int  # the wall clock then, in ns (span timestamps)
    envoy_context: dict[str, str] = field(default_factory=dict)  # from the gRPC metadata
    client_context: dict[str, str] = field(default_factory=dict)  # from request headers / vsr.request metadata
    flow: str = "one_message"
    route_started: float | None = None
    outcome: RoutingOutcome | None = None  # set at the decision, cleared once its spans are made
    failure: str | None = None  # not_ready / internal_error: the router gave no outcome
    extra: list[ExtraSpan] = field(default_factory=list)
    root: Span | None = None  # the stream's span, once started

    def client_header(self, name: str, value: str) -> None:
        """A W3C trace header the client sent (`name` lower-case)."""
        if value:
            self.client_context[name] = value

    def read_metadata(self, fields: Mapping[str, Any]) -> None:
        """The trace headers Envoy copied into the `vsr.request` metadata (a protobuf Struct's fields)."""
        for name in TRACE_HEADERS:
            value = fields.get(name)
            if value is not None:
                self.client_header(name, value.string_value)

    def add_span(self, name: str, start: float, end: float, attributes: Attributes | None = None) -> None:
        """The hook for later stages the servicer runs itself (a cache lookup, response rules)."""
        self.extra.append(ExtraSpan(name, start, end, attributes or {}))

    def carrier(self) -> dict[str, str]:
        """Envoy's context when it sent one (a child of the client's, when Envoy traces), else the client's."""
        return self.envoy_context if TRACEPARENT in self.envoy_context else self.client_context


class StreamTracer:
    """Turns finished `StreamTrace`s into spans on an OpenTelemetry tracer."""

    def __init__(self, tracer: Tracer, shutdown: Callable[[], None] | None = None) -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._tracer = tracer
        self._shutdown = shutdown
        self._extract = TraceContextTextMapPropagator().extract
        self._in_span = trace.set_span_in_context
        self._server = trace.SpanKind.SERVER
        self._status = trace.Status
        self._error = trace.StatusCode.ERROR

    # -- the servicer's side ----------------------------------------------------------------
    def begin(self, context: Any) -> StreamTrace:
        """A stream's first message arrived: note the time and the context Envoy's gRPC call carried."""
        stream = StreamTrace(started=time.perf_counter(), started_ns=time.time_ns())
        metadata: Iterable[Any] | None = None
        if context is not None:
            try:
                metadata = context.invocation_metadata()
            except Exception:  # a context without metadata (a test double): no Envoy context
                metadata = None
        for item in metadata or ():
            key, value = item[0], item[1]
            if key in TRACE_HEADERS and isinstance(value, str) and value:
                stream.envoy_context[key] = value
        return stream

    def decided(self, stream: StreamTrace, *, path: str, request_id: str | None) -> None:
        """The decision went out: start the stream's span and emit the router's spans under it, then
        drop the outcome. Never raises (a trace must not break a request)."""
        outcome, stream.outcome = stream.outcome, None
        try:
            root = self._start_root(stream, path, request_id)
            if outcome is not None and root.is_recording():
                root.set_attributes(_outcome_attributes(outcome))
                if outcome.status >= 500:
                    root.set_status(self._status(self._error, f"status {outcome.status}"))
                self._children(root, outcome, stream.route_started or stream.started, stream)
        except Exception:
            log.exception("could not record the trace of a stream")

    def finish(self, stream: StreamTrace, *, path: str, request_id: str | None) -> None:
        """The stream closed: end its span (starting it if no decision did). Never raises."""
        ended = time.perf_counter()
        try:
            if stream.outcome is not None:
                self.decided(stream, path=path, request_id=request_id)
            root = stream.root or self._start_root(stream, path, request_id)
            if root.is_recording():
                if stream.failure is not None:
                    root.set_attribute("vsr.failure", stream.failure)
                    root.set_status(self._status(self._error, stream.failure))
                inside = self._in_span(root)
                for extra in stream.extra:
                    span = self._tracer.start_span(
                        extra.name, context=inside, attributes=extra.attributes, start_time=_ns(stream, extra.start)
                    )
                    span.end(end_time=_ns(stream, extra.end))
            root.end(end_time=_ns(stream, ended))
        except Exception:
            log.exception("could not record the trace of a stream")

    def shutdown(self) -> None:
        """Flush what is queued and stop exporting (at server stop; blocks, so call it off the loop)."""
        if self._shutdown is not None:
            self._shutdown()

    # -- spans ------------------------------------------------------------------------------
    def _start_root(self, stream: StreamTrace, path: str, request_id: str | None) -> Span:
        """The stream's SERVER span, from its first message, under the context found (if any)."""
        carrier = stream.carrier()
        parent: Context | None = self._extract(carrier) if carrier else None
        root = self._tracer.start_span(ROOT_SPAN, context=parent, kind=self._server, start_time=stream.started_ns)
        if root.is_recording():  # not sampled: no attributes to build
            root.set_attributes(_stream_attributes(stream, path, request_id))
        stream.root = root
        return root

    def _children(self, root: Span, outcome: RoutingOutcome, route_started: float, stream: StreamTrace) -> None:
        def ns(t: float) -> int:
            return _ns(stream, t)

        inside = self._in_span(root)
        timings = outcome.timings_ms
        if STAGES[0] not in timings:  # the request failed before the stages (malformed body, ...)
            span = self._tracer.start_span("vsr.route", context=inside, start_time=ns(route_started))
            span.end(end_time=ns(route_started + timings.get("total", 0.0) / 1000.0))
            return
        at = route_started
        for stage in STAGES:
            if stage not in timings:
                continue
            end = at + timings[stage] / 1000.0
            span = self._tracer.start_span(
                f"vsr.{stage}", context=inside, attributes=_stage_attributes(stage, outcome), start_time=ns(at)
            )
            if stage == "signals":
                self._signal_spans(span, outcome, at, ns)
            span.end(end_time=ns(end))
            at = end
        if outcome.cache is not None and "cache" in timings:  # the semantic cache's lookup, after decide
            attributes: Attributes = {"vsr.cache.state": str(outcome.cache.get("state"))}
            if outcome.cache.get("reason"):
                attributes["vsr.cache.reason"] = str(outcome.cache["reason"])
            if outcome.cache.get("similarity") is not None:
                attributes["vsr.cache.similarity"] = float(outcome.cache["similarity"])
            span = self._tracer.start_span("vsr.cache", context=inside, attributes=attributes, start_time=ns(at))
            span.end(end_time=ns(at + timings["cache"] / 1000.0))

    def _signal_spans(self, stage: Span, outcome: RoutingOutcome, start: float, ns: Callable[[float], int]) -> None:
        inside = self._in_span(stage)
        begun = ns(start)
        for result in outcome.signals:
            span = self._tracer.start_span(
                f"vsr.signal {result.name}",
                context=inside,
                attributes={
                    "vsr.signal.name": result.name,
                    "vsr.signal.type": result.type,
                    "vsr.signal.status": result.status.value,
                    "vsr.signal.score": float(result.score),
                    "vsr.signal.latency_ms": float(result.latency_ms),
                },
                start_time=begun,
            )
            span.end(end_time=begun + int(result.latency_ms * 1e6))


def _ns(stream: StreamTrace, t: float) -> int:
    """A perf_counter time of this stream as a span timestamp (ns since the epoch)."""
    return stream.started_ns + int((t - stream.started) * 1e9)


def _stream_attributes(stream: StreamTrace, path: str, request_id: str | None) -> Attributes:
    attributes: Attributes = {
        "rpc.system": "grpc",
        "rpc.service": "envoy.service.ext_proc.v3.ExternalProcessor",
        "rpc.method": "Process",
        "vsr.flow": stream.flow,
    }
    if path:
        attributes["vsr.api_path"] = path
    if request_id:
        attributes["vsr.request_id"] = request_id  # Envoy's x-request-id: joins the access and decision logs
    return attributes


def _outcome_attributes(outcome: RoutingOutcome) -> Attributes:
    row = DecisionRow.of(outcome)  # the facts the log and the console write, under span names
    attributes: Attributes = {
        "vsr.policy_version": outcome.policy_version,
        "vsr.action": row.action,
        "vsr.decision": row.decision or "none",
        "vsr.status": row.status,
        "vsr.model": row.model or "none",
        "vsr.signals.matched": row.matched,
    }
    if outcome.model is not None:
        attributes["vsr.cluster"] = outcome.model.cluster
    code = outcome.code or row.error  # a reject's code too (e.g. overloaded), not only an error's
    if code:
        attributes["vsr.error_code"] = code
    if row.overload is not None:  # vsr.shed or vsr.fail_safe
        attributes[f"vsr.{row.overload}"] = True
    return attributes


def _stage_attributes(stage: str, outcome: RoutingOutcome) -> Attributes:
    if stage == "signals":
        return {"vsr.signals.count": len(outcome.signals)}
    if stage == "decide":
        return {
            "vsr.decision": outcome.decision or "none",
            "vsr.action": outcome.action,
            "vsr.decisions.unknown": [t.name for t in outcome.trace if t.value is Tri.UNKNOWN],
        }
    return {}


# -- set-up -----------------------------------------------------------------------------------


def build_tracer(settings: TracingSettings, *, exporter: SpanExporter | None = None) -> StreamTracer | None:
    """The stream tracer `settings` ask for; None when tracing is off (and nothing of OpenTelemetry
    is imported). `exporter` replaces the configured one (tests: an in-memory exporter, exported
    synchronously). The SDK reads the standard OTEL_* variables (endpoint, headers, timeouts,
    resource attributes, OTEL_TRACES_SAMPLER); what the settings name explicitly wins."""
    if not settings.enabled:
        return None
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    resource = Resource.create({SERVICE_NAME: settings.service_name} if settings.service_name else {})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):  # neither set nor in env
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    sampler = ParentBased(TraceIdRatioBased(settings.sample_ratio)) if settings.sample_ratio is not None else None
    provider = TracerProvider(resource=resource, sampler=sampler)
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        configured = _exporter(settings)
        if configured is not None:
            provider.add_span_processor(BatchSpanProcessor(configured))
    from extproc import __version__

    tracer = provider.get_tracer("extproc", __version__)
    log.info(
        "tracing on",
        extra={"exporter": settings.exporter, "endpoint": settings.endpoint, "sample_ratio": settings.sample_ratio},
    )
    return StreamTracer(tracer, shutdown=provider.shutdown)


def _exporter(settings: TracingSettings) -> SpanExporter | None:
    kind = settings.exporter
    if kind == "none":
        return None
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if kind == "otlp_http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter(endpoint=settings.endpoint)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    return GrpcExporter(endpoint=settings.endpoint)
