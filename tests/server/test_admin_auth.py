"""The admin server's bearer token: required, accepted, refused; /healthz stays open; a bind beyond
loopback without a token is refused at start-up; loopback without a token stays open."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from extproc.cli import main
from extproc.server.admin import AdminAuthError, AdminServer
from extproc.server.app import ExtProcServer
from extproc.settings import Settings, SettingsError, is_loopback_host
from tests.server.test_grpc_service import POLICY, chat, make_router

TOKEN = "s3cret-admin-token-0123456789"


def settings_with(**server: Any) -> Settings:
    """Test settings (free ports, no policy watching) with `server` fields set without validation,
    as `model_copy` does: AdminServer's own check is what stands then."""
    settings = Settings.load(None, environ={})
    return settings.model_copy(
        update={
            "server": settings.server.model_copy(
                update={"grpc_port": 0, "admin_port": 0, "shutdown_grace_s": 1.0, **server}
            ),
            "reload": settings.reload.model_copy(update={"watch": False}),
        }
    )


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[ExtProcServer]:
    server = ExtProcServer(settings, make_router)
    await server.start()
    try:
        await server.load()
        yield server
    finally:
        await server.stop()


def client(server: ExtProcServer, token: str | None = None, scheme: str = "Bearer") -> httpx.AsyncClient:
    assert server.admin is not None
    headers = {"authorization": f"{scheme} {token}"} if token is not None else {}
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.admin.port}", headers=headers, timeout=10)


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[ExtProcServer]:
    policy = tmp_path / "keywords.yaml"  # what a reload reads
    policy.write_text(POLICY)
    settings = settings_with(admin_token=SecretStr(TOKEN)).model_copy(update={"policy_path": policy})
    async with running(settings) as server:
        yield server


ENDPOINTS = [("GET", "/metrics"), ("GET", "/v1/policy"), ("POST", "/v1/explain"), ("POST", "/v1/policy/reload")]


async def test_every_endpoint_but_healthz_needs_the_token(guarded: ExtProcServer) -> None:
    async with client(guarded) as anonymous:
        for method, path in ENDPOINTS:
            reply = await anonymous.request(method, path, content=chat("hi") if method == "POST" else None)
            assert reply.status_code == 401, (method, path)
            assert reply.headers["www-authenticate"] == 'Bearer realm="vsr-admin"'
            assert reply.json()["error"]["code"] == "unauthorized"
        # unknown paths too: nothing can be probed without the token
        assert (await anonymous.get("/v1/console")).status_code == 401
        health = await anonymous.get("/healthz")
        assert health.status_code == 200 and health.json()["status"] == "serving"


async def test_the_right_token_is_accepted(guarded: ExtProcServer) -> None:
    async with client(guarded, TOKEN) as authorized:
        assert (await authorized.get("/metrics")).status_code == 200
        assert (await authorized.get("/v1/policy")).json()["version"]
        explained = await authorized.post("/v1/explain", content=chat("find the bug"))
        assert explained.status_code == 200 and explained.json()["decision"] == "code_security_review"
        assert (await authorized.post("/v1/policy/reload")).status_code == 200
        assert (await authorized.get("/v1/console")).status_code == 404  # past auth, then routing
        assert (await authorized.get("/healthz")).status_code == 200
    async with client(guarded, TOKEN, scheme="bearer") as lower_case_scheme:
        assert (await lower_case_scheme.get("/metrics")).status_code == 200


