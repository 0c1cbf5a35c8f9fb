"""The router's own policy reload keeps a running Envoy current (`reload.xds_dir`, what `extproc
stack` does by default): a policy edited to route to a new model's cluster reaches Envoy through
the rewritten cds.yaml / lds.yaml, and a request through Envoy lands on the new upstream, while
the Envoy process stays the same. Real Envoy, real server, real demo upstreams, loopback only."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from extproc.ops.envoy_config import EnvoyOptions
from extproc.ops.envoy_config.dynamic import CDS_NAME, RENDER_NAME
from extproc.ops.stack import Stack, StackConfig, free_port, port_open

pytestmark = pytest.mark.integration

POLICY = """version: 1
models:
{models}default:
  action: {{type: route, models: [{target}]}}
"""
MODEL = '  - {{name: {name}, cluster: {cluster}, address: "127.0.0.1:{port}"}}\n'


def write_policy(path: Path, target: str, models: dict[str, tuple[str, int]]) -> None:
    rows = "".join(MODEL.format(name=name, cluster=cluster, port=port) for name, (cluster, port) in models.items())
    path.write_text(POLICY.format(models=rows, target=target), encoding="utf-8")


def answered_by(base_url: str) -> str:
    reply = httpx.post(
        f"{base_url}/v1/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "hello"}]},
        timeout=10,
    )
    return f"{reply.status_code} {reply.text}"


def test_a_reload_that_adds_a_model_reaches_the_running_envoy(tmp_path: Path) -> None:
    a_port, c_port, server_admin = free_port(), free_port(), free_port()
    policy = tmp_path / "policy.yaml"
    write_policy(policy, "model-a", {"model-a": ("ca", a_port)})
    grown = tmp_path / "grown.yaml"
    write_policy(grown, "model-c", {"model-a": ("ca", a_port), "model-c": ("cc", c_port)})
    options = EnvoyOptions(listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port())
    env = {"VSR_SERVER__ADMIN_PORT": str(server_admin), "VSR_RELOAD__WATCH": "false"}
    stack = Stack(StackConfig(policy=policy, envoy=options, xds=tmp_path / "xds", env=env), sink=lambda _: None)
    # the new model's upstream (the stack starts demo upstreams for the policy it started with)
    extra = subprocess.Popen(
        [sys.executable, "-m", "extproc", "demo-upstream", "--policy", str(grown), "--skip", "ca"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        stack.start()
        assert {p.name for p in (tmp_path / "xds").iterdir()} >= {CDS_NAME, RENDER_NAME}
        assert "cluster=ca" in answered_by(stack.base_url)
        envoy_pid = stack.procs["envoy"].pid
        deadline = time.monotonic() + 60
        while not port_open("127.0.0.1", c_port) and time.monotonic() < deadline:
            time.sleep(0.2)

        policy.write_text(grown.read_text(encoding="utf-8"), encoding="utf-8")
        reload = httpx.post(f"http://127.0.0.1:{server_admin}/v1/policy/reload", timeout=60).json()
        assert reload["result"] == "success", reload  # not envoy_stale: the xDS files were rewritten
        assert any("cc" in change for change in reload["envoy_changes"]), reload
        assert any(path.endswith(CDS_NAME) for path in reload["envoy_synced"]), reload

        deadline = time.monotonic() + 30
        answer = answered_by(stack.base_url)
        while "cluster=cc" not in answer and time.monotonic() < deadline:
            time.sleep(0.3)
            answer = answered_by(stack.base_url)
        assert answer.startswith("200") and "cluster=cc" in answer, answer
        assert stack.procs["envoy"].pid == envoy_pid and stack.procs["envoy"].poll() is None  # no restart
    finally:
        stack.stop()
        extra.terminate()
        extra.wait(timeout=20)
