"""The encoder's batching window against p99 at 16 connections, beside the floor, in one run.

    nice -n 10 .venv/bin/python bench/window_curve.py [--windows 0 1 2 4 8] [--rounds 3] [--duration 5]

One router stack (Envoy + `extproc serve` + a direct-response upstream, as `bench_envoy.py` builds
it) per `embedder.batch_window_ms` value, and one floor stack (`bench/floor_servicer.py`), all up
at once. Then `--rounds` rounds: in each, every stack gets `--sequential` requests one at a time
(what a lone request pays for the window) and a `--duration` s throughput phase at
`--concurrency` connections; the order of the stacks rotates from round to round, so load from
elsewhere on the host weighs on all alike. Every stack takes the mix's texts from where it
stopped, so no stack sees a text twice (no per-text cache answers). Reported per window: the
medians over rounds of req/s, p50 and p99 at the concurrency, server CPU ms a request, the
sequential p50, the texts encoded and the encoder work refused by admission (the request's
deadline would pass first: the signal answers unknown) per request at the concurrency, from the
server's /metrics, and the floor's req/s and p99 from the same rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_envoy import FloorStack, bench_stack, chat_payloads, counters, cpu_seconds, request_bodies  # noqa: E402
from loadgen import run_load  # noqa: E402
from text_mix import MIXES  # noqa: E402

from extproc.ops.stack import Stack, free_port  # noqa: E402


@dataclass
class Curve:
    """One stack's rounds: what each measured."""

    name: str
    stack: Stack
    port: int
    admin_port: int | None = None
    cursor: int = 0
    rps: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    sequential_p50: list[float] = field(default_factory=list)
    encoded: list[float] = field(default_factory=list)  # texts encoded a request, throughput phases
    refused: list[float] = field(default_factory=list)  # encoder texts or jobs refused a request
    errors: int = 0

    def row(self, floor: Curve) -> str:
        med = statistics.median
        return (
            f"| {self.name} | {med(self.rps):.0f} ({med(self.rps) / med(floor.rps):.0%}) | {med(self.p50):.0f} | "
            f"{med(self.p99):.0f} ({med(self.p99) / med(floor.p99):.1f}x) | {med(self.cpu_ms):.2f} | "
            f"{med(self.sequential_p50):.1f} | {med(self.encoded) if self.encoded else 0:.2f} | "
            f"{med(self.refused) if self.refused else 0:.2f} | {self.errors} |"
        )


async def one_round(curve: Curve, payloads: list[bytes], args: argparse.Namespace) -> None:
    pid = curve.stack.procs["extproc"].pid
    alone = await run_load("127.0.0.1", curve.port, payloads, concurrency=1, total=args.sequential, start=curve.cursor)
    curve.cursor += alone.count + alone.errors
    before, seen = cpu_seconds(pid), counters(curve.admin_port)
    load = await run_load(
        "127.0.0.1", curve.port, payloads, concurrency=args.concurrency, duration_s=args.duration, start=curve.cursor
    )
    curve.cpu_ms.append((cpu_seconds(pid) - before) * 1000.0 / max(1, load.count))
    if curve.admin_port is not None:
        now = counters(curve.admin_port)
        curve.encoded.append((now["vsr_encoder_texts_total"] - seen["vsr_encoder_texts_total"]) / max(1, load.count))
        curve.refused.append((now["vsr_heavy_refused_total"] - seen["vsr_heavy_refused_total"]) / max(1, load.count))
    curve.cursor += load.count + load.errors + args.concurrency
    curve.rps.append(load.rps)
    curve.p50.append(load.percentile_ms(50))
    curve.p99.append(load.percentile_ms(99))
    curve.sequential_p50.append(alone.percentile_ms(50))
    curve.errors += alone.errors + load.errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", type=Path, default=REPO / "policies" / "default.yaml")
    parser.add_argument("--windows", type=float, nargs="+", default=[0, 1, 2, 4, 8], help="batch_window_ms values")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of each throughput phase")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sequential", type=int, default=200, help="one-at-a-time requests a round")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--mix", choices=sorted(MIXES), default="realistic")
    args = parser.parse_args()
    stack_args = argparse.Namespace(
        log_level="WARNING", workers=1, event_loop="asyncio", upstream="direct", envoy_concurrency=None
    )

    bodies = request_bodies(0, MIXES[args.mix]())
    tmp = tempfile.TemporaryDirectory(prefix="vsr-window-")
    logs: list[str] = []
    curves: list[Curve] = []
    print(f"starting {len(args.windows)} router stacks and the floor ...", flush=True)
    started = time.perf_counter()
    try:
        floor_stack, floor_options, _, _ = bench_stack(
            args.policy, stack_args, Path(tmp.name) / "floor", logs, FloorStack
        )
        floor = Curve("floor", floor_stack, floor_options.listener_port)
        curves.append(floor)
        for window in args.windows:
            admin = free_port()
            env = {"VSR_EMBEDDER__BATCH_WINDOW_MS": str(window), "VSR_SERVER__ADMIN_PORT": str(admin)}
            stack, options, _, _ = bench_stack(args.policy, stack_args, Path(tmp.name) / f"w{window}", logs, env=env)
            curves.append(Curve(f"{window:g} ms", stack, options.listener_port, admin))
        print(f"stacks up in {time.perf_counter() - started:.0f}s", flush=True)
        payloads = {id(c): chat_payloads(c.port, bodies) for c in curves}
        for c in curves:
            warm = asyncio.run(
                run_load("127.0.0.1", c.port, payloads[id(c)], concurrency=args.concurrency, total=args.warmup)
            )
            c.cursor = warm.count + warm.errors
        for r in range(args.rounds):
            shift = r % len(curves)
            for c in curves[shift:] + curves[:shift]:
                asyncio.run(one_round(c, payloads[id(c)], args))
            print(f"round {r + 1}/{args.rounds} done, load average {os.getloadavg()[0]:.1f}", flush=True)
    except Exception as exc:
        print("\n".join(logs[-40:]), file=sys.stderr)
        print(f"window curve: {exc}", file=sys.stderr)
        return 1
    finally:
        for c in curves:
            c.stack.stop()
        tmp.cleanup()

    print()
    print(
        f"{args.mix} mix, {len(bodies)} distinct texts, none sent twice to a server; {args.concurrency} connections, "
        f"{args.rounds} rounds of {args.duration:g} s, medians over rounds; load average (1 min) at the end "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"| batch window | req/s (of the floor's) | p50 at {args.concurrency} ms | p99 at {args.concurrency} ms "
        "(x the floor's) | server CPU ms/request | sequential p50 ms | texts encoded/request | refused/request | "
        "errors |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in [*curves[1:], floor]:
        print(c.row(floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
