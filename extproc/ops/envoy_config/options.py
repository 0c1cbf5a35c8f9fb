"""What a rendered Envoy config is made of: its names (clusters, filters, metadata namespaces),
the upstreams it routes to, and the options that shape it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from extproc import headers as vsr
from extproc.headers import CLIENT_NAMESPACE as CLIENT_NAMESPACE  # the wire contract: one definition
from extproc.headers import DECISION_NAMESPACE as DECISION_NAMESPACE
from extproc.protocol.formats import API_PATHS
from extproc.settings import DispatchSettings

CLUSTER_HEADER = vsr.CLUSTER
EXT_PROC_CLUSTER = "extproc"
OTEL_COLLECTOR_CLUSTER = "otel_collector"  # EnvoyOptions.tracing: where Envoy exports its spans
TRACE_CONTEXT_HEADERS = ("traceparent", "tracestate")  # W3C trace context
# Inference requests ext_proc did not decide (no body, so Envoy never called it) are routed
# here: a cluster with no hosts, whose "no healthy upstream" reply becomes a 400 (local_reply).
UNDECIDED_CLUSTER = "vsr_undecided"
# The semantic cache's store phase: a second ext_proc filter, enabled only on store routes.
CACHE_STORE_FILTER = "vsr.cache_store"
TOOL_RULES_FILTER = "vsr.tool_rules"  # the tool rules' response phase, enabled only on respond routes
DEMO_REPLY_HEADER = "x-demo-reply"  # scripts the demo upstream's answer; removed on routes to real servers
DEMO_ERROR_HEADER = "x-demo-error"  # scripts a demo upstream failure; removed the same way
DEMO_HEADERS = [DEMO_REPLY_HEADER, DEMO_ERROR_HEADER]
MiB = 1024 * 1024
UPSTREAM_HEALTH_PATH = "/health"  # vLLM's health endpoint: 200 once the engine serves
# The inference paths (as `protocol.formats.API_PATHS`), with any trailing slashes: after Envoy's
# own path normalisation these are every spelling an upstream would serve as an inference call.
INFERENCE_PATH_REGEX = "^(" + "|".join(re.escape(p) for p in API_PATHS) + ")/*$"
Flow = Literal["one_message", "three_messages"]
ACCESS_LOG_FORMAT = (
    '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% '
    "%RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION%ms "
    'cluster=%UPSTREAM_CLUSTER% decision=%REQ(X-VSR-DECISION)% model=%REQ(X-VSR-MODEL)% id="%REQ(X-REQUEST-ID)%"\n'
)


@dataclass(frozen=True, slots=True)
class Upstream:
    """One Envoy cluster serving one or more policy models."""

    cluster: str
    host: str
    port: int
    models: tuple[str, ...] = ()  # the policy models it serves; for an MCP server, its name
    kind: Literal["model", "mcp", "failover"] = "model"
    # A failover aggregate: its member clusters, in priority order (host and port: the first's).
    members: tuple[str, ...] = ()

    @property
    def demo(self) -> bool:
        """On loopback: a demo server (make run, tests), which may be scripted by x-demo-reply."""
        return self.host in ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True, slots=True)
class EnvoyTracing:
    """Envoy's own tracing (OpenTelemetry tracer, OTLP/gRPC to a collector). With it on, Envoy
    continues a client's `traceparent` (or starts a trace), and its ext_proc filter opens a child
    span for the gRPC stream and sends its context to the server as `traceparent` metadata; the
    server's spans (settings `tracing`) then hang under it."""

    collector_host: str = "127.0.0.1"
    collector_port: int = 4317  # OTLP/gRPC
    service_name: str = "envoy"
    sample_percent: float = 100.0  # of requests without a sampled parent (a client's sampled flag wins)


DEFAULT_REQUEST_DEADLINE_MS = float(DispatchSettings.model_fields["request_deadline_ms"].default)
# What Envoy's message timeout allows past the server's request deadline. The deadline counts from
# the message's arrival at the servicer; the margin covers the rest: the body's transfer both ways,
# the decision and body rewrite after the signals, and the event loop running late when the host's
# cores are busy (bench/load.py --short --busy-cores 2: the 1 s margin of a 4 s deadline under a
# 5 s timeout let image and text requests reach Envoy's 504).
ANSWER_MARGIN_S = 2.0


