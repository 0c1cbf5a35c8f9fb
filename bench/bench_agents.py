"""The tool rules' response phase through the real Envoy, beside the request-only path, in one run.

    .venv/bin/python bench/bench_agents.py [--requests 200]

One stack (`make run`'s: Envoy, the ext_proc server with the default policy, demo upstreams with
no generation delay). Sequential requests, one at a time, per case:

- baseline: a chat request without tools (ext_proc sees only the request body);
- tools offered, text answer: the response phase runs (JSON buffered), nothing to judge;
- tools offered, a harmless tool call (scripted by x-demo-reply): judged, released unchanged;
- the same two, streamed: the gate holds the call until the end of the stream.

Prints p50 / p95 latency per case and what each adds over the baseline. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.client import Client  # noqa: E402
from extproc.ops.demo_upstream import encode_demo_reply  # noqa: E402
from extproc.ops.envoy_config import EnvoyOptions  # noqa: E402
from extproc.ops.stack import Stack, StackConfig, free_port, loopback_overrides  # noqa: E402

POLICY = REPO / "policies" / "default.yaml"
TOOLS = [{"type": "function", "function": {"name": "save_memory", "parameters": {"type": "object"}}}]
CALL = {
    "content": None,
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "save_memory", "arguments": json.dumps({"text": "the user prefers tea"})},
        }
    ],
}


def post(client: Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> float:
    """One request on a new connection, its body read whole: the latency in ms."""
    reply = client.post(url, json.dumps(body).encode(), {"content-type": "application/json", **headers})
    if reply.status != 200:
        raise RuntimeError(f"status {reply.status}")
    return reply.ms


def cases(n: int) -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
    def chat(i: int, stream: bool, tools: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": "auto",
            "stream": stream,
            "messages": [{"role": "user", "content": f"Say hello number {i}."}],
        }
        if tools:
            body["tools"] = TOOLS
        return body

    scripted = {"x-demo-reply": encode_demo_reply(CALL)}
    return {
        "baseline (no tools)": (chat(0, False, False), {}),
        "tools offered, text answer": (chat(0, False, True), {}),
        "tools offered, tool call": (chat(0, False, True), scripted),
        "stream baseline (no tools)": (chat(0, True, False), {}),
        "stream, tools offered, text": (chat(0, True, True), {}),
        "stream, tools offered, call": (chat(0, True, True), scripted),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    overrides = loopback_overrides(POLICY)
    config = StackConfig(
        policy=POLICY,
        envoy=EnvoyOptions(
            listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port(), access_log=False
        ),
        upstream_overrides=overrides,
        env={
            "VSR_LOGGING__LEVEL": "WARNING",
            "VSR_SERVER__ADMIN_PORT": str(free_port()),
            "VSR_CACHE__ENABLED": "false",
        },
        stream_delay_ms=0.0,
    )
    stack = Stack(config, sink=lambda line: None)
    stack.start()
    client = Client(timeout_s=30, keep_alive=False)
    try:
        url = stack.base_url + "/v1/chat/completions"
        results: dict[str, list[float]] = {}
        plan = cases(args.requests)
        for body, headers in plan.values():  # warm up every path once
            post(client, url, body, headers)
        for _ in range(args.requests):  # interleaved, so drift on a shared machine hits every case alike
            for name, (body, headers) in plan.items():
                results.setdefault(name, []).append(post(client, url, body, headers))
        print(f"{'case':<32} {'p50 ms':>8} {'p95 ms':>8} {'+p50 vs its baseline':>22}")
        for name, times in results.items():
            base = results["stream baseline (no tools)" if name.startswith("stream") else "baseline (no tools)"]
            p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[18]
            print(f"{name:<32} {p50:>8.2f} {p95:>8.2f} {p50 - statistics.median(base):>+22.2f}")
        print(f"({args.requests} requests per case, interleaved, one at a time; cache off; demo upstream delay 0)")
    finally:
        client.close()
        stack.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
