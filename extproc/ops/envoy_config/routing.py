"""The routes, in match order: per model cluster, one route per combination of what the decision
asks for, matching the `vsr` metadata only ext_proc writes; the MCP servers'; GET /v1/models; the
undecided inference requests; the fallback, which skips ext_proc."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from extproc import headers as vsr
from extproc.headers import OBSERVE_KEY, RESPOND_KEY, TRANSLATE_KEY
from extproc.ops.envoy_config.filters import respond_mode
from extproc.ops.envoy_config.messages import duration, quiet_library_imports, typed
from extproc.ops.envoy_config.options import (
    CACHE_STORE_FILTER,
    CLUSTER_HEADER,
    DECISION_NAMESPACE,
    DEMO_HEADERS,
    INFERENCE_PATH_REGEX,
    TOOL_RULES_FILTER,
    UNDECIDED_CLUSTER,
    EnvoyOptions,
    Upstream,
)
from extproc.policy.models_list import MODELS_PATH
from extproc.protocol.formats.chat import CHAT_PATH
from extproc.server.passthrough import PASSTHROUGH_PATHS

# Requests the router does not classify (embeddings, audio, ...): ext_proc reads the model they name.
PASSTHROUGH_PATH_REGEX = "^(" + "|".join(re.escape(p) for p in sorted(PASSTHROUGH_PATHS)) + ")/*$"

with quiet_library_imports():
    from envoy_data_plane.envoy.config.core.v3 import (
        HeaderValue,
        HeaderValueOption,
        HeaderValueOptionHeaderAppendAction,
    )
    from envoy_data_plane.envoy.config.route.v3 import (
        HeaderMatcher,
        RetryPolicy,
        RetryPolicyRetryPriority,
        Route,
        RouteAction,
        RouteMatch,
    )
    from envoy_data_plane.envoy.extensions.filters.http.buffer.v3 import BufferPerRoute
    from envoy_data_plane.envoy.extensions.filters.http.ext_proc.v3 import (
        ExtProcOverrides,
        ExtProcPerRoute,
        ProcessingMode,
        ProcessingModeBodySendMode,
        ProcessingModeHeaderSendMode,
    )
    from envoy_data_plane.envoy.extensions.retry.priority.previous_priorities.v3 import PreviousPrioritiesConfig
    from envoy_data_plane.envoy.type.matcher.v3 import (
        MetadataMatcher,
        MetadataMatcherPathSegment,
        RegexMatchAndSubstitute,
        RegexMatcher,
        StringMatcher,
        ValueMatcher,
    )
    from envoy_data_plane.google.protobuf import Any as AnyMessage


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
    inference = RouteMatch(
        safe_regex=RegexMatcher(regex=INFERENCE_PATH_REGEX),
        headers=[HeaderMatcher(name=":method", string_match=StringMatcher(exact="POST"))],
    )
    off = {**_no_cache_store(options), **_no_tool_rules(options)}
    combinations = _decision_combinations(options)
    result = [
        _decision_route(upstream, combination, inference, options)
        for upstream in upstreams
        for combination in combinations
    ]
    result.extend(_passthrough_routes(upstreams, default_cluster, options, off))
    result.extend(_mcp_routes(mcp_upstreams, options, off))
    result.append(_models_route(options, off))
    result.extend(_fallback_routes(upstreams, default_cluster, options, inference, off))
    return result


# What a decision asks of its route: (translate to Chat Completions, response phase, store phase).
Combination = tuple[bool, str | None, bool]


def _decision_combinations(options: EnvoyOptions) -> list[Combination]:
    """Every combination the options allow, in match order (the most specific first)."""
    stores = [True, False] if options.cache else [False]
    responds: list[str | None] = ["stream", "json", None] if options.tool_rules else [None]
    # A Messages request for an OpenAI-only model (vsr.translate): its own routes, first, which
    # send it to the Chat path and turn on the response phase that translates the answer back.
    translates = [True, False] if options.tool_rules else [False]
    return [
        (translate, respond, store)
        for translate in translates
        for respond in responds
        for store in stores
        if not (translate and respond is None)
    ]


def _decision_route(
    upstream: Upstream, combination: Combination, inference: RouteMatch, options: EnvoyOptions
) -> Route:
    """The route to `upstream` for decisions asking for `combination`; it copies the decision onto
    the upstream request and the client's response."""
    translate, respond, store = combination
    matchers = [_decision_is("cluster", upstream.cluster)]
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
    action = RouteAction(cluster=upstream.cluster, timeout=duration(options.route_timeout_s))
    envoy_says: list[HeaderValueOption] = []
    if upstream.kind == "failover":
        action.retry_policy = failover_retry()
        envoy_says = failover_headers()
    return Route(
        name=f"vsr-{upstream.cluster}{suffix}",
        match=RouteMatch(safe_regex=inference.safe_regex, headers=inference.headers, dynamic_metadata=matchers),
        route=_translated(action, translate),
        request_headers_to_add=[
            _from_decision(vsr.DECISION, "decision"),
            _from_decision(vsr.MODEL, "model"),
            _from_decision(vsr.REASONING, "reasoning"),
            *(_from_decision(name, f"headers:{name}") for name in options.plugin_headers),
        ],
        request_headers_to_remove=[] if upstream.demo else list(DEMO_HEADERS),
        response_headers_to_add=[
            _from_decision(vsr.DECISION, "decision"),
            _from_decision(vsr.MODEL, "model"),
            _from_decision(vsr.SIGNALS, "signals"),
            _from_decision(vsr.TRACE, "trace"),
            _from_decision(vsr.CACHE, "cache"),
            _from_decision(vsr.REASONING, "reasoning"),
            _from_decision(vsr.SELECTION, vsr.SELECTION_KEY),
            _from_decision(vsr.UNKNOWN_MODEL, vsr.UNKNOWN_MODEL_KEY),
            *envoy_says,
        ],
        typed_per_filter_config=per_filter,
    )


