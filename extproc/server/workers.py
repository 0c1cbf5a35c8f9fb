"""`extproc serve --workers N`: N server processes sharing the gRPC port (SO_REUSEPORT).

Python serves a gRPC stream on one core at a time, so a multi-core host runs several worker
processes. Each is a full `extproc serve` (its own policy, models, caches and admin port:
worker k's admin HTTP listens on `admin_port + k`); the kernel spreads new connections over
the workers listening on the shared port, and Envoy spreads streams over its connections.

The supervisor starts the workers, forwards SIGTERM / SIGINT (drain and stop) and SIGHUP
(reload the policy) to each, and restarts a worker that dies on its own, giving up (and
stopping the rest) when workers keep dying: more than `MAX_RESTARTS` within `RESTART_WINDOW_S`.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

from extproc.server.children import die_with_parent
from extproc.settings import Settings

log = logging.getLogger("extproc.workers")

MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
POLL_S = 0.2


def worker_env(settings: Settings, index: int) -> dict[str, str]:
    """The environment of worker `index`: the shared port with SO_REUSEPORT, its own admin port."""
    env = dict(os.environ)
    env["VSR_SERVER__REUSE_PORT"] = "true"
    env["VSR_SERVER__WORKERS"] = "1"
    env["VSR_SERVER__GRPC_PORT"] = str(settings.server.grpc_port)
    env["VSR_SERVER__ADMIN_PORT"] = str(settings.server.admin_port + index)
    env["VSR_POLICY_PATH"] = str(settings.policy_path)
    return env


class Supervisor:
    def __init__(self, settings: Settings, command: Sequence[str]) -> None:
        if settings.server.grpc_port == 0:
            raise ValueError("--workers needs a fixed gRPC port (the workers share it); port 0 picks one per process")
        self.settings = settings
        self.command = list(command)
        self.workers: dict[int, subprocess.Popen[bytes]] = {}
        self.stopping = False
        self.restarts: list[float] = []

    def start_worker(self, index: int) -> None:
        # A supervisor killed outright (no handler runs) takes its workers along: they would hold the port.
        self.workers[index] = subprocess.Popen(
            self.command, env=worker_env(self.settings, index), preexec_fn=die_with_parent()
        )
        log.info("worker started", extra={"worker": index, "pid": self.workers[index].pid})

    def signal_all(self, signum: int) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signum)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
        self.signal_all(signum)

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        for index in range(self.settings.server.workers):
            self.start_worker(index)
        code = 0
        while self.workers:
            time.sleep(POLL_S)
            for index, proc in list(self.workers.items()):
                status = proc.poll()
                if status is None:
                    continue
                del self.workers[index]
                if self.stopping:
                    code = code or status
                    continue
                now = time.monotonic()
                self.restarts = [t for t in self.restarts if now - t < RESTART_WINDOW_S] + [now]
                if len(self.restarts) > MAX_RESTARTS:
                    log.error("workers keep dying; stopping", extra={"worker": index, "exit": status})
                    self.stopping = True
                    self.signal_all(signal.SIGTERM)
                    code = 1
                    continue
                log.error("worker died; restarting it", extra={"worker": index, "exit": status})
                self.start_worker(index)
        return code


def serve_workers(settings: Settings) -> int:
    """Run `settings.server.workers` copies of `extproc serve` on one port until SIGTERM."""
    from extproc.server.logs import configure_logging

    configure_logging(settings.logging.level, settings.logging.json_format)
    try:
        supervisor = Supervisor(settings, [sys.executable, "-m", "extproc", "serve"])
    except ValueError as exc:
        log.error(str(exc))
        return 2
    return supervisor.run()
