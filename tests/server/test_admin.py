"""The admin HTTP server in-process, on the gRPC server's event loop: health, explain, policy, metrics."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from extproc.cli import main
from extproc.observability.observer import REQUEST_ID, RequestIdFilter
from extproc.server import admin as admin_module
from extproc.server.app import ExtProcServer
from extproc.settings import Settings
from tests.conftest import CHANGED, VISION, chat, image_chat
from tests.suite_env import SUITE_ENVIRON


def server_settings(policy: Path, **observability: Any) -> Settings:
    settings = Settings.load(None, environ=SUITE_ENVIRON)
    return settings.model_copy(
        update={
            "policy_path": policy,
            "server": settings.server.model_copy(
                update={"grpc_port": 0, "admin_port": 0, "shutdown_grace_s": 1.0, "drain_delay_s": 0.0}
            ),
            "reload": settings.reload.model_copy(update={"watch": False}),
        }
    )


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ExtProcServer]:
    policy = tmp_path / "vision.yaml"
    policy.write_text(VISION)
    srv = ExtProcServer(server_settings(policy))
    await srv.start()
    yield srv
    await srv.stop()


def admin(srv: ExtProcServer) -> httpx.AsyncClient:
    assert srv.admin is not None
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.admin.port}", timeout=10)


def run_cli(policy: Path, request: Path) -> tuple[int, str]:
    """`extproc explain --json` in this process (in a worker thread: it runs its own event loop)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explain", "--policy", str(policy), "--json", str(request)])
    return code, out.getvalue()


def comparable(explained: dict[str, Any]) -> dict[str, Any]:
    """The explain object without wall-clock figures."""
    out = json.loads(json.dumps(explained))
    out.pop("file", None)
    out["trace"].pop("timings_ms")
    for signal in out["signals"]:
        signal.pop("latency_ms")
    return out


async def test_healthz_reports_loading_then_an_unavailable_vision_model_truthfully(server: ExtProcServer) -> None:
    async with admin(server) as client:
        reply = await client.get("/healthz")
        assert reply.status_code == 503 and reply.json()["status"] == "loading"
        await server.load()
        reply = await client.get("/healthz")
    assert reply.status_code == 200
    health = reply.json()
    assert health["status"] == "serving" and health["degraded"] is True
    assert health["policy"]["version"] == server.live_router.policy.version  # type: ignore[union-attr]
    [vision] = [m for m in health["models"] if m["name"] == "vision"]
    assert vision["loaded"] is False and "no vision model configured" in vision["detail"]
    assert "vision model unavailable" in health["unavailable_signals"]["scan"]


async def test_explain_is_the_cli_explain_object_for_text_and_image(server: ExtProcServer, tmp_path: Path) -> None:
    await server.load()
    for name, body in (("text.json", chat("find the bug please")), ("image.json", image_chat("what is this?"))):
        async with admin(server) as client:
            reply = await client.post("/v1/explain", content=body)
        assert reply.status_code == 200
        explained = reply.json()
        file = tmp_path / name
        file.write_bytes(body)
        code, output = await asyncio.to_thread(run_cli, tmp_path / "vision.yaml", file)
        assert code == 0
        assert comparable(explained) == comparable(json.loads(output.splitlines()[0]))
    assert explained["decision"] == "image" and explained["model"] == "vlm"
    scan = next(s for s in explained["signals"] if s["name"] == "scan")
    assert scan["status"] == "unavailable"  # unknown, and the xray decision says why it did not fire
    xray = next(d for d in explained["trace"]["decisions"] if d["name"] == "xray")
    assert xray["value"] == "unknown"


async def test_policy_metrics_reload_and_http_errors(server: ExtProcServer) -> None:
    await server.load()
    router = server.live_router
    async with admin(server) as client:
        policy = (await client.get("/v1/policy")).json()
        assert policy["version"] == router.policy.version  # type: ignore[union-attr]
        assert policy["decisions"] == ["xray", "security", "image", "general"]  # highest priority first
        assert policy["signals"]["scan"]["unavailable"]
        metrics = await client.get("/metrics")
        assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
        assert 'vsr_model_loaded{model="vision"} 0.0' in metrics.text
        assert "vsr_in_flight_requests 0.0" in metrics.text

        assert server.settings.policy_path.exists()
        server.settings.policy_path.write_text(CHANGED)
        reply = await client.post("/v1/policy/reload")
        assert reply.status_code == 200 and reply.json()["result"] == "success"
        server.settings.policy_path.write_text("decisions: [")
        reply = await client.post("/v1/policy/reload")
        assert reply.status_code == 422 and reply.json()["result"] == "failure"
        metrics = (await client.get("/metrics")).text
        assert 'vsr_policy_reloads_total{result="success"} 1.0' in metrics
        assert 'vsr_policy_reloads_total{result="failure"} 1.0' in metrics
        health = (await client.get("/healthz")).json()
        assert (
            health["last_reload"]["result"] == "failure" and health["degraded"] is False
        )  # CHANGED has no vision signal

        missing, wrong_method = await client.get("/nope"), await client.get("/v1/explain")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == "method_not_allowed"
    assert (
        await raw(server, b"POST /v1/explain HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\nx")
    ).startswith(b"HTTP/1.1 413")
    # not HTTP at all: aiohttp's own 400 (status line HTTP/1.0, the request had no version to answer in)
    assert (await raw(server, b"garbage\r\n\r\n")).split(b"\r\n", 1)[0].split(b" ")[1] == b"400"


async def raw(server: ExtProcServer, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.admin.port)  # type: ignore[union-attr]
    writer.write(request)
    await writer.drain()
    reply = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return reply


async def test_reads_are_bounded_in_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A body that stops short is a 408; a request head that never ends closes the connection."""
    monkeypatch.setattr(admin_module, "READ_TIMEOUT_S", 0.3)
    policy = tmp_path / "vision.yaml"
    policy.write_text(VISION)
    srv = ExtProcServer(server_settings(policy))
    await srv.start()
    try:
        short_body = await raw(srv, b"POST /v1/explain HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{}")
        assert short_body.startswith(b"HTTP/1.1 408")
        assert json.loads(short_body.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
        assert await raw(srv, b"GET /healthz HTTP/1.1\r\nHost: x\r\n") == b""  # closed, unanswered
    finally:
        await srv.stop()


async def test_sighup_path_reloads_the_file(server: ExtProcServer) -> None:
    await server.load()
    before = server.live_router.policy.version  # type: ignore[union-attr]
    server.settings.policy_path.write_text(CHANGED)
    server.request_reload()
    for _ in range(200):
        if server.live_router.policy.version != before:  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.02)
    assert (await server.live_router.route(chat("a poem"))).decision == "poetry"  # type: ignore[union-attr]


def test_log_records_carry_the_request_id_of_the_request_being_handled() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "msg", None, None)
    token = REQUEST_ID.set("req-42")
    try:
        RequestIdFilter().filter(record)
    finally:
        REQUEST_ID.reset(token)
    assert record.request_id == "req-42"  # type: ignore[attr-defined]
    other = logging.LogRecord("x", logging.INFO, __file__, 1, "msg", None, None)
    RequestIdFilter().filter(other)
    assert not hasattr(other, "request_id")