def failover_headers() -> list[HeaderValueOption]:
    """What Envoy tells the client of a failover route's answer: the host that answered and the
    attempts it took (2: the chosen model failed and the fallback answered). The router reads the
    same from the store phase's attributes (`upstream.address`, `upstream.request_attempt_count`)."""
    return [
        HeaderValueOption(
            header=HeaderValue(key=name, value=value),
            append_action=HeaderValueOptionHeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
            keep_empty_value=False,
        )
        for name, value in ((vsr.UPSTREAM_HOST, "%UPSTREAM_HOST%"), (vsr.ATTEMPTS, "%UPSTREAM_REQUEST_ATTEMPT_COUNT%"))
    ]


def failover_retry() -> RetryPolicy:
    """Retry a failed attempt once, on the aggregate's next priority (the fallback model's cluster).

    Why an aggregate cluster with a retry across priorities, not two routes: the retry happens
    inside Envoy on the buffered request, so the client never sees the first attempt fail; the
    aggregate also spills over without a failed attempt at all once health checks or outlier
    detection mark the primary's hosts unhealthy. Retried: connection failures, refused streams,
    resets before the answer, and 503 (vLLM's answer while it starts or sheds). Not 500/502/504:
    a request that broke one model, or timed out on it, is not worth a second generation.
    """
    return RetryPolicy(
        retry_on="connect-failure,refused-stream,reset,retriable-status-codes",
        retriable_status_codes=[503],
        num_retries=1,
        retry_priority=RetryPolicyRetryPriority(
            name="envoy.retry_priorities.previous_priorities",
            typed_config=typed(PreviousPrioritiesConfig(update_frequency=1)),
        ),
    )


