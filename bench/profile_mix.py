"""Where the router's CPU goes on the realistic mix, in process (no Envoy, no gRPC).

    nice -n 10 .venv/bin/python bench/profile_mix.py [--requests 1500] [--concurrency 16] [--top 25]

Builds the router `make run` serves (default settings and policy), warms it on texts it will not
see again, then routes `--requests` distinct texts of the mix (`bench/text_mix.py`), `--concurrency`
at a time, on one event loop. Reported: process CPU (all threads) per request; the heavy
executor's thread CPU per request by job function (the encoder's batches and any other model);
the encoder's batches (texts and padded tokens per call); and cProfile's top functions of the
event loop's thread by own time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from text_mix import MIXES  # noqa: E402

from extproc.models.executor import HeavyExecutor  # noqa: E402
from extproc.router import Router  # noqa: E402
from extproc.settings import Settings  # noqa: E402

THREAD_CPU: dict[str, float] = defaultdict(float)
JOBS: Counter[str] = Counter()


def _name(fn: Callable[..., Any]) -> str:
    target = getattr(fn, "func", fn)
    owner = getattr(target, "__self__", None)
    return f"{type(owner).__name__}.{target.__name__}" if owner is not None else getattr(target, "__qualname__", "?")


def _count_executor_cpu() -> None:
    """Wrap the heavy executor's job timer so each job's thread CPU is added up by function."""
    original = HeavyExecutor._timed

    def timed(self: HeavyExecutor, fn: Callable[..., Any], *args: object, **kwargs: object) -> Any:
        started = time.thread_time()
        try:
            return original(self, fn, *args, **kwargs)
        finally:
            name = _name(fn)
            THREAD_CPU[name] += time.thread_time() - started
            JOBS[name] += 1

    HeavyExecutor._timed = timed  # type: ignore[method-assign]


async def route_all(router: Router, bodies: list[bytes], concurrency: int) -> None:
    queue = iter(bodies)

    async def worker() -> None:
        for body in queue:
            await router.route(body)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--mix", choices=sorted(MIXES), default="realistic")
    args = parser.parse_args()

    texts = MIXES[args.mix]()
    bodies = [
        json.dumps({"model": "auto", "messages": [{"role": "user", "content": t}]}).encode()
        for t in texts[-args.warmup :] + texts[: args.requests]
    ]
    router = Router.from_settings(Settings.load(None, environ={}))
    _count_executor_cpu()
    asyncio.run(route_all(router, bodies[: args.warmup], args.concurrency))
    THREAD_CPU.clear()
    JOBS.clear()

    measured = bodies[args.warmup :]
    profile = cProfile.Profile()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    profile.enable()
    asyncio.run(route_all(router, measured, args.concurrency))
    profile.disable()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    n = len(measured)
    print(f"{n} requests at concurrency {args.concurrency}: {n / wall:.0f} req/s in process (profiler on)")
    print(f"process CPU per request {cpu * 1000 / n:.2f} ms (all threads, profiler on)")
    for name, spent in sorted(THREAD_CPU.items(), key=lambda kv: -kv[1]):
        print(f"  heavy executor {name}: {spent * 1000 / n:.2f} ms CPU a request, {JOBS[name]} jobs")
    for coalescer in router_coalescers(router):
        print(f"  coalescer: {coalescer}")
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    return 0


def router_coalescers(router: Router) -> list[str]:
    executor = getattr(router, "executor", None)
    if executor is None:
        return []
    return [
        f"{c.batches} batches, {c.items} texts, {c.shared} shared"
        for c in executor.coalescers()
        if hasattr(c, "batches")
    ]


if __name__ == "__main__":
    sys.exit(main())
