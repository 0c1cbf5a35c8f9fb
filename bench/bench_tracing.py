"""What tracing costs the ext_proc servicer: messages/s with tracing off, beside the same servicer
with a no-op tracer, with the SDK sampling nothing, and with the SDK recording every stream into an
in-memory exporter (batched, as an OTLP exporter would be), all in one run, rounds interleaved.

Each message is one ext_proc stream of the one-message flow (the buffered body with Envoy's
attributes), fed straight to `ExtProcService.Process` (no gRPC transport: the servicer and the
router only, where tracing's share is largest). The router uses a small keyword policy by default
(the cheapest routing, so the worst case for tracing's share), or `--policy FILE`.

When git is at hand, the servicer from before the tracing hooks runs too (by default the newest
committed `grpc_service.py` without them; `--before REV` names one): "off" beside it is the cost of
the hooks themselves, and a second "off" instance shows the noise floor.

    .venv/bin/python bench/bench_tracing.py [--streams 400] [--rounds 25] [--policy FILE] [--before REV]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import types
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from google.protobuf import struct_pb2

from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.observability.tracing import StreamTracer, build_tracer
from extproc.policy.load import compile_text, load_policy
from extproc.router import Router
from extproc.server.grpc_service import ExtProcService
from extproc.settings import Settings, TracingSettings
from extproc.signals.base import BuildContext

REPO = Path(__file__).resolve().parents[1]
POLICY = """
version: 1
models:
  - {name: code-security, cluster: code_security, upstream_model: Qwen/Qwen2.5-VL-32B-Instruct}
  - {name: general, cluster: general, upstream_model: meta-llama/Llama-3.1-8B-Instruct}
signals:
  - {name: jailbreak, type: keyword, keywords: [jailbreak]}
  - {name: code_present, type: keyword, keywords: [bug]}
  - {name: code_review_words, type: keyword, keywords: [find, bug]}
decisions:
  - name: jailbreak_block
    priority: 20
    when: {signal: jailbreak}
    action: {type: reject, status: 403, message: blocked, code: jailbreak_block}
  - name: code_security_review
    priority: 10
    when: {all: [{signal: code_present}, {signal: code_review_words}]}
    action: {type: route, models: [code-security]}
default: {name: general, action: {type: route, models: [general]}}
"""
TEXTS = ["find the bug in this loop", "what is the capital of France?", "please review: bug in parser"]


class Context:
    """What the servicer asks of a gRPC context: Envoy's call metadata (none here)."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()


def message(text: str, index: int) -> Any:
    body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
    request = ep.ProcessingRequest(request_body=ep.HttpBody(body=body, end_of_stream=True))
    attributes = struct_pb2.Struct()
    attributes.update({"request.path": "/v1/chat/completions", "request.method": "POST", "request.id": f"r{index}"})
    request.attributes["envoy.filters.http.ext_proc"].CopyFrom(attributes)
    return request


async def one(item: Any) -> AsyncIterator[Any]:
    yield item


async def run(service: Any, messages: list[Any], context: Context) -> tuple[float, float]:
    """(CPU us, wall us) per message through `service.Process`, one stream each. CPU time is the
    process's (the span export thread included) and ignores time other processes took the core."""
    cpu, wall = time.process_time(), time.perf_counter()
    for request in messages:
        async for response in service.Process(one(request), context):
            if not response.HasField("request_body") and not response.HasField("immediate_response"):
                raise RuntimeError("unexpected response")
    n = len(messages)
    return (time.process_time() - cpu) * 1e6 / n, (time.perf_counter() - wall) * 1e6 / n


SERVICER = "extproc/server/grpc_service.py"


def git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def servicer_at(rev: str | None) -> tuple[str, type[Any]] | None:
    """(revision, `ExtProcService` as committed there); by default the newest without tracing hooks.
    None when git, the history or the file is not there."""
    if rev is None:
        for candidate in (git("log", "--format=%h", "-n", "50", "--", SERVICER) or "").split():
            if "tracer" not in (git("show", f"{candidate}:{SERVICER}") or "tracer"):
                rev = candidate
                break
    source = git("show", f"{rev}:{SERVICER}") if rev is not None else None
    if rev is None or source is None:
        return None
    module = types.ModuleType("bench_grpc_service_before")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:{SERVICER}", "exec"), module.__dict__)
    service: type[Any] = module.ExtProcService
    return rev, service


