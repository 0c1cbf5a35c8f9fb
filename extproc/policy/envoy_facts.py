"""What of a policy the rendered Envoy config depends on, so a hot reload can tell when Envoy's
config is stale: the model and MCP clusters (and their addresses), the headers decisions set (the
routes copy them), the session header (the filter copies it for the server). The default
decision's first cluster also serves requests the router does not route, but a reorder there
keeps every cluster Envoy knows valid, so it is not reported. A reload that changes none of these
needs nothing from Envoy; one that changes any is applied, and says what Envoy still lacks until
`extproc envoy-config` is rendered again."""

from __future__ import annotations

from typing import Any

from extproc.policy.schema import Policy


def envoy_facts(policy: Policy) -> dict[str, Any]:
    decisions: list[Any] = [*policy.decisions, policy.default]
    return {
        "model clusters": sorted({(m.cluster, m.address or "") for m in policy.models}),
        "MCP clusters": sorted({(s.cluster, s.address or "") for s in policy.mcp.servers}),
        "MCP path": policy.mcp.path if policy.mcp.servers else None,
        "headers set by decisions": sorted({name for d in decisions for name in d.plugins.set_headers}),
        "session header": policy.conversations.session_header if policy.conversations.enabled else None,
    }


def envoy_changes(old: Policy, new: Policy) -> list[str]:
    """One line per Envoy-facing fact that differs, saying what it was and what it is."""
    before, after = envoy_facts(old), envoy_facts(new)
    out = []
    for key, value in after.items():
        if before[key] != value:
            out.append(f"{key}: {_show(before[key])} -> {_show(value)}")
    return out


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(":".join(x for x in v if x) if isinstance(v, tuple) else str(v) for v in value) + "]"
    return "none" if value is None else str(value)
