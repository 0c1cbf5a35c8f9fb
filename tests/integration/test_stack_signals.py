"""`extproc stack` (what `make run` runs), stopped by SIGTERM, SIGINT or SIGKILL: the ext_proc
server, Envoy, the demo upstreams and the demo MCP server all end and free their ports, also when
the supervisor itself is killed outright and runs no handler."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from extproc.ops.stack import free_port, loopback_overrides, port_open
from extproc.server.children import parent_death_signal_supported

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "policies" / "default.yaml"


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def descendants(root: int) -> dict[int, str]:
    """Every process below `root`, each with its start time (so a reused pid is not taken for it)."""
    parent_of: dict[int, int] = {}
    started: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            parent_of[int(entry)] = int(fields[1])
            started[int(entry)] = fields[19]
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        current = frontier.pop()
        for pid, parent in parent_of.items():
            if parent == current and pid not in found:
                found[pid] = started[pid]
                frontier.append(pid)
    return found


def still_running(processes: dict[int, str]) -> list[int]:
    running = []
    for pid, started in processes.items():
        fields = _stat(pid)
        if fields is not None and fields[19] == started and fields[0] != "Z":
            running.append(pid)
    return running


def policy_on(upstreams: dict[str, str], path: Path) -> Path:
    """The default policy with every model and MCP server at the given free ports. Not through
    `--upstream`, which names a running server for which the stack starts no demo upstream."""
    document = yaml.safe_load(POLICY.read_text(encoding="utf-8"))
    for entry in [*document.get("models", []), *document.get("mcp", {}).get("servers", [])]:
        if isinstance(entry, dict) and entry.get("cluster") in upstreams:
            entry["address"] = upstreams[entry["cluster"]]
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.skipif(not parent_death_signal_supported(), reason="needs Linux prctl")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_every_child_goes_when_the_supervisor_goes(signum: signal.Signals, tmp_path: Path) -> None:
    upstreams = loopback_overrides(POLICY)
    policy = policy_on(upstreams, tmp_path / "policy.yaml")
    listener, admin, grpc, router_admin = free_port(), free_port(), free_port(), free_port()
    command = [sys.executable, "-m", "extproc", "stack", "--policy", str(policy)]
    command += ["--listen", f"127.0.0.1:{listener}", "--admin", f"127.0.0.1:{admin}", "--ext-proc", f"127.0.0.1:{grpc}"]
    env = {**os.environ, "VSR_SERVER__ADMIN_PORT": str(router_admin), "VSR_LOGGING__LEVEL": "WARNING"}
    supervisor = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO)
    assert supervisor.stdout is not None
    lines: list[str] = []
    up = threading.Event()

    def read() -> None:
        assert supervisor.stdout is not None
        for raw in iter(supervisor.stdout.readline, b""):
            lines.append(raw.decode("utf-8", "replace").rstrip())
            if lines[-1].startswith("stack up:"):
                up.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    children: dict[int, str] = {}
    try:
        assert up.wait(240), "\n".join(lines[-40:])
        children = descendants(supervisor.pid)
        ports = [listener, admin, grpc, router_admin] + [int(a.rsplit(":", 1)[1]) for a in upstreams.values()]
        assert all(port_open("127.0.0.1", port) for port in ports)
        # Envoy, the server, the demo upstreams' process and the demo MCP server at least.
        assert len(children) >= 4, children

        supervisor.send_signal(signum)
        code = supervisor.wait(60)
        assert code == (-signal.SIGKILL if signum == signal.SIGKILL else 0), "\n".join(lines[-40:])
        deadline = time.monotonic() + 30
        while still_running(children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert still_running(children) == []
        assert [port for port in ports if port_open("127.0.0.1", port)] == []
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait(10)
        for pid in still_running(children):
            os.kill(pid, signal.SIGKILL)
        reader.join(5)
