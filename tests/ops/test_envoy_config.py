"""The checked-in Envoy files equal a fresh render, and Envoy itself accepts them."""

from __future__ import annotations

import subprocess
import sys
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


def test_the_demo_headers_reach_only_demo_upstreams() -> None:
    full, _ = render(POLICY, EnvoyOptions(), {"general": "vllm.internal:8000"})
    routes = yaml.safe_load(full)["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"][
        "route_config"
    ]["virtual_hosts"][0]["routes"]
    for route in routes:
        cluster = route["route"]["cluster"]
        if cluster == "general":
            assert route["request_headers_to_remove"] == ["x-demo-reply", "x-demo-error"], route["name"]
        elif cluster == "code_security":
            assert "request_headers_to_remove" not in route, route["name"]  # a loopback demo upstream


def _message_timeouts(full: str) -> set[str]:
    doc = yaml.safe_load(full)
    filters = doc["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"]
    return {f["typed_config"]["message_timeout"] for f in filters if "message_timeout" in f.get("typed_config", {})}


def test_the_message_timeout_is_sized_from_the_servers_deadline() -> None:
    from extproc.ops.envoy_config import ANSWER_MARGIN_S, DEFAULT_REQUEST_DEADLINE_MS

    # Default: the server's default deadline plus the margin, on every ext_proc filter.
    assert _message_timeouts(render(POLICY)[0]) == {f"{DEFAULT_REQUEST_DEADLINE_MS / 1000 + ANSWER_MARGIN_S:g}s"}
    # A longer deadline moves Envoy's timeout with it.
    assert _message_timeouts(render(POLICY, EnvoyOptions(request_deadline_ms=9000))[0]) == {f"{9 + ANSWER_MARGIN_S:g}s"}
    # An explicit timeout that leaves the margin is kept; one that does not is refused, by name.
    assert _message_timeouts(render(POLICY, EnvoyOptions(message_timeout_s=20.0))[0]) == {"20s"}
    with pytest.raises(ValueError, match=r"message timeout 5 s leaves 1 s past the server's request deadline"):
        render(POLICY, EnvoyOptions(message_timeout_s=5.0, request_deadline_ms=4000))
    with pytest.raises(ValueError, match=r"dispatch\.request_deadline_ms 9000"):
        render(POLICY, EnvoyOptions(message_timeout_s=10.0, request_deadline_ms=9000))
    # Only a test of Envoy's own timeout may render a shorter one, and says so.
    short = EnvoyOptions(message_timeout_s=0.02, allow_short_message_timeout=True)
    assert _message_timeouts(render(POLICY, short)[0]) == {"0.020s"}


def test_the_stack_and_the_cli_size_it_from_the_servers_own_settings(tmp_path: Path) -> None:
    from extproc.ops.stack import Stack, StackConfig

    from_env = Stack(StackConfig(policy=POLICY, env={"VSR_DISPATCH__REQUEST_DEADLINE_MS": "2500"}))
    assert from_env.envoy_options().request_deadline_ms == 2500
    assert _message_timeouts(render(POLICY, from_env.envoy_options())[0]) == {"4.500s"}
    settings = tmp_path / "settings.yaml"
    settings.write_text("dispatch: {request_deadline_ms: 7000}\n")
    from_file = Stack(StackConfig(policy=POLICY, settings_file=settings))
    assert from_file.envoy_options().request_deadline_ms == 7000
    # The server would be refused its deadline: the stack refuses before starting anything.
    too_short = Stack(StackConfig(policy=POLICY, envoy=EnvoyOptions(message_timeout_s=3.0)))
    with pytest.raises(ValueError, match="needs at least"):
        render(POLICY, too_short.envoy_options())

    env = {"PATH": "/usr/bin:/bin", "VSR_DISPATCH__REQUEST_DEADLINE_MS": "1500", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "extproc", "envoy-config", "--policy", str(POLICY), "--stdout"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert _message_timeouts(proc.stdout) == {"3.500s"}


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
