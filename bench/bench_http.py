"""The admin port and the demo upstream, this tree's against another revision's, in one run.

    .venv/bin/python bench/bench_http.py                 # against `main`, 2000 requests each
    .venv/bin/python bench/bench_http.py --before REV -n 5000

Each server runs in its own process (the revision's tree from `git archive`, or this one) on a
free loopback port; one client (bench/client.py, aiohttp) sends N sequential requests to each, the same way for
both: `GET /healthz` and `GET /metrics` on the admin port (a fresh connection each, as the admin
server closes every one), and a non-streamed chat completion to the demo upstream (one kept-alive
connection). Prints p50 / p99 latency and requests/s side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.client import fetch, session  # noqa: E402

# Started with PYTHONPATH set to one tree: prints the admin port and the demo upstream's, then
# serves until its stdin closes.
SERVER = """
import asyncio, sys
from extproc.observability.metrics import Metrics
from extproc.ops.demo_upstream import DemoServer, DemoUpstream
from extproc.ops.stack import free_port
from extproc.server.admin import AdminServer
from extproc.settings import Settings

class Target:
    settings = Settings.load(None, environ={})
    state, in_flight, live_router, reloader, conversations = "serving", 0, None, None, None

async def main():
    metrics = Metrics()
    metrics.record_reload("success")
    admin = AdminServer(Target(), host="127.0.0.1", port=0, metrics=metrics, max_body_bytes=1 << 20)
    port = await admin.start()
    demo_port = free_port()
    demo = DemoServer([DemoUpstream("general", "127.0.0.1", demo_port, ("m",), stream_delay_s=0.0)])
    await demo.start()
    print(port, demo_port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await admin.stop()
    await demo.close()

asyncio.run(main())
"""

CHAT = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello there"}]}).encode()


@contextmanager
def tree_at(rev: str) -> Iterator[Path]:
    """The files of `rev` in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        archive = Path(tmp) / "tree.tar"
        subprocess.run(["git", "archive", "-o", str(archive), rev], cwd=REPO, check=True, timeout=60)
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "tree", filter="data")
        yield Path(tmp) / "tree"


@contextmanager
def server(tree: Path) -> Iterator[tuple[int, int]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER], cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        admin_port, demo_port = (int(p) for p in proc.stdout.readline().split())
        yield admin_port, demo_port
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def timed(n: int, url: str, *, post: bool, keep_alive: bool) -> list[float]:
    """N sequential requests; their latencies (s)."""
    latencies = []
    async with session(keep_alive=keep_alive, limit=1) as client:
        for _ in range(n):
            if post:
                reply = await fetch(client, "POST", url, CHAT, {"content-type": "application/json"})
            else:
                reply = await fetch(client, "GET", url)
            assert reply.status == 200, reply.status
            latencies.append(reply.ms / 1000.0)
    return latencies


def figures(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * len(ordered)) - 1)]
    rps = len(ordered) / sum(ordered)
    return f"p50 {statistics.median(ordered) * 1000:6.3f} ms  p99 {p99 * 1000:6.3f} ms  {rps:7.0f} req/s"


async def measure(ports: tuple[int, int], n: int) -> dict[str, str]:
    admin, demo = ports
    out = {}
    for name, url, post, keep in (
        ("admin GET /healthz", f"http://127.0.0.1:{admin}/healthz", False, False),
        ("admin GET /metrics", f"http://127.0.0.1:{admin}/metrics", False, False),
        ("demo POST /v1/chat/completions", f"http://127.0.0.1:{demo}/v1/chat/completions", True, True),
    ):
        await timed(min(200, n), url, post=post, keep_alive=keep)  # warm up
        out[name] = figures(await timed(n, url, post=post, keep_alive=keep))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="main", help="the revision to compare with (default: main)")
    parser.add_argument("-n", type=int, default=2000, help="sequential requests per endpoint (default 2000)")
    args = parser.parse_args()
    with tree_at(args.before) as before_tree, server(before_tree) as ports:
        before = asyncio.run(measure(ports, args.n))
    with server(REPO) as ports:
        after = asyncio.run(measure(ports, args.n))
    print(f"{args.n} sequential requests, one client over loopback")
    for name in before:
        print(f"{name}\n  {args.before:>8}: {before[name]}\n  {'this':>8}: {after[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