@pytest.mark.parametrize(
    "header",
    [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer wrong", f"Basic {TOKEN}", f"Token {TOKEN}", "Bearer", TOKEN],
)
async def test_a_wrong_token_or_scheme_is_refused(guarded: ExtProcServer, header: str) -> None:
    async with client(guarded) as c:
        reply = await c.get("/metrics", headers={"authorization": header})
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"].startswith('Bearer realm="vsr-admin"')
    assert TOKEN not in reply.text


async def test_wrong_token_says_invalid_token(guarded: ExtProcServer) -> None:
    async with client(guarded, "not-the-token-at-all") as c:
        reply = await c.get("/metrics")
    assert reply.headers["www-authenticate"] == 'Bearer realm="vsr-admin", error="invalid_token"'


async def test_an_unauthenticated_body_is_not_read(guarded: ExtProcServer) -> None:
    """The 401 comes back at once, though the announced body never arrives."""
    assert guarded.admin is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", guarded.admin.port)
    writer.write(b"POST /v1/explain HTTP/1.1\r\nHost: x\r\nContent-Length: 20000000\r\n\r\n")
    await writer.drain()
    head = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert head.startswith(b"HTTP/1.1 401")


async def test_token_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "admin-token"
    secret.write_text(TOKEN + "\n")
    async with running(settings_with(admin_token_file=secret)) as server:
        async with client(server) as anonymous:
            assert (await anonymous.get("/metrics")).status_code == 401
        async with client(server, TOKEN) as authorized:
            assert (await authorized.get("/metrics")).status_code == 200


def test_an_unreadable_or_short_token_file_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read"):
        ExtProcServer(settings_with(admin_token_file=tmp_path / "missing"), make_router)
    short = tmp_path / "short"
    short.write_text("abc")
    with pytest.raises(SettingsError, match="at least 16 characters"):
        ExtProcServer(settings_with(admin_token_file=short), make_router)


# -- loopback or not ------------------------------------------------------------------------------


async def test_loopback_without_a_token_stays_open() -> None:
    async with running(settings_with()) as server:
        assert server.admin is not None and server.admin.token is None
        async with client(server) as anonymous:
            assert (await anonymous.get("/metrics")).status_code == 200
            assert (await anonymous.get("/v1/policy")).status_code == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "10.1.2.3", "admin.example.com", "localhost.example.com"])
def test_a_non_loopback_bind_without_a_token_fails_settings_validation(host: str, tmp_path: Path) -> None:
    file = tmp_path / "settings.yaml"
    file.write_text(json.dumps({"server": {"admin_host": host}}))  # JSON is YAML: "::" and "" stay strings
    with pytest.raises(SettingsError) as failure:
        Settings.load(file, environ={})
    message = str(failure.value)
    assert "is not loopback" in message and "VSR_SERVER__ADMIN_TOKEN" in message


def test_a_non_loopback_bind_is_valid_with_a_token_or_without_the_admin_server(tmp_path: Path) -> None:
    env = {"VSR_SERVER__ADMIN_HOST": "0.0.0.0"}
    assert Settings.load(None, environ={**env, "VSR_SERVER__ADMIN_TOKEN": TOKEN}).server.admin_token_value() == TOKEN
    secret = tmp_path / "t"
    secret.write_text(TOKEN)
    assert Settings.load(None, environ={**env, "VSR_SERVER__ADMIN_TOKEN_FILE": str(secret)}).server.admin_token_file
    assert Settings.load(None, environ={**env, "VSR_OBSERVABILITY__ADMIN": "false"}).observability.admin is False


def test_token_settings_are_checked_and_never_echoed(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="at least 16 characters") as short:
        Settings.load(None, environ={"VSR_SERVER__ADMIN_TOKEN": "tooshort"})
    assert "tooshort" not in str(short.value)
    with pytest.raises(SettingsError, match="not both"):
        Settings.load(None, environ={"VSR_SERVER__ADMIN_TOKEN": TOKEN, "VSR_SERVER__ADMIN_TOKEN_FILE": "/x"})
    settings = Settings.load(None, environ={"VSR_SERVER__ADMIN_TOKEN": TOKEN})
    assert TOKEN not in repr(settings) and TOKEN not in str(settings.model_dump())


async def test_the_server_refuses_to_start_beyond_loopback_without_a_token() -> None:
    server = ExtProcServer(settings_with(admin_host="0.0.0.0"), make_router)
    with pytest.raises(AdminAuthError, match="beyond loopback"):
        await server.start()
    assert server.port is None and server._server is None  # refused before the gRPC port opened


async def test_admin_server_start_refuses_too() -> None:
    admin = AdminServer(None, host="0.0.0.0", port=0, metrics=None, max_body_bytes=1024)  # type: ignore[arg-type]
    with pytest.raises(AdminAuthError):
        await admin.start()


async def test_beyond_loopback_with_a_token_serves_and_guards() -> None:
    async with running(settings_with(admin_host="0.0.0.0", admin_token=SecretStr(TOKEN))) as server:
        async with client(server) as anonymous:
            assert (await anonymous.get("/metrics")).status_code == 401
        async with client(server, TOKEN) as authorized:
            assert (await authorized.get("/metrics")).status_code == 200


def test_serve_exits_2_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VSR_SERVER__ADMIN_HOST", "0.0.0.0")
    monkeypatch.delenv("VSR_SERVER__ADMIN_TOKEN", raising=False)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["serve"]) == 2
    assert "is not loopback" in err.getvalue()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.4", False),
        ("fe80::1", False),
        ("vsr-admin", False),
    ],
)
def test_is_loopback_host(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback
