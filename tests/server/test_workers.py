"""`extproc serve --workers 2`: two processes share the gRPC port, each with its own admin port;
a dead worker is restarted; SIGTERM stops them all."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc
from google.protobuf import struct_pb2

from extproc.ops.stack import free_port

pytestmark = pytest.mark.slow

POLICY = """
version: 1
models:
  - {name: general, cluster: general}
  - {name: code, cluster: code}
signals:
  - {name: bug, type: keyword, keywords: [bug]}
decisions:
  - {name: code_review, priority: 10, when: {signal: bug}, action: {type: route, models: [code]}}
default: {name: general, action: {type: route, models: [general]}}
"""


def two_free_ports() -> int:
    """A port p with p and p + 1 both free (the two workers' admin ports)."""
    for _ in range(50):
        base = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", base + 1))
            except OSError:
                continue
        return base
    raise RuntimeError("no two consecutive free ports")


def healthz(port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as reply:
            data: dict[str, Any] = json.loads(reply.read())
            return data
    except OSError:
        return None


def wait_serving(port: int, timeout: float = 60.0, not_pid: int | None = None) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = healthz(port)
        if data is not None and data["status"] == "serving" and data["pid"] != not_pid:
            return int(data["pid"])
        time.sleep(0.2)
    raise AssertionError(f"admin port {port} never reported serving")


def route_once(grpc_port: int, text: str) -> str:
    body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
    request = ep.ProcessingRequest(request_body=ep.HttpBody(body=body, end_of_stream=True))
    attributes = struct_pb2.Struct()
    attributes.update({"request.path": "/v1/chat/completions"})
    request.attributes["envoy.filters.http.ext_proc"].CopyFrom(attributes)
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        (reply,) = list(ep_grpc.ExternalProcessorStub(channel).Process(iter([request]), timeout=10))
    return str(reply.dynamic_metadata.fields["vsr"].struct_value.fields["cluster"].string_value)


def test_two_workers_share_the_port_restart_and_stop(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    grpc_port, admin = free_port(), two_free_ports()
    env = {
        **os.environ,
        "VSR_SERVER__GRPC_PORT": str(grpc_port),
        "VSR_SERVER__ADMIN_PORT": str(admin),
        "VSR_LOGGING__LEVEL": "WARNING",
    }
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "extproc", "serve", "--workers", "2", "--policy", str(policy)], env=env
    )
    try:
        first, second = wait_serving(admin), wait_serving(admin + 1)
        assert first != second and supervisor.pid not in (first, second)
        routed = [route_once(grpc_port, "find the bug" if i % 2 else "hello") for i in range(12)]
        assert routed == ["general", "code"] * 6
        os.kill(second, signal.SIGKILL)  # a worker dies: the supervisor starts a new one
        replacement = wait_serving(admin + 1, not_pid=second)
        assert replacement != second and supervisor.poll() is None
        assert route_once(grpc_port, "a bug") == "code"
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=30) == 0
        assert healthz(admin) is None and healthz(admin + 1) is None
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
