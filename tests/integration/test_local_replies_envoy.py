"""Through the real Envoy: its own answers (a body over the buffer limit, the ext_proc server
stalled or down, a model cluster down) come in the error JSON of the API the path speaks, and the
server's own immediate answers pass unchanged. A scripted ext_proc server stands in for ours, so
each case is what the body asks for."""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from extproc.ops.envoy_config import EnvoyOptions, envoy_binary, render
from extproc.ops.envoy_config.local_replies import ENVOY_REPLIES
from extproc.ops.stack import free_port, loopback_overrides, port_open
from extproc.server import mutations

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "policies" / "default.yaml"
BUFFER_LIMIT = 256 * 1024
OUR_503 = json.dumps({"error": {"message": "still loading", "type": "server_error", "code": "not_ready"}}).encode()


class ScriptedProcessor(ep_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    """Answers each body as it says: `stall` never, `refuse` with our own 503, `route` to a
    cluster nothing listens on."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def Process(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        for request in requests:
            if request.WhichOneof("request") != "request_body":
                yield mutations.continue_phase(request.WhichOneof("request"))
                continue
            body = request.request_body.body
            if b"stall" in body:
                self.release.wait(30)
                return
            if b"refuse" in body:
                yield mutations.immediate(503, {}, OUR_503, details="not_ready")
            else:
                yield mutations.route_request_body({}, body, {"cluster": "general"})


@dataclass
class Gateway:
    port: int
    server: grpc.Server
    processor: ScriptedProcessor

    def post(self, path: str, body: bytes) -> tuple[int, str, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request("POST", path, body, {"content-type": "application/json"})
            reply = connection.getresponse()
            return reply.status, reply.getheader("content-type") or "", reply.read()
        finally:
            connection.close()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    options = EnvoyOptions(
        listener_port=free_port(),
        admin_port=free_port(),
        ext_proc_port=free_port(),
        buffer_limit_bytes=BUFFER_LIMIT,
        message_timeout_s=1.0,
        allow_short_message_timeout=True,
        health_check=False,
        access_log=False,
    )
    processor = ScriptedProcessor()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    ep_grpc.add_ExternalProcessorServicer_to_server(processor, server)
    checker = health.HealthServicer()
    checker.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    server.add_insecure_port(f"127.0.0.1:{options.ext_proc_port}")
    server.start()
    config = tmp_path_factory.mktemp("envoy") / "envoy.yaml"
    config.write_text(render(POLICY, options, loopback_overrides(POLICY))[0], encoding="utf-8")
    command = [str(envoy_binary()), "-c", str(config), "--use-dynamic-base-id", "--log-level", "error"]
    envoy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(300):
            if port_open("127.0.0.1", options.listener_port) or envoy.poll() is not None:
                break
            threading.Event().wait(0.1)
        assert envoy.poll() is None, envoy.stderr.read().decode() if envoy.stderr else ""
        yield Gateway(options.listener_port, server, processor)
    finally:
        processor.release.set()
        server.stop(0)
        envoy.terminate()
        envoy.wait(15)


def chat(text: str) -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()


def messages(text: str) -> bytes:
    return json.dumps({"model": "auto", "max_tokens": 8, "messages": [{"role": "user", "content": text}]}).encode()


def assert_openai_error(reply: tuple[int, str, bytes], status: int) -> None:
    got, content_type, body = reply
    assert got == status, body
    assert content_type.startswith("application/json"), (content_type, body)
    _, error_type, code = ENVOY_REPLIES.get(status, ENVOY_REPLIES[None])
    error = json.loads(body)["error"]
    assert (error["type"], error["code"]) == (error_type, code)
    assert error["message"].startswith(ENVOY_REPLIES.get(status, ENVOY_REPLIES[None])[0])


def assert_anthropic_error(reply: tuple[int, str, bytes], status: int, error_type: str) -> None:
    got, content_type, body = reply
    assert got == status, body
    assert content_type.startswith("application/json"), (content_type, body)
    doc = json.loads(body)
    assert doc["type"] == "error"
    assert doc["error"]["type"] == error_type
    assert doc["error"]["message"]


def test_a_body_over_the_buffer_limit(gateway: Gateway) -> None:
    padding = "x" * (BUFFER_LIMIT + 1024)
    assert_openai_error(gateway.post("/v1/chat/completions", chat(padding)), 413)
    assert_openai_error(gateway.post("/v1/responses", json.dumps({"input": padding}).encode()), 413)
    assert_anthropic_error(gateway.post("/v1/messages", messages(padding)), 413, "request_too_large")


def test_the_server_stalled_past_the_message_timeout(gateway: Gateway) -> None:
    assert_openai_error(gateway.post("/v1/chat/completions", chat("stall")), 504)
    assert_anthropic_error(gateway.post("/v1/messages", messages("stall")), 504, "api_error")


def test_a_model_cluster_down(gateway: Gateway) -> None:
    reply = gateway.post("/v1/chat/completions", chat("route"))
    assert_openai_error(reply, 503)
    assert "upstream connect error" in json.loads(reply[2])["error"]["message"]  # Envoy's own words kept
    assert_anthropic_error(gateway.post("/v1/messages", messages("route")), 503, "overloaded_error")


def test_the_servers_own_answers_pass_unchanged(gateway: Gateway) -> None:
    for path, body in (("/v1/chat/completions", chat("refuse")), ("/v1/messages", messages("refuse"))):
        assert gateway.post(path, body) == (503, "application/json", OUR_503)


def test_a_body_less_post_is_a_400_in_the_paths_shape(gateway: Gateway) -> None:
    assert_anthropic_error(gateway.post("/v1/messages", b""), 400, "invalid_request_error")
    status, _, body = gateway.post("/v1/chat/completions", b"")
    assert (status, json.loads(body)["error"]["code"]) == (400, "body_required")


def test_the_server_down_last(gateway: Gateway) -> None:
    gateway.processor.release.set()
    gateway.server.stop(0).wait(5)
    assert_openai_error(gateway.post("/v1/chat/completions", chat("hello")), 503)
    assert_openai_error(gateway.post("/v1/completions", json.dumps({"prompt": "hello"}).encode()), 503)
    assert_anthropic_error(gateway.post("/v1/messages", messages("hello")), 503, "overloaded_error")
