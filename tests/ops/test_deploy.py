"""docker/: what can be checked without a Docker engine: YAML parses, generated files are
current, Envoy accepts the configs, the manifests hang together."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from extproc.ops.deploy import compose_envoy_yaml, k8s_envoy_configmap
from extproc.ops.envoy_config import envoy_binary
from extproc.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"


def validate(path: Path) -> None:
    proc = subprocess.run(
        [str(envoy_binary()), "--mode", "validate", "-c", str(path), "--use-dynamic-base-id", "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generated_deploy_configs_are_current() -> None:
    assert (DOCKER / "envoy.yaml").read_text() == compose_envoy_yaml(), "run: extproc envoy-config --deploy"
    assert (DOCKER / "k8s" / "envoy-configmap.yaml").read_text() == k8s_envoy_configmap()


def test_envoy_accepts_compose_and_configmap_configs(tmp_path: Path) -> None:
    validate(DOCKER / "envoy.yaml")
    configmap = yaml.safe_load((DOCKER / "k8s" / "envoy-configmap.yaml").read_text())
    path = tmp_path / "envoy.yaml"
    path.write_text(configmap["data"]["envoy.yaml"])
    validate(path)


Manifests = dict[tuple[str, str], dict[str, Any]]  # (kind, name) -> document


def k8s_docs() -> Manifests:
    """The plain Kubernetes and compose deployment; the mesh variants (docker/mesh/) have their own tests."""
    docs: Manifests = {}
    for path in sorted(p for p in DOCKER.rglob("*.yaml") if "mesh" not in p.relative_to(DOCKER).parts):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc is not None, path
            if "kind" in doc:
                docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def extproc_env(docs: Manifests) -> dict[str, str]:
    container = docs[("Deployment", "extproc")]["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container.get("env", [])}


def redis_url_of(env: Mapping[str, str]) -> tuple[str, int]:
    """(host, port) of the Redis conversation store these `VSR_*` settings name, as the server reads them."""
    conf = Settings.load(None, environ=dict(env)).conversations
    assert conf.enabled and conf.backend == "redis", "the conversation store must be Redis (replicas share it)"
    url = urlsplit(conf.redis_url)
    assert url.scheme in ("redis", "rediss") and url.hostname, f"not a Redis URL: {conf.redis_url!r}"
    assert url.path in ("", "/") or url.path[1:].isdigit(), f"not a database number: {conf.redis_url!r}"
    return url.hostname, url.port or 6379


def assert_k8s_redis_wiring(docs: Manifests, namespace: str | None = None) -> None:
    """The ext_proc Deployment's Redis URL names a Service (of `namespace`) on its port, and that
    Service selects the pods of a Deployment running redis-server on the port it targets."""
    host, port = redis_url_of(extproc_env(docs))
    name, _, rest = host.partition(".")
    if rest:  # a qualified name: <service>.<namespace>[.svc...]
        assert rest.split(".")[0] == namespace, f"{host}: not in namespace {namespace!r}"
    service = docs.get(("Service", name))
    assert service is not None, f"the Redis URL names {host}, which is no Service"
    assert service["metadata"].get("namespace") == namespace
    (service_port,) = [p for p in service["spec"]["ports"] if p["port"] == port] or [None]
    assert service_port is not None, f"Service {name} has no port {port}"
    selector = service["spec"]["selector"].items()
    pods = [
        d["spec"]["template"]
        for (kind, _), d in docs.items()
        if kind == "Deployment" and selector <= d["spec"]["template"]["metadata"]["labels"].items()
    ]
    assert len(pods) == 1, f"Service {name} selects {len(pods)} Deployments"
    (container,) = pods[0]["spec"]["containers"]
    target = service_port.get("targetPort", port)
    named = {p["name"]: p["containerPort"] for p in container["ports"] if "name" in p}
    container_port = named.get(target, target)
    assert container_port in {p["containerPort"] for p in container["ports"]}, f"targetPort {target} is no port"
    command = [*container.get("command", []), *container.get("args", [])]
    assert "redis-server" in command, "the selected pods do not run redis-server"
    listens = int(command[command.index("--port") + 1]) if "--port" in command else 6379
    assert listens == container_port, f"redis-server listens on {listens}, the Service targets {container_port}"


def assert_compose_redis_wiring(compose: dict[str, Any]) -> None:
    host, port = redis_url_of(compose["services"]["extproc"]["environment"])
    service = compose["services"].get(host)
    assert service is not None, f"the Redis URL names {host}, which is no compose service"
    command = " ".join(service["command"]) if isinstance(service["command"], list) else service["command"]
    assert "redis-server" in command and "--port" not in command and port == 6379, command


def test_all_yaml_parses_and_manifests_fit_together() -> None:
    docs = k8s_docs()
    deployment = docs[("Deployment", "extproc")]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["grpc"]["port"] == 50051
    assert container["resources"]["requests"]["cpu"]
    assert docs[("Service", "extproc")]["spec"]["clusterIP"] == "None"
    assert docs[("HorizontalPodAutoscaler", "extproc")]["spec"]["scaleTargetRef"]["name"] == "extproc"
    envoy = docs[("Deployment", "envoy")]["spec"]["template"]["spec"]
    assert envoy["volumes"][0]["configMap"]["name"] == docs[("ConfigMap", "vsr-envoy")]["metadata"]["name"]

    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    assert set(compose["services"]) == {"extproc", "upstreams", "mcp", "envoy", "redis"}
    assert_compose_redis_wiring(compose)
    assert compose["services"]["envoy"]["ports"] == ["127.0.0.1:8801:8801"]


def test_k8s_extproc_uses_the_redis_service_as_its_conversation_store() -> None:
    docs = k8s_docs()
    assert_k8s_redis_wiring(docs)
    redis = docs[("Deployment", "redis")]["spec"]
    assert redis["replicas"] == 1, "one store shared by every ext_proc replica"
    assert docs[("Service", "redis")]["spec"].get("clusterIP") != "None"


def _env_set(docs: Manifests, name: str, value: str | None) -> Manifests:
    docs = copy.deepcopy(docs)
    container = docs[("Deployment", "extproc")]["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [e for e in container["env"] if e["name"] != name]
    if value is not None:
        container["env"].append({"name": name, "value": value})
    return docs


URL = "VSR_CONVERSATIONS__REDIS_URL"


@pytest.mark.parametrize(
    "broken",
    [
        lambda d: _env_set(d, URL, None),  # the default URL: 127.0.0.1, no Redis in the pod
        lambda d: _env_set(d, URL, "redis://redis-master:6379/0"),  # no such Service
        lambda d: _env_set(d, URL, "redis://redis:6380/0"),  # not the Service's port
        lambda d: _env_set(d, URL, "http://redis:6379/0"),
        lambda d: _env_set(d, URL, "redis://redis.other:6379/0"),  # another namespace
        lambda d: _env_set(d, "VSR_CONVERSATIONS__BACKEND", None),  # memory: replicas do not share
        lambda d: {k: v for k, v in d.items() if k != ("Service", "redis")},
        lambda d: {k: v for k, v in d.items() if k != ("Deployment", "redis")},
    ],
    ids=[
        "no-url",
        "wrong-host",
        "wrong-port",
        "wrong-scheme",
        "wrong-namespace",
        "no-backend",
        "no-service",
        "no-pods",
    ],
)
def test_the_redis_wiring_check_catches_a_broken_manifest(broken: Any) -> None:
    with pytest.raises(AssertionError):
        assert_k8s_redis_wiring(broken(k8s_docs()))


def test_the_redis_wiring_check_catches_a_server_on_another_port() -> None:
    docs = k8s_docs()
    container = docs[("Deployment", "redis")]["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [*container["args"], "--port", "6380"]
    with pytest.raises(AssertionError, match="listens on 6380"):
        assert_k8s_redis_wiring(docs)


def test_dockerfile_runs_the_server() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["extproc"]' in text and 'CMD ["serve"]' in text
    assert "HEALTHCHECK" in text and "USER vsr" in text