def _passthrough_routes(
    upstreams: Sequence[Upstream], default_cluster: str, options: EnvoyOptions, off: Mapping[str, AnyMessage]
) -> list[Route]:
    """Embeddings, audio and the like: ext_proc reads the `model` the body names and routes to that
    policy model's cluster (`server.passthrough`), or answers 404; without its answer (unknown
    models routed on), the default cluster, as the fallback route would."""
    timeout = duration(options.route_timeout_s)
    post = [HeaderMatcher(name=":method", string_match=StringMatcher(exact="POST"))]
    out = [
        Route(
            name=f"vsr-{upstream.cluster}-passthrough",
            match=RouteMatch(
                safe_regex=RegexMatcher(regex=PASSTHROUGH_PATH_REGEX),
                headers=post,
                dynamic_metadata=[_decision_is("cluster", upstream.cluster)],
            ),
            route=RouteAction(cluster=upstream.cluster, timeout=timeout),
            request_headers_to_remove=[] if upstream.demo else list(DEMO_HEADERS),
            response_headers_to_add=[_from_decision(vsr.DECISION, "decision"), _from_decision(vsr.MODEL, "model")],
            typed_per_filter_config=dict(off),
        )
        for upstream in upstreams
        if upstream.kind == "model"
    ]
    default_is_demo = any(u.cluster == default_cluster and u.demo for u in upstreams)
    out.append(
        Route(
            name="vsr-passthrough-undecided",
            match=RouteMatch(safe_regex=RegexMatcher(regex=PASSTHROUGH_PATH_REGEX), headers=post),
            route=RouteAction(cluster=default_cluster, timeout=timeout),
            request_headers_to_remove=[] if default_is_demo else list(DEMO_HEADERS),
            typed_per_filter_config=dict(off),
        )
    )
    return out


def _fallback_routes(
    upstreams: Sequence[Upstream],
    default_cluster: str,
    options: EnvoyOptions,
    inference: RouteMatch,
    off: Mapping[str, AnyMessage],
) -> list[Route]:
    """The undecided inference requests, then every other path (which skips ext_proc)."""
    timeout = duration(options.route_timeout_s)
    # Undecided: refused (400), unless the operator chose fail-open (failure_mode_allow), which
    # sends what ext_proc could not decide, unclassified, to the default model.
    undecided = default_cluster if options.failure_mode_allow else UNDECIDED_CLUSTER
    default_is_demo = any(u.cluster == default_cluster and u.demo for u in upstreams)
    strip_demo = [] if default_is_demo else list(DEMO_HEADERS)
    return [
        Route(
            name="vsr-undecided",
            match=inference,
            route=RouteAction(cluster=undecided, timeout=timeout),
            request_headers_to_remove=strip_demo,
            typed_per_filter_config=dict(off),
        ),
        Route(
            name="passthrough",
            match=RouteMatch(prefix="/"),
            route=RouteAction(cluster=default_cluster, timeout=timeout),
            request_headers_to_remove=strip_demo,
            typed_per_filter_config={
                "envoy.filters.http.ext_proc": typed(ExtProcPerRoute(disabled=True)),
                "envoy.filters.http.buffer": typed(BufferPerRoute(disabled=True)),
                **off,
            },
        ),
    ]


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
        route=RouteAction(cluster=UNDECIDED_CLUSTER, timeout=duration(options.route_timeout_s)),
        typed_per_filter_config={
            "envoy.filters.http.ext_proc": typed(ExtProcPerRoute(overrides=ExtProcOverrides(processing_mode=mode))),
            "envoy.filters.http.buffer": typed(BufferPerRoute(disabled=True)),
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
    timeout = duration(options.route_timeout_s)
    path = HeaderMatcher(name=":method", string_match=StringMatcher(exact="POST"))
    out: list[Route] = []
    for upstream in mcp_upstreams:
        for respond in ["mcp_list", None] if options.tool_rules else [None]:
            matchers = [_decision_is("cluster", upstream.cluster)]
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
                    response_headers_to_add=[_from_decision(vsr.DECISION, "decision")],
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
                "envoy.filters.http.ext_proc": typed(ExtProcPerRoute(disabled=True)),
                "envoy.filters.http.buffer": typed(BufferPerRoute(disabled=True)),
                **off,
            },
        )
    )
    return out


def _no_tool_rules(options: EnvoyOptions) -> dict[str, AnyMessage]:
    return {TOOL_RULES_FILTER: typed(ExtProcPerRoute(disabled=True))} if options.tool_rules else {}


def _respond_override(respond: str) -> AnyMessage:
    body = ProcessingModeBodySendMode.STREAMED if respond == "stream" else ProcessingModeBodySendMode.BUFFERED
    return typed(ExtProcPerRoute(overrides=ExtProcOverrides(processing_mode=respond_mode(body))))


def _no_cache_store(options: EnvoyOptions) -> dict[str, AnyMessage]:
    """The per-route config that keeps the cache's store filter off a route."""
    return {CACHE_STORE_FILTER: typed(ExtProcPerRoute(disabled=True))} if options.cache else {}


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
    timeout = duration(options.route_timeout_s)
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
