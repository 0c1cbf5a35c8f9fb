"""Model selection's figures, each beside its baseline from the same run.

    .venv/bin/python bench/bench_selection.py [--skip-envoy] [--texts 400]

In process (the Router, no Envoy):
- selection's added p50: the same two-candidate route decided with `ordered` (no fleet) and with
  `latency` over a warm fleet, on the same distinct texts, interleaved;
- the default policy with and without the fleet attached (what every server now runs): p50 per
  request and requests/s, interleaved rounds.

Through the real Envoy (stand-in vLLM servers from `extproc.testing.fleet_upstream`):
- two capable candidates, one 300 ms slower, `latency` with the default explore (5%): the share
  the faster one gets after warm-up, beside `ordered` (which sends everything to the first, the
  slow one);
- one candidate down (its listener closed): client-visible errors over 100 requests with
  `failover: true`, beside the same route without failover;
- `weighted` 80/20: the observed shares over 1,000 requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from extproc.fleet.state import Fleet  # noqa: E402
from extproc.models.executor import HeavyExecutor  # noqa: E402
from extproc.models.registry import ModelRegistry  # noqa: E402
from extproc.ops.envoy_config import EnvoyOptions  # noqa: E402
from extproc.ops.stack import Stack, StackConfig, free_port  # noqa: E402
from extproc.policy.load import compile_text  # noqa: E402
from extproc.router import Router  # noqa: E402
from extproc.settings import Settings  # noqa: E402
from extproc.signals.base import BuildContext  # noqa: E402
from extproc.testing.fleet_upstream import StandIn, StandIns  # noqa: E402

TWO = """
version: 1
models:
  - {{name: slow, cluster: cs, address: "127.0.0.1:{slow}"}}
  - {{name: fast, cluster: cf, address: "127.0.0.1:{fast}"}}
signals:
  - {{name: ordered_kw, type: keyword, keywords: [ordered]}}
  - {{name: failover_kw, type: keyword, keywords: [failover]}}
  - {{name: plain_kw, type: keyword, keywords: [plain]}}
  - {{name: weighted_kw, type: keyword, keywords: [weighted]}}
decisions:
  - {{name: ordered, priority: 40, when: {{signal: ordered_kw}}, action: {{type: route, models: [slow, fast]}}}}
  - name: failover
    priority: 30
    when: {{signal: failover_kw}}
    action: {{type: route, models: [slow, fast], selection: {{algorithm: ordered, failover: true}}}}
  - {{name: plain, priority: 20, when: {{signal: plain_kw}}, action: {{type: route, models: [slow, fast]}}}}
  - name: weighted
    priority: 10
    when: {{signal: weighted_kw}}
    action: {{type: route, models: [slow, fast], selection: {{algorithm: weighted, weights: {{slow: 80, fast: 20}}}}}}
