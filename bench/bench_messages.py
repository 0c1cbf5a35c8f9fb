"""Anthropic Messages through Envoy beside the same request as Chat, and the conversation store's
lookup, each beside its baseline measured in the same run.

    .venv/bin/python bench/bench_messages.py [--requests 300] [--redis]

Through a real stack (Envoy, `extproc serve`, demo upstreams answering at once), sequential
requests on one keep-alive connection, distinct texts, the kinds interleaved round by round so
drift on a shared host hits all alike:

- chat -> general (native)             the baseline
- messages -> general (pass-through)   target: p50 within 10% of the baseline
- chat -> general-vlm                  the baseline for translation (the same upstream)
- messages -> general-vlm (translated: request to Chat, the JSON answer back)
- the same two streamed (the answer's SSE translated event by event; events counted)

The store lookup: `Conversations.follow` over the real Router for a Responses follow-up whose
id is known (memory store; `--redis`: a real redis-server started here), beside the same request
with no store at all (the lookup's added cost is the difference of p50s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.client import Client
from extproc.conversations.service import Conversations, response_key, tenant_scope
from extproc.conversations.store import ConversationStore, MemoryStore, RedisStore
from extproc.ops.envoy_config import EnvoyOptions
from extproc.ops.paths import DEFAULT_POLICY
from extproc.ops.stack import Stack, StackConfig, free_port, loopback_overrides
from extproc.router import Router
from extproc.settings import Settings
from extproc.testing.redis_server import running_redis


def policy_with_openai_only(directory: Path) -> Path:
    data = yaml.safe_load(DEFAULT_POLICY.read_text())
    for model in data["models"]:
        if model["name"] == "general-vlm":
            model["api"] = ["openai"]
    path = directory / "policy.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def body(kind: str, model: str, text: str, stream: bool) -> tuple[str, bytes]:
    messages = [{"role": "user", "content": text}]
    if kind == "chat":
        return "/v1/chat/completions", json.dumps({"model": model, "messages": messages, "stream": stream}).encode()
    payload = {"model": model, "max_tokens": 64, "messages": messages, "stream": stream}
    return "/v1/messages", json.dumps(payload).encode()


KINDS = [
    ("chat -> general (baseline)", "chat", "auto", False),
    ("messages -> general (pass-through)", "messages", "auto", False),
    ("chat -> general-vlm (baseline)", "chat", "general-vlm", False),
    ("messages -> general-vlm (translated)", "messages", "general-vlm", False),
    ("chat stream -> general-vlm (baseline)", "chat", "general-vlm", True),
    ("messages stream -> general-vlm (translated)", "messages", "general-vlm", True),
]


def through_envoy(requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        policy = policy_with_openai_only(Path(tmp))
        config = StackConfig(
            policy=policy,
            envoy=EnvoyOptions(
                listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port(), access_log=False
            ),
            upstream_overrides=loopback_overrides(policy),
            env={
                "VSR_LOGGING__LEVEL": "WARNING",
                "VSR_SERVER__ADMIN_PORT": str(free_port()),
                "VSR_CACHE__ENABLED": "false",
            },
            stream_delay_ms=0.0,
            start_timeout_s=180.0,
        )
        stack = Stack(config, sink=lambda line: None)
        stack.start()
        try:
            times: dict[str, list[float]] = {name: [] for name, *_ in KINDS}
            events: dict[str, int] = {name: 0 for name, *_ in KINDS}
            with Client(timeout_s=30) as client:
                for round_index in range(requests + 20):
                    for name, kind, model, stream in KINDS:
                        path, data = body(kind, model, f"Tell me a fact about the number {round_index}.", stream)
                        reply = client.post(stack.base_url + path, data, {"content-type": "application/json"})
                        if reply.status != 200:
                            raise SystemExit(f"{name}: {reply.status} {reply.text[:200]}")
                        if round_index >= 20:  # warm-up rounds are not counted
                            times[name].append(reply.ms / 1000.0)
                            if stream:
                                events[name] += reply.text.count("\n\n")
        finally:
            stack.stop()
    p50 = {name: statistics.median(values) * 1000 for name, values in times.items()}
    print(f"through Envoy, {requests} sequential requests each, distinct texts, kinds interleaved:")
    print(f"{'kind':48} {'p50 ms':>8} {'p90 ms':>8} {'events/req':>10}")
    for name, values in times.items():
        p90 = statistics.quantiles(values, n=10)[-1] * 1000
        per = f"{events[name] / len(values):.1f}" if events[name] else "-"
        print(f"{name:48} {p50[name]:8.2f} {p90:8.2f} {per:>10}")

    def versus(name: str, baseline: str) -> str:
        return f"{p50[name]:.2f} ms vs {p50[baseline]:.2f} ms: {p50[name] / p50[baseline] * 100 - 100:+.1f}%"

    print("pass-through vs chat:          ", versus("messages -> general (pass-through)", "chat -> general (baseline)"))
    print(
        "translated JSON vs chat:       ",
        versus("messages -> general-vlm (translated)", "chat -> general-vlm (baseline)"),
    )
    stream_name, stream_base = "messages stream -> general-vlm (translated)", "chat stream -> general-vlm (baseline)"
    print("translated stream vs chat:     ", versus(stream_name, stream_base))
    per_event = (p50[stream_name] - p50[stream_base]) / max(events[stream_name] / len(times[stream_name]), 1)
    print(f"translated stream, added per Messages event: {per_event * 1000:.1f} us (p50 difference / events)")


async def lookups(store: ConversationStore, label: str, requests: int) -> None:
    settings = Settings.load(None, environ={})
    router = Router.from_settings(settings.model_copy(update={"policy_path": DEFAULT_POLICY}))
    try:
        service = Conversations(store)
        tenant = {"authorization": "Bearer bench"}
        scope = tenant_scope(tenant)
        for index in range(requests):
            await store.put(response_key(scope, f"resp_{index}"), "general-vlm", 600)
        bodies = [
            json.dumps(
                {"model": "auto", "input": f"and then, number {i}?", "previous_response_id": f"resp_{i}"}
            ).encode()
            for i in range(requests)
        ]
        routed, followed = [], []
        for data in bodies:
            outcome = await router.route(data, path="/v1/responses")
            started = time.perf_counter()
            lookup = await service.follow(outcome, router.policy.spec, tenant=tenant, session=None)
            followed.append(time.perf_counter() - started)
            routed.append(outcome.timings_ms["total"] / 1000)
            assert lookup.state == "followed", lookup
        print(
            f"store lookup ({label}): p50 {statistics.median(followed) * 1e6:.0f} us added to the routing's "
            f"p50 {statistics.median(routed) * 1e6:.0f} us (the same requests, no store); "
            f"{requests}/{requests} followed"
        )
    finally:
        router.close()
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--redis", action="store_true", help="also time the Redis store (starts redis-server)")
    parser.add_argument("--no-envoy", action="store_true", help="only the store lookups")
    args = parser.parse_args()
    if not args.no_envoy:
        through_envoy(args.requests)
    asyncio.run(lookups(MemoryStore(), "memory", args.requests))
    if args.redis:
        with running_redis() as url:
            asyncio.run(lookups(RedisStore(url, timeout_s=0.5), "redis", args.requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
