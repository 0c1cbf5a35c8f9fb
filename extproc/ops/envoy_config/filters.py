"""The HTTP side: the filters before the router (client header scrubbing, ext_proc and its cache
store and tool-rules phases, the buffer), tracing, the connection manager and
the listener that carries it."""

from __future__ import annotations

from collections.abc import Sequence

from extproc import headers as vsr
from extproc.headers import CACHE_CONTROL_KEY, REQUEST_ATTRIBUTES, RESPONSE_ATTRIBUTES, SESSION_KEY
from extproc.headers import TENANT_PREFIX as TENANT_KEY_PREFIX
from extproc.ops.envoy_config.local_replies import local_reply
from extproc.ops.envoy_config.messages import duration, quiet_library_imports, socket_address, typed
from extproc.ops.envoy_config.options import (
    ACCESS_LOG_FORMAT,
    CACHE_STORE_FILTER,
    CLIENT_NAMESPACE,
    DECISION_NAMESPACE,
    EXT_PROC_CLUSTER,
    OTEL_COLLECTOR_CLUSTER,
    TOOL_RULES_FILTER,
    TRACE_CONTEXT_HEADERS,
    EnvoyOptions,
    EnvoyTracing,
    MiB,
    message_timeout_s,
)

with quiet_library_imports():
    from envoy_data_plane.envoy.config.accesslog.v3 import AccessLog
    from envoy_data_plane.envoy.config.common.mutation_rules.v3 import (
        HeaderMutation as HeaderMutationRule,
    )
    from envoy_data_plane.envoy.config.common.mutation_rules.v3 import (
        HeaderMutationRemoveOnMatch,
    )
    from envoy_data_plane.envoy.config.core.v3 import (
        DataSource,
        GrpcService,
        GrpcServiceEnvoyGrpc,
        SubstitutionFormatString,
    )
    from envoy_data_plane.envoy.config.listener.v3 import Filter, FilterChain, Listener
    from envoy_data_plane.envoy.config.route.v3 import Route, RouteConfiguration, VirtualHost
    from envoy_data_plane.envoy.config.trace.v3 import OpenTelemetryConfig, TracingHttp
    from envoy_data_plane.envoy.extensions.access_loggers.stream.v3 import StdoutAccessLog
    from envoy_data_plane.envoy.extensions.filters.http.buffer.v3 import Buffer
    from envoy_data_plane.envoy.extensions.filters.http.ext_proc.v3 import (
        ExternalProcessor,
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
    )
    from envoy_data_plane.envoy.type.matcher.v3 import StringMatcher
    from envoy_data_plane.envoy.type.v3 import HttpStatus, Percent, StatusCode


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
        message_timeout=duration(message_timeout_s(options)),
        stat_prefix="vsr",
    )
    if one:
        config.request_attributes = list(REQUEST_ATTRIBUTES)
        config.metadata_options = MetadataOptions(
            forwarding_namespaces=MetadataOptionsMetadataNamespaces(untyped=[CLIENT_NAMESPACE]),
            receiving_namespaces=MetadataOptionsMetadataNamespaces(untyped=[DECISION_NAMESPACE]),
        )
    else:
        config.allow_mode_override = True  # the server turns off body/response processing it does not need
    return HttpFilter(name="envoy.filters.http.ext_proc", typed_config=typed(config))


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
        message_timeout=duration(message_timeout_s(options)),
        stat_prefix="vsr_cache",
        metadata_options=MetadataOptions(
            forwarding_namespaces=MetadataOptionsMetadataNamespaces(untyped=[DECISION_NAMESPACE]),
        ),
    )
    return HttpFilter(name=CACHE_STORE_FILTER, typed_config=typed(config))


def tool_rules_filter(options: EnvoyOptions) -> HttpFilter:
    """The tool rules' response phase: nothing is sent by default; a respond route turns on the
    response headers and the body (buffered for JSON, streamed for SSE) for requests whose tool
    calls the policy judges. Fail closed: an answer that cannot be judged is not delivered."""
    config = ExternalProcessor(
        grpc_service=_ext_proc_service(),
        failure_mode_allow=options.failure_mode_allow,
        status_on_error=HttpStatus(code=StatusCode(options.status_on_error)),
        processing_mode=respond_mode(None),
        message_timeout=duration(message_timeout_s(options)),
        stat_prefix="vsr_tools",
        metadata_options=MetadataOptions(
            forwarding_namespaces=MetadataOptionsMetadataNamespaces(untyped=[DECISION_NAMESPACE]),
        ),
    )
    return HttpFilter(name=TOOL_RULES_FILTER, typed_config=typed(config))


def respond_mode(body: ProcessingModeBodySendMode | None) -> ProcessingMode:
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
                metadata_namespace=CLIENT_NAMESPACE, key="debug", type=ConfigValueType.STRING
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
        HttpFilter(name="envoy.filters.http.header_to_metadata", typed_config=typed(debug)),
        HttpFilter(name="envoy.filters.http.header_mutation", typed_config=typed(strip)),
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
        name="envoy.filters.http.buffer", typed_config=typed(Buffer(max_request_bytes=options.buffer_limit_bytes))
    )


def tracing_config(tracing: EnvoyTracing) -> HttpConnectionManagerTracing:
    """Envoy's OpenTelemetry tracer, exporting over OTLP/gRPC to the collector cluster."""
    return HttpConnectionManagerTracing(
        random_sampling=Percent(value=tracing.sample_percent),
        provider=TracingHttp(
            name="envoy.tracers.opentelemetry",
            typed_config=typed(
                OpenTelemetryConfig(
                    grpc_service=GrpcService(envoy_grpc=GrpcServiceEnvoyGrpc(cluster_name=OTEL_COLLECTOR_CLUSTER)),
                    service_name=tracing.service_name,
                )
            ),
        ),
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
    filters.append(HttpFilter(name="envoy.filters.http.router", typed_config=typed(RouterFilter())))
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
                typed_config=typed(
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
        address=socket_address(host, port),
        per_connection_buffer_limit_bytes=options.buffer_limit_bytes,
        filter_chains=[
            FilterChain(filters=[Filter(name="envoy.filters.network.http_connection_manager", typed_config=typed(hcm))])
        ],
    )