default: {{action: {{type: route, models: [slow, fast], selection: latency}}}}
"""


def texts(n: int) -> list[bytes]:
    subjects = ["tides", "compilers", "tax law", "photosynthesis", "jazz", "glaciers", "bridges", "vaccines"]
    return [
        json.dumps(
            {
                "model": "auto",
                "messages": [{"role": "user", "content": f"Question {i}: explain {subjects[i % 8]} briefly."}],
            }
        ).encode()
        for i in range(n)
    ]


async def in_process(n: int) -> None:
    settings = Settings.load(None, environ={})
    executor = HeavyExecutor(1, None)
    ctx = BuildContext(settings=settings, executor=executor, models=ModelRegistry())
    ordered = Router(
        settings,
        compile_text(TWO.format(slow=1, fast=2).replace("selection: latency", "selection: ordered"), ctx),
        executor=executor,
        models=ctx.models,
    )
    latency = Router(settings, compile_text(TWO.format(slow=1, fast=2), ctx), executor=executor, models=ctx.models)
    fleet = Fleet()
    for _ in range(10):
        fleet.observe("slow", failed=False, latency_s=0.4)
        fleet.observe("fast", failed=False, latency_s=0.1)
    latency.fleet = fleet
    bodies = texts(n)
    times: dict[str, list[float]] = {"ordered": [], "latency": []}
    for _ in range(3):
        for body in bodies:
            for name, router in (("ordered", ordered), ("latency", latency)):
                started = time.perf_counter()
                await router.route(body)
                times[name].append(time.perf_counter() - started)
    p50 = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    print(f"two-candidate route, in process ({len(times['ordered'])} requests each, interleaved):")
    print(f"  ordered (no fleet) p50 {p50['ordered']:.1f} us   latency (warm fleet) p50 {p50['latency']:.1f} us")
    print(f"  selection's added p50: {p50['latency'] - p50['ordered']:.1f} us (target <= 20 us)")

    default = Router.from_settings(settings)
    default_bodies = texts(n)
    rounds: dict[str, list[float]] = {"without fleet": [], "with fleet": []}
    p50s: dict[str, list[float]] = {"without fleet": [], "with fleet": []}
    for _ in range(4):
        for name, attached in (("without fleet", None), ("with fleet", Fleet())):
            default.fleet = attached
            started = time.perf_counter()
            each = []
            for body in default_bodies:
                t0 = time.perf_counter()
                await default.route(body)
                each.append(time.perf_counter() - t0)
            rounds[name].append(len(default_bodies) / (time.perf_counter() - started))
            p50s[name].append(statistics.median(each) * 1e6)
    print("default policy, in process (4 interleaved rounds of distinct texts):")
    for name in rounds:
        print(
            f"  {name:14s} {statistics.median(rounds[name]):8.0f} req/s   p50 {statistics.median(p50s[name]):8.1f} us"
        )
    default.close()
    ordered.close()


def through_envoy() -> None:
    ports = {"slow": free_port(), "fast": free_port()}
    stand_ins = StandIns([StandIn(name, port) for name, port in ports.items()]).start()
    tmp = tempfile.TemporaryDirectory(prefix="vsr-bench-selection-")
    policy = Path(tmp.name) / "policy.yaml"
    policy.write_text(TWO.format(**ports), encoding="utf-8")
    config = StackConfig(
        policy=policy,
        envoy=EnvoyOptions(listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port()),
        external_upstreams=("cs", "cf"),
        env={"VSR_LOGGING__LEVEL": "WARNING", "VSR_SERVER__ADMIN_PORT": str(free_port())},
    )
    stack = Stack(config, sink=lambda line: None)
    stack.start()
    try:
        with httpx.Client(base_url=stack.base_url, timeout=30) as client:

            def ask(text: str) -> httpx.Response:
                body = {"model": "auto", "messages": [{"role": "user", "content": text}]}
                return client.post("/v1/chat/completions", json=body)

            stand_ins["slow"].delay_s = 0.3
            for _ in range(10):  # warm-up: min_samples each, and the reports catching up
                ask("hello")
            latency = Counter(ask("hello").headers.get("x-stand-in") for _ in range(200))
            ordered = Counter(ask("ordered please").headers.get("x-stand-in") for _ in range(50))
            print("two candidates, 'slow' 300 ms slower (through Envoy):")
            print(f"  latency: fast {latency['fast'] / 2:.1f}% of 200 after warm-up (target >= 90%)")
            print(f"  ordered (baseline): fast {ordered['fast'] * 2:.1f}% of 50")
            stand_ins["slow"].delay_s = 0.0

            stand_ins.down("slow")
            failover = Counter(ask("failover please").status_code for _ in range(100))
            plain = Counter(ask("plain please").status_code for _ in range(100))
            stand_ins.up("slow")
            print("one candidate down (its listener closed), 100 requests each:")
            print(f"  failover: client-visible errors {100 - failover[200]} (target 0); statuses {dict(failover)}")
            print(f"  no failover (baseline): client-visible errors {100 - plain[200]}; statuses {dict(plain)}")

            time.sleep(1.0)
            weighted = Counter(ask("weighted please").headers.get("x-stand-in") for _ in range(1000))
            print(
                f"weighted 80/20 over 1,000 requests: slow {weighted['slow'] / 10:.1f}%  "
                f"fast {weighted['fast'] / 10:.1f}%"
            )
    finally:
        stack.stop()
        stand_ins.stop()
        tmp.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--skip-envoy", action="store_true")
    parser.add_argument("--skip-in-process", action="store_true")
    args = parser.parse_args()
    if not args.skip_in_process:
        asyncio.run(in_process(args.texts))
    if not args.skip_envoy:
        through_envoy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
