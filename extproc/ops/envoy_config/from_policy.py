"""What the Envoy config reads from a policy file: its model and MCP upstreams, the headers its
decisions set, the session header and the default cluster. Only those keys are read, so a policy
whose signals need models not installed here can still be rendered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from extproc.ops.envoy_config.options import Upstream


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


def failover_upstreams(policy_path: Path | str, upstreams: Sequence[Upstream]) -> list[Upstream]:
    """The failover aggregates the policy's routes need: for every route whose `selection` says
    `failover: true`, one aggregate per ordered pair of its models' distinct clusters (the router
    names `primary__or__fallback`, the chosen model's cluster and the next capable one's)."""
    from extproc.policy.selection import failover_cluster

    data = yaml.safe_load(Path(policy_path).read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        return []
    cluster_of = {str(m["name"]): str(m.get("cluster") or m["name"]) for m in data.get("models") or [] if "name" in m}
    by_cluster = {u.cluster: u for u in upstreams}
    listed = data.get("decisions")
    rules: list[Any] = [*(listed if isinstance(listed, list) else []), data.get("default")]
    pairs: dict[str, Upstream] = {}
    for rule in rules:
        action = rule.get("action") if isinstance(rule, dict) else None
        selection = action.get("selection") if isinstance(action, dict) else None
        if not isinstance(action, dict) or not isinstance(selection, dict) or not selection.get("failover"):
            continue
        clusters = list(dict.fromkeys(cluster_of[m] for m in action.get("models") or [] if m in cluster_of))
        for primary in clusters:
            for fallback in clusters:
                first = by_cluster.get(primary)
                if primary == fallback or first is None or fallback not in by_cluster:
                    continue
                name = failover_cluster(primary, fallback)
                pairs[name] = Upstream(
                    cluster=name,
                    host=first.host,
                    port=first.port,
                    kind="failover",
                    members=(primary, fallback),
                )
    return list(pairs.values())