def noop_tracer() -> StreamTracer:
    from opentelemetry.trace import NoOpTracer

    return StreamTracer(NoOpTracer())


def sdk_tracer(**fields: Any) -> tuple[StreamTracer, Callable[[], int]]:
    """The SDK batching into an in-memory exporter; returns the tracer and a finished-span counter."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    exporter = InMemorySpanExporter()
    ratio = fields.get("sample_ratio")
    sampler = ParentBased(TraceIdRatioBased(ratio)) if ratio is not None else None
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}), sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1 << 20))

    def finished() -> int:
        provider.force_flush()
        count = len(exporter.get_finished_spans())
        exporter.clear()
        return count

    return StreamTracer(provider.get_tracer("bench"), shutdown=provider.shutdown), finished


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=400, help="streams (messages) per variant per round")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--policy", type=Path, help="policy file (default: a small keyword policy)")
    parser.add_argument("--before", help="git revision of the servicer without tracing hooks (default: found)")
    args = parser.parse_args()

    settings = Settings.load(None, environ={})
    executor = HeavyExecutor(1, None)
    ctx = BuildContext(settings=settings, executor=executor, models=ModelRegistry())
    policy = load_policy(args.policy, ctx) if args.policy else compile_text(POLICY, ctx)
    router = Router(settings, policy, executor=executor, models=ctx.models)
    assert build_tracer(TracingSettings()) is None  # off: the default
    recorded, finished = sdk_tracer()
    unsampled, _ = sdk_tracer(sample_ratio=0.0)

    variants: dict[str, Any] = {}
    before = servicer_at(args.before)
    if before is not None:
        variants[f"before tracing hooks ({before[0]})"] = before[1](router)
    variants["tracing off (default)"] = ExtProcService(router)
    variants["tracing off, again (noise floor)"] = ExtProcService(router)
    variants["no-op tracer (API only)"] = ExtProcService(router, tracer=noop_tracer())
    variants["SDK, sampled out (ratio 0)"] = ExtProcService(router, tracer=unsampled)
    variants["SDK, every stream, in-memory"] = ExtProcService(router, tracer=recorded)

    messages = [message(TEXTS[i % len(TEXTS)], i) for i in range(args.streams)]
    context = Context()
    for service in variants.values():  # warm-up
        await run(service, messages[:300], context)
    finished()
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    wall: dict[str, list[float]] = {name: [] for name in variants}
    for index in range(args.rounds):
        order = list(variants.items())
        order = order[index % len(order) :] + order[: index % len(order)]  # rotate: no variant always first
        for name, service in order:
            cpu_us, wall_us = await run(service, messages, context)
            cpu[name].append(cpu_us)
            wall[name].append(wall_us)
    spans = finished()

    off = statistics.median(cpu["tracing off (default)"])
    print(
        f"ext_proc servicer, one-message flow: {args.streams} streams x {args.rounds} rounds per variant, interleaved;"
        " CPU us per message (median of rounds), msg/s = 1e6 / that (one core), wall us for reference"
    )
    print(f"{'variant':<36} {'msg/s':>8} {'CPU us':>8} {'vs off':>9} {'p25..p75 CPU us':>17} {'wall us':>8}")
    for name in variants:
        values = sorted(cpu[name])
        median = statistics.median(values)
        q1, q3 = values[len(values) // 4], values[(3 * len(values)) // 4]
        print(
            f"{name:<36} {1e6 / median:>8.0f} {median:>8.1f} {median - off:>+8.1f}"
            f" {f'{q1:.1f}..{q3:.1f}':>17} {statistics.median(wall[name]):>8.1f}"
        )
    expected = args.rounds * args.streams
    print(f"spans recorded by the in-memory run: {spans} ({spans / expected:.1f} a stream over {expected} streams)")
    recorded.shutdown()
    unsampled.shutdown()
    executor.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