def message_timeout_s(options: EnvoyOptions) -> float:
    """The ext_proc message timeout to render: the server's deadline plus the answer margin, or the
    explicit value once checked to leave that margin (ValueError otherwise)."""
    deadline_s = options.request_deadline_ms / 1000.0
    if options.message_timeout_s is None:
        return deadline_s + ANSWER_MARGIN_S
    if options.message_timeout_s < deadline_s + ANSWER_MARGIN_S and not options.allow_short_message_timeout:
        raise ValueError(
            f"ext_proc message timeout {options.message_timeout_s:g} s leaves "
            f"{options.message_timeout_s - deadline_s:g} s past the server's request deadline "
            f"(dispatch.request_deadline_ms {options.request_deadline_ms:g}); it needs at least "
            f"{ANSWER_MARGIN_S:g} s, or Envoy answers 504 before the server can shed or route fail-safe"
        )
    return options.message_timeout_s


@dataclass(frozen=True, slots=True)
class EnvoyOptions:
    listener_host: str = "127.0.0.1"
    listener_port: int = 8801
    admin_host: str = "127.0.0.1"
    admin_port: int = 9901
    ext_proc_host: str = "127.0.0.1"
    ext_proc_port: int = 50051
    # Buffer for the whole request body (Envoy buffers it for the ext_proc body phase): a
    # 16 MB image is ~21.3 MB of base64, so 24 MiB of body plus headroom; larger gets 413.
    buffer_limit_bytes: int = 26 * MiB
    # Per ext_proc message: how long Envoy waits for the server's answer before its 504. The server
    # answers first, by its own request deadline (shed 429 or fail-safe route); None: that deadline
    # plus ANSWER_MARGIN_S. A value given here must leave that margin (render refuses it otherwise).
    message_timeout_s: float | None = None
    # The server's dispatch.request_deadline_ms, which the message timeout is sized from (the stack
    # and `extproc envoy-config` pass the server's own setting).
    request_deadline_ms: float = DEFAULT_REQUEST_DEADLINE_MS
    # Render a message timeout shorter than that (only to test what Envoy does when it fires).
    allow_short_message_timeout: bool = False
    route_timeout_s: float = 300.0  # generations can be long; 0 disables
    max_downstream_connections: int = 50_000
    failure_mode_allow: bool = False
    status_on_error: int = 503
    health_check: bool = True
    access_log: bool = True
    extra_clusters: tuple[Any, ...] = field(default_factory=tuple)
    # one_message: Envoy strips client x-vsr-* headers itself and sends ext_proc only the buffered
    # body of inference requests; the decision comes back as dynamic metadata. three_messages: the
    # earlier flow (request headers, body, response headers), kept for comparison and old configs.
    flow: Flow = "one_message"
    plugin_headers: tuple[str, ...] = ()  # the policy's `set_headers` names, copied from metadata
    # Off by default (None). Set: Envoy traces requests and exports to the collector cluster.
    tracing: EnvoyTracing | None = None
    # One-message flow: copy a client's traceparent/tracestate into the vsr.request metadata sent to
    # the server (its spans join the client's trace without Envoy's tracing); the headers stay. On by
    # default, so that a server traced through the OTEL_* variables joins the caller's trace with no
    # render option; a request without the headers costs nothing (the rule matches no header).
    forward_trace_context: bool = True
    # One-message flow: the semantic cache's store phase (a second ext_proc filter in observability
    # mode, on routes whose decision metadata carries a store ticket) and the request headers that
    # key a tenant's cache partition (copied, never moved, into the vsr.request metadata).
    cache: bool = True
    tenant_headers: tuple[str, ...] = ("authorization", "x-api-key")  # x-api-key: Anthropic clients' key
    # One-message flow: the tool rules' response phase (a third ext_proc filter, enabled on routes
    # whose decision asks for it) and the MCP path (routes to the policy's MCP servers).
    tool_rules: bool = True
    mcp_path: str = "/mcp"
    # The policy's conversations.session_header, copied (not moved) into vsr.request metadata.
    session_header: str | None = None
    # Model upstreams: active health checks (GET /health) and outlier detection (clusters.py).
    upstream_health: bool = True
    upstream_health_interval_s: float = 5.0
