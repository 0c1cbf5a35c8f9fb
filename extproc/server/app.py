"""The ext_proc server's lifecycle: start, load, serve, drain.

- The gRPC port opens at once with the health service reporting NOT_SERVING; the router
  (policy, signals, models) loads in a worker thread, then health turns SERVING. Envoy's
  health check on the ext_proc cluster (and Kubernetes' gRPC probe) read that status.
- Message limits come from `settings.server.max_message_bytes`, sized for image bodies.
- SIGTERM / SIGINT: health turns NOT_SERVING, the server waits `drain_delay_s` (time for
  Envoy's health checks to notice), then stops taking new streams and lets in-flight ones
  finish for up to `shutdown_grace_s` before it exits.
- Observability: Prometheus metrics, the decision log and the console's ring of recent
  decisions are fed by the servicer through one `Observer`; the admin HTTP server (/metrics,
  /healthz, /v1/explain, /v1/policy, the decision console at /console) runs on this event loop;
  the policy file is watched and SIGHUP reloads it (`extproc.server.reload`).
  With `tracing.enabled`, the servicer also emits OpenTelemetry spans (`extproc.observability.tracing`);
  they are flushed at stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from extproc.cache.service import build_semantic_cache
from extproc.conversations.service import build_conversations
from extproc.fleet.service import FleetService
from extproc.observability.decision_log import DecisionLog
from extproc.observability.metrics import (
    ConversationMetrics,
    FleetMetrics,
    Metrics,
    SemanticCacheMetrics,
    live_metrics,
)
from extproc.observability.observer import Observer, install_request_id_filter
from extproc.observability.recent import RecentDecisions
from extproc.observability.tracing import build_tracer
from extproc.policy.load import PolicyError
from extproc.server import heap
from extproc.server.admin import AdminServer
from extproc.server.console_routes import PUBLIC_ROUTES, Console
from extproc.server.grpc_service import ExtProcService
from extproc.server.reload import PolicyReloader, ReloadResult
from extproc.settings import Settings, SettingsError

if TYPE_CHECKING:
    from extproc.conversations.service import Conversations
    from extproc.policy.load import CompiledPolicy
    from extproc.router import Router

log = logging.getLogger("extproc.server")

EXT_PROC_SERVICE = "envoy.service.ext_proc.v3.ExternalProcessor"
RouterFactory = Callable[[Settings], "Router"]


def _default_router_factory(settings: Settings) -> Router:
    from extproc.router import Router  # the policy's signal modules load with it, off the event loop

    return Router.from_settings(settings)


class ExtProcServer:
    def __init__(self, settings: Settings, router_factory: RouterFactory | None = None) -> None:
        self.settings = settings
        self.router_factory = router_factory or _default_router_factory
        srv = settings.server
        obs = settings.observability
        self.metrics = Metrics() if obs.metrics else None
        self.decision_log = DecisionLog(obs.decision_log) if obs.decision_log.path is not None else None
        # The console's ring lives only where the console can be read: with the admin server on.
        self.recent = RecentDecisions(obs.console_ring) if obs.admin and obs.console_ring > 0 else None
        observer = (
            Observer(self.metrics, self.decision_log, self.recent)
            if self.metrics is not None or self.decision_log is not None or self.recent is not None
            else None
        )
        self.tracer = build_tracer(settings.tracing)  # None (the default): OpenTelemetry is not imported
        self.settler = heap.Settler()
        self.service = ExtProcService(
            inference_paths=srv.inference_paths,
            debug_headers=srv.debug_headers,
            observer=observer,
            tracer=self.tracer,
            shed_wait_s=settings.dispatch.shed_wait_ms / 1000.0,
        )
        self.loop_lag = self.service.loop_lag
        self.health = HealthServicer()
        self.port: int | None = None
        self._server: Any = None
        self._stopping = asyncio.Event()
        self.state = "loading"  # loading | serving | draining, as /healthz reports it
        self.reloader: PolicyReloader | None = None
        self.fleet: FleetService | None = None  # model selection's view of the upstreams (set at load)
        self.admin = (
            AdminServer(
                self,
                host=srv.admin_host,
                port=srv.admin_port,
                metrics=self.metrics,
                max_body_bytes=settings.limits.max_body_bytes,
                token=srv.admin_token_value(),
            )
            if obs.admin
            else None
        )
        if self.admin is not None:
            console = Console(self, recent=self.recent, metrics=self.metrics)
            self.admin.add_routes(console.routes(), public=PUBLIC_ROUTES)
        if self.metrics is not None:
            self.metrics.add_source(
                lambda: live_metrics(
                    in_flight=self.service.in_flight, router=self.service.router, decision_log=self.decision_log
                )
            )

    @property
    def live_router(self) -> Router | None:
        return self.service.router

    @property
    def in_flight(self) -> int:
        return self.service.in_flight

    @property
    def conversations(self) -> Conversations | None:
        return self.service.conversations

    @property
    def address(self) -> str:
        return f"{self.settings.server.grpc_host}:{self.port}"

    async def start(self) -> int:
        """Open the port with health NOT_SERVING; returns the bound port (useful with port 0)."""
        srv = self.settings.server
        limit = srv.max_message_bytes
        if self.admin is not None:
            self.admin.check_bind()  # refuse before opening anything: no admin beyond loopback without a token
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                ("grpc.so_reuseport", 1 if srv.reuse_port else 0),
            ]
        )
        ep_grpc.add_ExternalProcessorServicer_to_server(self.service, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.port = self._server.add_insecure_port(f"{srv.grpc_host}:{srv.grpc_port}")
        await self._server.start()
        if self.service.shed_wait_s:
            self.loop_lag.start()  # the servicer dates each message's arrival back by the loop's lateness
        log.info("grpc listening", extra={"address": self.address, "max_message_bytes": limit})
        if self.decision_log is not None:
            self.decision_log.start()
        if self.admin is not None:
            try:
                await self.admin.start()
            except OSError as exc:  # routing does not depend on it; say so loudly and go on
                log.error("admin HTTP server not listening", extra={"address": self.admin.address, "error": str(exc)})
                self.admin = None
        return self.port

    async def load(self) -> None:
        """Build the router off the event loop, then report SERVING."""
        started = time.perf_counter()
        router = await asyncio.to_thread(self.router_factory, self.settings)
        policy = router.policy
        cache = await asyncio.to_thread(build_semantic_cache, self.settings, router)
        if cache is not None:
            self.service.cache = cache
            if self.metrics is not None:
                self.metrics.add_source(SemanticCacheMetrics(cache).collect)
        conversations = build_conversations(self.settings)
        if conversations is not None:
            self.service.conversations = conversations
            if self.metrics is not None:
                self.metrics.add_source(ConversationMetrics(conversations).collect)
        fleet = self.fleet = FleetService(self.settings)
        fleet.apply_policy(policy.spec)
        router.fleet = fleet.fleet
        self.service.fleet = fleet.fleet
        if conversations is not None:
            conversations.unavailable = fleet.unavailable
        if self.metrics is not None:
            self.metrics.add_source(FleetMetrics(fleet.fleet, lambda: self.service.router).collect)
        fleet.start()
        if self.decision_log is not None:
            self.decision_log.register_policy(policy)
        self.reloader = PolicyReloader(
            router,
            policy.path or self.settings.policy_path,
            interval_s=self.settings.reload.interval_s,
            on_result=self._reloaded,
            on_swap=self._swapped,
        )
        if self.settings.reload.watch:
            self.reloader.start()
        self.service.router = router
        # Models, policy and tables are loaded and no request has arrived yet: out of the
        # collector's sight. A model loaded later, on first use, and a reload are settled at the
        # next moment no stream is in flight (extproc.server.heap).
        heap.settle("router loaded")
        router.models.on_load = lambda name: self.settler.request(f"model {name} loaded")
        self.service.on_idle = self.settler.when_idle
        self.state = "serving"
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "router ready",
            extra={
                "policy": str(policy.path or self.settings.policy_path),
                "policy_version": policy.version,
                "load_s": round(time.perf_counter() - started, 3),
            },
        )

    def request_stop(self) -> None:
        self._stopping.set()

    def request_reload(self) -> None:
        """SIGHUP: validate and swap in the policy file now (ignored while loading)."""
        if self.reloader is None:
            log.warning("SIGHUP ignored: the router is still loading")
            return
        self.reloader.trigger("sighup")

    def _swapped(self, policy: CompiledPolicy) -> None:
        if self.fleet is not None:
            self.fleet.apply_policy(policy.spec)
        if self.decision_log is not None:
            self.decision_log.register_policy(policy)
        self.settler.request("policy reloaded", thaw=True)

    def _reloaded(self, result: ReloadResult) -> None:
        if self.metrics is not None:
            self.metrics.record_reload(result.result)

    async def stop(self) -> None:
        """Drain: NOT_SERVING, wait for health checks to notice, refuse new streams, finish old ones."""
        srv = self.settings.server
        self.state = "draining"
        if self.reloader is not None:
            await self.reloader.stop()
        await self.health.enter_graceful_shutdown()
        log.info("draining", extra={"in_flight": self.service.in_flight, "grace_s": srv.shutdown_grace_s})
        if srv.drain_delay_s > 0:
            await asyncio.sleep(srv.drain_delay_s)
        if self._server is not None:
            await self._server.stop(srv.shutdown_grace_s)
        router = self.service.router
        self.service.router = None
        if router is not None:
            router.close()
        if self.service.cache is not None:
            await asyncio.to_thread(self.service.cache.close)
        if self.service.conversations is not None:
            await self.service.conversations.close()
        if self.fleet is not None:
            await self.fleet.stop()
        if self.decision_log is not None:
            await asyncio.to_thread(self.decision_log.close)
        if self.admin is not None:
            await self.admin.stop()
        if self.tracer is not None:
            await asyncio.to_thread(self.tracer.shutdown)  # export what is still queued
        await self.loop_lag.stop()
        log.info("stopped")

    async def run(self) -> int:
        """Serve until SIGTERM / SIGINT; returns the process exit code."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_stop)
        with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
            loop.add_signal_handler(signal.SIGHUP, self.request_reload)
        await self.start()
        loader = asyncio.create_task(self.load())
        stopper = asyncio.create_task(self._stopping.wait())
        done, _ = await asyncio.wait({loader, stopper}, return_when=asyncio.FIRST_COMPLETED)
        code = 0
        if loader in done and loader.exception() is not None:
            failure = loader.exception()
            if isinstance(failure, PolicyError):  # an operator's mistake: the diagnostics, no traceback
                log.error(
                    "policy is invalid; not serving",
                    extra={"problems": [d.format() for d in failure.diagnostics if d.severity == "error"]},
                )
            else:
                log.error("router failed to load", exc_info=failure)
            code = 1
        else:
            await stopper
        if not loader.done():
            loader.cancel()  # the loading thread itself finishes on its own; we stop waiting
        stopper.cancel()
        await self.stop()
        return code

    async def _set_health(self, status: Any) -> None:
        for service in ("", EXT_PROC_SERVICE):
            await self.health.set(service, status)


def serve(settings: Settings, router_factory: RouterFactory | None = None) -> int:
    from extproc.server.logs import configure_logging

    configure_logging(settings.logging.level, settings.logging.json_format)
    install_request_id_filter()
    loop_factory = event_loop_factory(settings.server.event_loop)
    log.info("event loop", extra={"event_loop": "uvloop" if loop_factory is not None else "asyncio"})
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(ExtProcServer(settings, router_factory).run())


def event_loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when asked for or (auto) installed; None: the standard loop."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise SettingsError(
                "server.event_loop is uvloop, but uvloop is not installed (the extproc[uvloop] extra)"
            ) from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory
