"""The local stack behind `make run` and the integration tests: demo upstreams, the ext_proc
server started together and each waited for, then Envoy; stopped in reverse.

Children run in their own sessions, so a Ctrl-C reaches only this supervisor, which then
stops Envoy first (no new requests), drains the server with SIGTERM, and stops the upstreams.
If any child dies, everything is stopped and the supervisor exits non-zero. A supervisor that
ends without stopping them (SIGKILL, a crash) takes them along all the same: each child is
sent SIGTERM by the kernel when its parent goes (`extproc.server.children`).
"""

from __future__ import annotations

import collections
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import IO

from extproc.ops.envoy_config import (
    EXT_PROC_CLUSTER,
    EnvoyOptions,
    envoy_binary,
    mcp_upstreams_from_policy,
    render,
    upstreams_from_policy,
)
from extproc.ops.paths import DEFAULT_POLICY, REPO_ROOT, in_repository
from extproc.server.children import die_with_parent
from extproc.settings import Settings

_HANDED_OUT: set[int] = set()
_PORT_LOCK = threading.Lock()
_SERVER_SERVING = "ext_proc server (gRPC health SERVING)"  # what a stack start waits for, in its errors


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on, for a server started later.

    Taken below the kernel's ephemeral range: a port from bind(0) comes from that range, and
    between this call and the server's bind any outgoing connection (a probe, a client, Envoy's
    upstream pool) may be given the same port, so the server fails with "address in use". No
    port is handed out twice by one process.
    """
    low, _ = _ephemeral_range()
    lowest = 20000 if low > 21000 else 1024
    with _PORT_LOCK:
        for _ in range(200):
            port = random.randrange(lowest, low if low > lowest + 1000 else 65535)
            if port in _HANDED_OUT:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # a crowded host: the kernel's pick
        sock.bind((host, 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def loopback_overrides(policy: Path | str) -> dict[str, str]:
    """Every cluster of the policy (models and MCP servers) on a free loopback port: for stacks
    that run beside others (tests, benchmarks)."""
    upstreams = [*upstreams_from_policy(policy), *mcp_upstreams_from_policy(policy)]
    return {u.cluster: f"127.0.0.1:{free_port()}" for u in upstreams}


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass(slots=True)
class StackConfig:
    policy: Path = DEFAULT_POLICY
    settings_file: Path | None = None
    envoy: EnvoyOptions = field(default_factory=EnvoyOptions)
    # cluster -> "host:port" for the demo upstreams (and Envoy's clusters); None: the policy's addresses
    upstream_overrides: dict[str, str] = field(default_factory=dict)
    envoy_config: Path | None = None  # a ready config to use as is (e.g. envoy/envoy.yaml)
    env: dict[str, str] = field(default_factory=dict)  # extra VSR_* settings for the server
    stream_delay_ms: float = 20.0
    start_timeout_s: float = 120.0
    demo_upstreams: bool = True
    # Clusters served by servers already running (`extproc stack --upstream CLUSTER=HOST:PORT`: real
    # vLLM or a stand-in): no demo upstream is started for them, the others still get theirs.
    external_upstreams: tuple[str, ...] = ()
    envoy_args: list[str] = field(default_factory=list)  # extra command-line flags, e.g. --concurrency


class StackError(RuntimeError):
    pass


class _Interrupted(BaseException):
    """A stop signal that arrived while the stack was starting."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Stack:
    def __init__(self, config: StackConfig, sink: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.sink = sink or (lambda line: print(line, flush=True))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._pumps: list[threading.Thread] = []
        self._recent: dict[str, collections.deque[str]] = {}  # each child's last lines, for errors
        self._tmp = tempfile.TemporaryDirectory(prefix="vsr-stack-")
        self.envoy_config_path: Path | None = None

    # -- addresses --------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.config.envoy.listener_host}:{self.config.envoy.listener_port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.config.envoy.admin_host}:{self.config.envoy.admin_port}"

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.start_timeout_s
        python = sys.executable
        external = set(cfg.external_upstreams)
        demos = [u for u in upstreams_from_policy(cfg.policy, cfg.upstream_overrides) if u.cluster not in external]
        # The demo servers and the ext_proc server are started together and then waited for, each:
        # none needs another to start, and the server's model loading is most of the wait.
        waits: list[tuple[str, Callable[[], bool]]] = []
        if cfg.demo_upstreams and demos:
            cmd = [python, "-m", "extproc", "demo-upstream", "--policy", str(cfg.policy)]
            cmd += ["--stream-delay-ms", str(cfg.stream_delay_ms)]
            for cluster, address in cfg.upstream_overrides.items():
                cmd += ["--upstream", f"{cluster}={address}"]
            for cluster in sorted(external):
                cmd += ["--skip", cluster]
            self._spawn("upstream", cmd)
            waits += [(f"demo upstream {u.cluster}", partial(port_open, u.host, u.port)) for u in demos]
        if cfg.demo_upstreams:
            for server in mcp_upstreams_from_policy(cfg.policy, cfg.upstream_overrides):
                if server.cluster in external:
                    continue
                listen = f"{server.host}:{server.port}"
                self._spawn(f"mcp:{server.cluster}", [python, "-m", "extproc.ops.demo_mcp", "--listen", listen])
                waits.append((f"demo MCP server {server.cluster}", partial(port_open, server.host, server.port)))
        self._spawn_server()
        waits.append((_SERVER_SERVING, self.server_serving))
        for what, probe in waits:
            self._wait(deadline, what, probe)

        if cfg.envoy_config is not None:
            config_path = cfg.envoy_config
        else:
            full, _ = render(cfg.policy, self.envoy_options(), cfg.upstream_overrides)
            config_path = Path(self._tmp.name) / "envoy.yaml"
            config_path.write_text(full, encoding="utf-8")
        self.envoy_config_path = config_path
        self._spawn(
            "envoy",
            [
                str(envoy_binary()),
                "-c",
                str(config_path),
                "--use-dynamic-base-id",
                "--log-level",
                "warn",
                *cfg.envoy_args,
            ],
        )
        self._wait(deadline, "Envoy /ready", self.envoy_ready)
        self._wait(deadline, "Envoy's health check of the ext_proc cluster", self.ext_proc_healthy)

    def start_server(self, deadline: float | None = None) -> None:
        """Start the ext_proc server and wait for gRPC health SERVING (also to restart it)."""
        cfg = self.config
        deadline = deadline if deadline is not None else time.monotonic() + cfg.start_timeout_s
        self._spawn_server()
        self._wait(deadline, _SERVER_SERVING, self.server_serving)

    def _spawn_server(self) -> None:
        cfg = self.config
        cmd = [sys.executable, "-m", "extproc"]
        if cfg.settings_file is not None:
            cmd += ["--settings", str(cfg.settings_file)]
        self._spawn("extproc", [*cmd, "serve"], self.server_environment())

    def server_environment(self) -> dict[str, str]:
        """The VSR_* settings the ext_proc server is started with, over this process's environment."""
        cfg = self.config
        return {
            "VSR_POLICY_PATH": str(cfg.policy),
            "VSR_SERVER__GRPC_HOST": cfg.envoy.ext_proc_host,
            "VSR_SERVER__GRPC_PORT": str(cfg.envoy.ext_proc_port),
            **cfg.env,
        }

    def envoy_options(self) -> EnvoyOptions:
        """The render options, with the request deadline the server will run with (its settings file
        and environment), so that Envoy's message timeout is sized from it (a too short explicit
        one is refused at render, before anything serves)."""
        settings = Settings.load(self.config.settings_file, environ={**os.environ, **self.server_environment()})
        return replace(self.config.envoy, request_deadline_ms=settings.dispatch.request_deadline_ms)

    def stop(self) -> None:
        """Envoy first, then the server (SIGTERM: it drains), then the upstreams."""
        # Envoy first (no new requests), then the server, then every demo server, whatever its name.
        for name in ("envoy", "extproc", *(n for n in list(self.procs) if n not in ("envoy", "extproc"))):
            self.stop_process(name)
        for pump in self._pumps:
            pump.join(timeout=2)
        self._tmp.cleanup()

    def stop_process(self, name: str, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        # The child leads a session of its own: whatever it started and left behind goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.returncode

    def __enter__(self) -> Stack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def failed(self) -> str | None:
        """The name of a child that has exited, if any."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                time.sleep(0.2)  # let the pump read the last lines, which say why
                tail = "\n".join(self._recent.get(name, ()))
                return f"{name} exited with {proc.returncode}" + (f"; its last lines:\n{tail}" if tail else "")
        return None

    # -- probes -----------------------------------------------------------------------------
    def server_serving(self) -> bool:
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        target = f"{self.config.envoy.ext_proc_host}:{self.config.envoy.ext_proc_port}"
        try:
            with grpc.insecure_channel(target) as channel:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
        except grpc.RpcError:
            return False
        serving: bool = reply.status == health_pb2.HealthCheckResponse.SERVING
        return serving

    def envoy_ready(self) -> bool:
        return self._admin_get("/ready") == "LIVE"

    def ext_proc_healthy(self) -> bool:
        clusters = self._admin_get("/clusters") or ""
        return any(
            line.startswith(f"{EXT_PROC_CLUSTER}::") and "::health_flags::healthy" in line
            for line in clusters.splitlines()
        )

    def _admin_get(self, path: str) -> str | None:
        try:
            with urllib.request.urlopen(self.admin_url + path, timeout=1) as reply:
                text: str = reply.read().decode().strip()
                return text
        except (urllib.error.URLError, OSError):
            return None

    # -- internals --------------------------------------------------------------------------
    def _spawn(self, name: str, cmd: list[str], env: Mapping[str, str] | None = None) -> None:
        full_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT if in_repository() else None,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops children in order
            preexec_fn=die_with_parent(),  # ... and a supervisor that dies unasked takes them along
        )
        self.procs[name] = proc
        assert proc.stdout is not None
        pump = threading.Thread(target=self._pump, args=(name, proc.stdout), daemon=True)
        pump.start()
        self._pumps.append(pump)

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        recent = self._recent.setdefault(name, collections.deque(maxlen=12))
        for raw in iter(stream.readline, b""):
            line = f"{name:>8} | {raw.decode('utf-8', 'replace').rstrip()}"
            recent.append(line)
            self.sink(line)
        stream.close()

    def _wait(self, deadline: float, what: str, probe: Callable[[], bool]) -> None:
        while True:
            dead = self.failed()
            if dead:
                raise StackError(f"while waiting for {what}: {dead}")
            if probe():
                return
            if time.monotonic() > deadline:
                raise StackError(f"timed out waiting for {what}")
            time.sleep(0.1)


def run_foreground(config: StackConfig) -> int:
    """Start the stack, print how to use it, and keep it up until SIGINT / SIGTERM / SIGHUP or a
    child dies. A signal while the stack starts abandons the start (which stops what had started)
    rather than waiting for it; further signals while stopping are ignored, so the stop completes."""
    stop = threading.Event()
    starting = True

    def on_signal(signum: int, frame: object) -> None:
        first = not stop.is_set()
        stop.set()
        if starting and first:
            raise _Interrupted(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    stack = Stack(config)
    try:
        stack.start()
    except StackError as exc:
        print(f"stack: {exc}", file=sys.stderr, flush=True)
        return 1
    except _Interrupted as exc:
        print(f"stack: {signal.Signals(exc.signum).name} while starting; stopped", file=sys.stderr, flush=True)
        return 128 + exc.signum
    starting = False
    url = stack.base_url
    admin_port = config.env.get("VSR_SERVER__ADMIN_PORT", os.environ.get("VSR_SERVER__ADMIN_PORT", "9190"))
    print(
        "\n".join(
            [
                "",
                f"stack up: Envoy {url}  (admin {stack.admin_url}, config {stack.envoy_config_path})",
                f"  router admin http://127.0.0.1:{admin_port}: /metrics /healthz /v1/policy, POST /v1/explain",
                f"  curl -s {url}/v1/chat/completions -H 'content-type: application/json' \\",
                '    -d \'{"model":"auto","messages":[{"role":"user","content":"Hello!"}]}\' -i',
                "  with -H 'authorization: Bearer me' the second identical request is a cache hit (x-vsr-cache).",
                "Ctrl-C stops everything.",
                "",
            ]
        ),
        flush=True,
    )
    code = 0
    while not stop.wait(0.5):
        dead = stack.failed()
        if dead:
            print(f"stack: {dead}; stopping", file=sys.stderr, flush=True)
            code = 1
            break
    print("stack: stopping", flush=True)
    stack.stop()
    return code
