"""The checked-in Envoy files equal a fresh render, and Envoy itself accepts them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from extproc.ops.envoy_config import (
    EnvoyOptions,
    envoy_binary,
    mcp_upstreams_from_policy,
    render,
    upstreams_from_policy,
)

REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "policies" / "default.yaml"


def envoy_validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(envoy_binary()), "--mode", "validate", "-c", str(path), "--use-dynamic-base-id", "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_checked_in_files_equal_generation() -> None:
    full, snippet = render(POLICY)
    assert (REPO / "envoy" / "envoy.yaml").read_text() == full, (
        "run: extproc envoy-config --policy policies/default.yaml"
    )
    assert (REPO / "envoy" / "ext_proc_filter.yaml").read_text() == snippet


def test_checked_in_config_passes_envoy_validate() -> None:
    proc = envoy_validate(REPO / "envoy" / "envoy.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snippet_is_the_filter_and_cluster_of_the_full_config() -> None:
    full = yaml.safe_load((REPO / "envoy" / "envoy.yaml").read_text())
    snippet = yaml.safe_load((REPO / "envoy" / "ext_proc_filter.yaml").read_text())
    hcm = full["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["http_filters"][0] == snippet["http_filters"][0]
    assert hcm["http_filters"][-1]["name"] == "envoy.filters.http.router"
    assert snippet["clusters"][0] in full["static_resources"]["clusters"]


def test_contract_values() -> None:
    full = yaml.safe_load((REPO / "envoy" / "envoy.yaml").read_text())
    listener = full["static_resources"]["listeners"][0]
    assert listener["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 8801}
    assert full["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    filters = [f["name"] for f in hcm["http_filters"]]
    assert filters == [
        "envoy.filters.http.header_to_metadata",
        "envoy.filters.http.header_mutation",
        "envoy.filters.http.ext_proc",
        "envoy.filters.http.buffer",
        "vsr.cache_store",
        "vsr.tool_rules",
        "envoy.filters.http.router",
    ]
    ext_proc = hcm["http_filters"][2]["typed_config"]
    assert ext_proc["failure_mode_allow"] is False
    mode = ext_proc["processing_mode"]
    assert (mode["request_header_mode"], mode["request_body_mode"], mode["response_header_mode"]) == (
        "SKIP",
        "BUFFERED",
        "SKIP",
    )  # one message per request: the buffered body
    assert ext_proc["metadata_options"]["receiving_namespaces"]["untyped"] == ["vsr"]
    assert listener["per_connection_buffer_limit_bytes"] >= 22 * 1024 * 1024  # a 16 MB image as base64
    clusters = {c["name"]: c for c in full["static_resources"]["clusters"]}
    assert clusters["extproc"]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"] == {
        "socket_address": {"address": "127.0.0.1", "port_value": 50051}
    }
    assert "http2_protocol_options" in str(clusters["extproc"]["typed_extension_protocol_options"])
    for upstream in upstreams_from_policy(POLICY):
        assert upstream.cluster in clusters
    routes = hcm["route_config"]["virtual_hosts"][0]["routes"]
    routed = {
        r["match"]["dynamic_metadata"][0]["value"]["string_match"]["exact"]: r["route"]["cluster"]
        for r in routes
        if "dynamic_metadata" in r["match"]
    }
    mcp_clusters = {u.cluster: u.cluster for u in mcp_upstreams_from_policy(POLICY)}
    assert mcp_clusters, "the default policy has an MCP server"
    assert routed == {**{u.cluster: u.cluster for u in upstreams_from_policy(POLICY)}, **mcp_clusters}
    # The cache's store filter: observability mode (the response passes undelayed), fail-open (a
    # store lost, never a response), only `vsr` metadata (ours) forwarded, on store routes only.
    store = hcm["http_filters"][4]["typed_config"]
    assert store["observability_mode"] is True and store["failure_mode_allow"] is True
    assert store["metadata_options"]["forwarding_namespaces"]["untyped"] == ["vsr"]
    for route in routes:
        matchers = route["match"].get("dynamic_metadata", [])
        stores = any(m["path"][0]["key"] == "observe" for m in matchers)  # a cache ticket or a conversation
        disabled = route.get("typed_per_filter_config", {}).get("vsr.cache_store", {}).get("disabled", False)
        assert stores != disabled, route["name"]
    # The tool rules' response phase: on only where the decision asks for it, in its body mode.
    tools = hcm["http_filters"][5]["typed_config"]
    assert tools["failure_mode_allow"] is False  # an answer that cannot be judged is not delivered
    assert tools["processing_mode"].get("response_body_mode", "NONE") == "NONE"
    for route in routes:
        matchers = {m["path"][0]["key"]: m for m in route["match"].get("dynamic_metadata", [])}
        per_route = route.get("typed_per_filter_config", {}).get("vsr.tool_rules", {})
        if "respond" in matchers:
            respond = matchers["respond"]["value"]["string_match"]["exact"]
            body_mode = per_route["overrides"]["processing_mode"]["response_body_mode"]
            assert body_mode == ("STREAMED" if respond == "stream" else "BUFFERED"), route["name"]
        else:
            assert per_route.get("disabled") is True, route["name"]
        if stores:  # the store route of a cluster comes before its plain route
            plain = next(i for i, r in enumerate(routes) if r["name"] == route["name"].removesuffix("-store"))
            assert routes.index(route) < plain
    for route in routes:  # no route looks at a client header other than the method
        assert all(h["name"] == ":method" for h in route["match"].get("headers", []))
    assert routes[-2]["route"]["cluster"] == "vsr_undecided"
    mcp_names = [r["name"] for r in routes if r["match"].get("path") == "/mcp"]
    assert mcp_names[-2:] == ["vsr-mcp-undecided", "vsr-mcp-session"]  # an undecided POST is refused
    fallback = routes[-1]
    assert fallback["match"] == {"prefix": "/"}
    assert fallback["typed_per_filter_config"]["envoy.filters.http.ext_proc"]["disabled"] is True


def test_overrides_point_clusters_at_real_servers(tmp_path: Path) -> None:
    full, _ = render(POLICY, EnvoyOptions(listener_port=18801), {"general": "vllm.internal:8000"})
    path = tmp_path / "envoy.yaml"
    path.write_text(full)
    clusters = {c["name"]: c for c in yaml.safe_load(full)["static_resources"]["clusters"]}
    assert clusters["general"]["type"] == "STRICT_DNS"
    proc = envoy_validate(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_policy_problems_are_clear(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("models:\n  - {name: a, cluster: ca}\n")
    with pytest.raises(ValueError, match="has no address"):
        render(policy)
    with pytest.raises(ValueError, match="unknown cluster"):
        render(POLICY, overrides={"nope": "127.0.0.1:1"})


def test_the_demo_reply_header_reaches_only_demo_upstreams() -> None:
    full, _ = render(POLICY, EnvoyOptions(), {"general": "vllm.internal:8000"})
    routes = yaml.safe_load(full)["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"][
        "route_config"
    ]["virtual_hosts"][0]["routes"]
    for route in routes:
        cluster = route["route"]["cluster"]
        if cluster == "general":
            assert route["request_headers_to_remove"] == ["x-demo-reply"], route["name"]
        elif cluster == "code_security":
            assert "request_headers_to_remove" not in route, route["name"]  # a loopback demo upstream


def test_translated_messages_and_models_routes() -> None:
    full = yaml.safe_load((REPO / "envoy" / "envoy.yaml").read_text())
    hcm = full["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    routes = hcm["route_config"]["virtual_hosts"][0]["routes"]
    names = [r["name"] for r in routes]
    translated = [r for r in routes if "-translate" in r["name"]]
    # every cluster: translate x (stream, json) x (store, no store), each before the plain routes
    assert len(translated) == 4 * len(upstreams_from_policy(POLICY))
    for route in translated:
        assert route["route"]["regex_rewrite"]["substitution"] == "/v1/chat/completions"
        keys = {m["path"][0]["key"]: m["value"] for m in route["match"]["dynamic_metadata"]}
        assert keys["translate"] == {"string_match": {"exact": "chat"}}
        assert keys["respond"]["string_match"]["exact"] in ("stream", "json")
        plain = route["name"].replace("-translate", "")
        assert names.index(route["name"]) < names.index(plain)
    models = next(r for r in routes if r["name"] == "vsr-models")
    assert models["route"]["cluster"] == "vsr_undecided"  # never forwarded to a model's server
    override = models["typed_per_filter_config"]["envoy.filters.http.ext_proc"]["overrides"]["processing_mode"]
    assert override["request_header_mode"] == "SEND"
    assert names.index("vsr-models") < names.index("passthrough")
