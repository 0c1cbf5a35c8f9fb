"""The admin HTTP server, on the gRPC server's event loop.

    GET  /metrics            Prometheus text exposition
    GET  /healthz            state, policy version, each model loaded or unavailable, signals that cannot run
                             (`degraded`); 200 while serving, 503 while loading or draining
    POST /v1/explain         an OpenAI request body in, the explain object out (as `extproc explain --json`);
                             `?path=/v1/responses` names the API (default: inferred from the body, like the CLI)
    GET  /v1/policy          the active policy: version, path, the validated document, warnings, last reload
    POST /v1/policy/reload   reload the policy file now (as SIGHUP does) and say what happened
    GET  /console, /v1/console/...   the decision console (`extproc.server.console_routes`, added by the app)

It is served by `aiohttp.web` (`extproc.web.AppServer`) on that loop; one catch-all route hands
every request to the table of endpoints here, so the auth check, 404 and 405 stay this module's.
Each connection carries one request (`Connection: close`); reading is bounded in time and size (a
request head not complete within `READ_TIMEOUT_S` closes the connection, a body not read within it
is a 408, a body over `max_body_bytes` a 413), so a slow or hostile client costs a socket, never the
event loop. Explain runs the same `Router.route` as the ext_proc path, with the active policy; it is
not counted in metrics or the decision log.

Auth: with `server.admin_token` (or `admin_token_file`) set, every request but `GET /healthz`
needs `Authorization: Bearer <token>` (compared in constant time; 401 with `WWW-Authenticate`
otherwise), checked before the body is read. Every route added to the table goes through the
same check (`AdminServer._authorize`) unless it is listed in `PUBLIC` (or added as public through
`add_routes`: only the console's static page and assets, which hold no data). A bind beyond loopback
without a token is refused at start.

The routes read the server they serve through `AdminTarget`, the few things they need from it
(`ExtProcServer` is one, structurally): the admin edge names no class of the app that owns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp import web

from extproc.cache.service import explained
from extproc.conversations.service import explained as conversation_explained
from extproc.conversations.service import store_backend
from extproc.observability.metrics import CONTENT_TYPE, Metrics
from extproc.server.explain_answer import envoy_answer
from extproc.settings import Settings, SettingsError, is_loopback_host
from extproc.web import AppServer, catch_all_app

if TYPE_CHECKING:
    from extproc.conversations.service import Conversations
    from extproc.router import Router
    from extproc.server.reload import PolicyReloader

log = logging.getLogger("extproc.admin")

READ_TIMEOUT_S = 10.0
MAX_HEADER_LINES = 100
JSON = "application/json"
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed"}
REASONS |= {408: "Request Timeout"}
REASONS |= {413: "Payload Too Large", 422: "Unprocessable Entity", 500: "Internal Server Error"}
REASONS |= {503: "Service Unavailable"}
# Endpoints served without the bearer token (probes): everything else needs it when one is set.
PUBLIC = frozenset({("GET", "/healthz")})
REALM = "vsr-admin"


class AdminAuthError(SettingsError):
    """The admin server would listen beyond loopback without a token."""


class AdminTarget(Protocol):
    """What the admin and console routes read from the server they serve, and nothing more.

    Read-only here (properties), so a server that keeps them as plain attributes satisfies it.
    """

    @property
    def settings(self) -> Settings: ...

    @property
    def state(self) -> str:
        """loading | serving | draining, as /healthz reports it."""
        ...

    @property
    def in_flight(self) -> int: ...

    @property
    def live_router(self) -> Router | None:
        """The router serving requests now; None while it loads."""
        ...

    @property
    def reloader(self) -> PolicyReloader | None: ...

    @property
    def conversations(self) -> Conversations | None:
        """The conversation store; None when it is off (or not built yet)."""
        ...


@dataclass(slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)


def json_response(status: int, data: Any) -> Response:
    return Response(status, json.dumps(data, ensure_ascii=False, indent=None, default=str).encode() + b"\n")


def error_code(status: int) -> str:
    """An HTTP status as an error code, snake_case like every other code we send: `not_found`."""
    return REASONS.get(status, "error").lower().replace(" ", "_")


def _error(status: int, message: str) -> Response:
    return json_response(status, {"error": {"message": message, "code": error_code(status)}})


Handler = Callable[[bytes, dict[str, list[str]], dict[str, str]], Awaitable[Response]]


def check_bearer(headers: dict[str, str], token: str) -> Response | None:
    """None when `headers` carry `Authorization: Bearer <token>`; otherwise the 401 to send."""
    scheme, _, credentials = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        response = _error(401, "this endpoint needs Authorization: Bearer <server.admin_token>")
        response.headers["WWW-Authenticate"] = f'Bearer realm="{REALM}"'
        return response
    if not hmac.compare_digest(credentials.strip().encode(), token.encode()):
        response = _error(401, "invalid admin token")
        response.headers["WWW-Authenticate"] = f'Bearer realm="{REALM}", error="invalid_token"'
        return response
    return None


class AdminServer:
    def __init__(
        self,
        target: AdminTarget,
        *,
        host: str,
        port: int,
        metrics: Metrics | None,
        max_body_bytes: int,
        token: str | None = None,
    ) -> None:
        self.target = target
        self.token = token or None
        self.host = host
        self.port = port
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self._server: AppServer | None = None
        self._routes: dict[tuple[str, str], Handler] = {
            ("GET", "/metrics"): self._metrics,
            ("GET", "/healthz"): self._healthz,
            ("POST", "/v1/explain"): self._explain,
            ("GET", "/v1/policy"): self._policy,
            ("POST", "/v1/policy/reload"): self._reload,
        }
        self._public: set[tuple[str, str]] = set(PUBLIC)

    def add_routes(
        self, routes: dict[tuple[str, str], Handler], public: frozenset[tuple[str, str]] = frozenset()
    ) -> None:
        """Serve more endpoints; all go through `_authorize`, those in `public` without the token."""
        clash = set(routes) & set(self._routes)
        if clash:
            raise ValueError(f"admin routes already taken: {sorted(clash)}")
        if not public <= set(routes):
            raise ValueError("a public route must be one of the routes added")
        self._routes.update(routes)
        self._public.update(public)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def check_bind(self) -> None:
        """Refuse (AdminAuthError) to listen beyond loopback without a token."""
        if self.token is None and not is_loopback_host(self.host):
            raise AdminAuthError(
                f"admin server refused to listen on {self.address}: beyond loopback it needs a bearer token "
                "(server.admin_token / VSR_SERVER__ADMIN_TOKEN or server.admin_token_file)"
            )

    async def start(self) -> int:
        self.check_bind()
        app = catch_all_app(self._handle, self.max_body_bytes)  # the table below dispatches
        server = AppServer(
            app, self.host, self.port, idle_timeout_s=READ_TIMEOUT_S, max_headers=MAX_HEADER_LINES, lingering_time_s=0
        )
        self.port = await server.start()
        self._server = server
        log.info("admin listening", extra={"address": self.address})
        return self.port

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(Exception):
                await server.close()

    # -- HTTP -----------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.Response:
        try:
            response = await self._serve_one(request)
        except TimeoutError:
            response = _error(408, "request not received in time")
        except (ValueError, aiohttp.ClientPayloadError):
            response = _error(400, "malformed HTTP request")
        reply = web.Response(
            status=response.status,
            reason=REASONS.get(response.status, "Status"),
            body=response.body,
            headers={"Content-Type": response.content_type, **response.headers},
        )
        reply.force_close()  # one request a connection: an unread body is never drained
        return reply

    async def _serve_one(self, request: web.Request) -> Response:
        method = request.method.upper()
        headers = {name.lower(): value for name, value in request.headers.items()}
        url = urlsplit(request.raw_path)
        denied = self._authorize(method, url.path, headers)
        if denied is not None:  # before the body is read: an unauthenticated client cannot make us buffer it
            return denied
        length = int(headers.get("content-length", "0") or "0")
        if length < 0:
            raise ValueError("negative content-length")
        if length > self.max_body_bytes:
            return _error(413, f"body over {self.max_body_bytes} bytes")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return _error(400, "chunked bodies are not supported; send content-length")
        body = await asyncio.wait_for(request.read(), READ_TIMEOUT_S) if length else b""
        handler = self._routes.get((method, url.path))
        if handler is None:
            if any(path == url.path for _, path in self._routes):
                return _error(405, f"{method} not allowed on {url.path}")
            return _error(404, f"no such endpoint: {url.path}")
        try:
            return await handler(body, parse_qs(url.query), headers)
        except Exception:
            log.exception("admin handler failed", extra={"path": url.path})
            return _error(500, "internal error")

    def _authorize(self, method: str, path: str, headers: dict[str, str]) -> Response | None:
        """The one auth check every request goes through (unknown paths included, so they cannot be probed)."""
        if self.token is None or (method, path) in self._public:
            return None
        denied = check_bearer(headers, self.token)
        if denied is not None:
            log.debug("admin request refused", extra={"path": path, "status": denied.status})
        return denied

    # -- endpoints ------------------------------------------------------------------------------
    async def _metrics(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        if self.metrics is None:
            return _error(404, "metrics are disabled (observability.metrics: false)")
        return Response(200, self.metrics.exposition(), CONTENT_TYPE)

    async def _healthz(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        return json_response(*health(self.target))

    async def _explain(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        router = self.target.live_router
        if router is None:
            return _error(503, "the router is still loading its policy and models")
        path = query.get("path", [""])[0]  # empty: the parser tells the API from the body
        outcome = await router.route(body, path=path, request_id=headers.get("x-request-id"))
        outcome.cache = explained(outcome, router.policy.spec)
        outcome.conversation = conversation_explained(outcome, router.policy.spec, store_backend(self.target.settings))
        return json_response(200, {**outcome.to_dict(), "envoy": envoy_answer(router, outcome, path or None)})

    async def _policy(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        router = self.target.live_router
        if router is None:
            return _error(503, "no policy loaded yet")
        policy = router.policy
        reloader = self.target.reloader
        return json_response(
            200,
            {
                "version": policy.version,
                "path": str(policy.path) if policy.path is not None else None,
                "signals": {
                    name: {"type": signal.type, "on_error": signal.on_error, "unavailable": signal.unavailable_reason()}
                    for name, signal in policy.signals.items()
                },
                "decisions": [d.name for d in policy.decisions] + [policy.default.name],
                "warnings": [d.format() for d in policy.warnings],
                "last_reload": reloader.last.to_dict() if reloader is not None and reloader.last else None,
                "policy": policy.spec.model_dump(mode="json", exclude_none=True),
            },
        )

    async def _reload(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        reloader = self.target.reloader
        if reloader is None:
            return _error(503, "reloading is not available (router not loaded yet)")
        result = await reloader.reload("api")
        return json_response(422 if result.result == "failure" else 200, result.to_dict())


def health(target: AdminTarget) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of /healthz: 200 only while serving; `degraded` when a model is unavailable."""
    router = target.live_router
    state = target.state
    data: dict[str, Any] = {"status": state, "in_flight": target.in_flight, "pid": os.getpid(), "time": time.time()}
    data["models"] = (
        [{"name": s.name, "loaded": s.loaded, "detail": s.detail} for s in router.models.statuses()]
        if router is not None
        else []
    )
    if router is not None:
        policy = router.policy
        data["policy"] = {"version": policy.version, "path": str(policy.path) if policy.path is not None else None}
        data["unavailable_signals"] = {
            name: reason for name, signal in policy.signals.items() if (reason := signal.unavailable_reason())
        }
    else:
        data["policy"] = None
        data["unavailable_signals"] = {}
    # Degraded: a signal of the active policy cannot run (its model is unavailable). A model that
    # failed for an older policy stays listed under `models`, but no longer degrades routing.
    data["degraded"] = bool(data["unavailable_signals"])
    reloader = target.reloader
    if reloader is not None and reloader.last is not None:
        last = reloader.last
        data["last_reload"] = {"result": last.result, "at": last.at, "version": last.version, "errors": last.errors}
    return (200 if state == "serving" else 503), data
