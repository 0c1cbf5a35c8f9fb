"""docker/: what can be checked without a Docker engine: YAML parses, generated files are
current, Envoy accepts the configs, the manifests hang together."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from extproc.ops.deploy import compose_envoy_yaml, k8s_envoy_configmap
from extproc.ops.envoy_config import envoy_binary

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


def test_all_yaml_parses_and_manifests_fit_together() -> None:
    docs = {}
    # The plain Kubernetes and compose deployment; the mesh variants (docker/mesh/) have their own tests.
    for path in sorted(p for p in DOCKER.rglob("*.yaml") if "mesh" not in p.relative_to(DOCKER).parts):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc is not None, path
            if "kind" in doc:
                docs[(doc["kind"], doc["metadata"]["name"])] = doc
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
    assert compose["services"]["extproc"]["environment"]["VSR_CONVERSATIONS__BACKEND"] == "redis"
    assert compose["services"]["envoy"]["ports"] == ["127.0.0.1:8801:8801"]


def test_dockerfile_runs_the_server() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["extproc"]' in text and 'CMD ["serve"]' in text
    assert "HEALTHCHECK" in text and "USER vsr" in text
