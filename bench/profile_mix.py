"""Where the router's CPU goes on the realistic mix, in process (no Envoy, no gRPC).

    nice -n 10 .venv/bin/python bench/profile_mix.py [--requests 1500] [--concurrency 16] [--top 25]

Builds the router `make run` serves (default settings and policy), warms it on texts it will not
see again, then routes `--requests` distinct texts of the mix (`bench/text_mix.py`), `--concurrency`
at a time, on one event loop. Reported: process CPU (all threads) per request; the heavy
executor's thread CPU per request by job function (the encoder's batches and any other model);
the encoder's batches (texts and padded tokens per call); which signal asked for each text the
encoder computed (`--callers`: the first frame under extproc/signals, extproc/cache or the router
when the text reached the coalescer not cached and not in flight); and cProfile's top functions of
the event loop's thread by own time.
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
CALLERS: Counter[str] = Counter()  # encoder texts computed, by the code that asked for them
PASSES: list[tuple[int, int]] = []  # (texts, padded tokens a text) of every ONNX pass
_ASKERS = ("/extproc/signals/", "/extproc/cache/", "/extproc/router.py")


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


def _asker(frame: Any) -> str:
    """The first two frames in a signal, the cache or the router (a cascade and its signal)."""
    found: list[str] = []
    while frame is not None and len(found) < 2:
        name = frame.f_code.co_filename
        if any(part in name for part in _ASKERS):
            found.append(f"{Path(name).stem}.{frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(found) or "?"


def _count_encoder_texts() -> None:
    """Attribute each text the coalescer will compute (not cached, not already in flight) to its
    asker, and record every ONNX pass's shape."""
    from extproc.models import text_embedder
    from extproc.models.executor import Coalescer

    original_call = Coalescer.__call__

    async def call(self: Coalescer, texts: Any) -> Any:
        asker = _asker(sys._getframe(1))
        for text in dict.fromkeys(texts):
            if text not in self._waiting and (self.cached is None or self.cached(text) is None):
                CALLERS[asker] += 1
        return await original_call(self, texts)

    Coalescer.__call__ = call  # type: ignore[method-assign]
    original_padded = text_embedder._OnnxEncoder.padded

    def padded(self: Any, token_ids: Any) -> Any:
        ids, mask = original_padded(self, token_ids)
        PASSES.append((int(ids.shape[0]), int(ids.shape[1])))
        return ids, mask

    text_embedder._OnnxEncoder.padded = padded  # type: ignore[method-assign]


def encoder_report(router: Router, n: int) -> None:
    for asker, count in CALLERS.most_common():
        print(f"  encoder texts asked by {asker}: {count} ({count / n:.3f} a request)")
    if PASSES:
        texts = sum(t for t, _ in PASSES)
        tokens = sorted(length for t, length in PASSES for _ in range(t))
        padded = sum(t * length for t, length in PASSES)
        print(
            f"  ONNX passes: {len(PASSES)} for {texts} texts; padded tokens a text median "
            f"{tokens[len(tokens) // 2]}, p90 {tokens[int(len(tokens) * 0.9)]}, max {tokens[-1]}; "
            f"{padded / n:.1f} padded tokens a request"
        )
    executor = getattr(router, "executor", None)
    for coalescer in executor.coalescers() if executor is not None else []:
        encoder = getattr(getattr(coalescer.fn, "__self__", None), "_onnx", None)
        session = getattr(encoder, "session", None)
        if session is not None:
            options = session.get_session_options()
            print(
                f"  ORT: intra_op {options.intra_op_num_threads}, inter_op {options.inter_op_num_threads}, "
                f"graph level {options.graph_optimization_level}, one text a pass {encoder.one_text_a_pass}, "
                f"executor workers {executor.workers}"
            )


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
    parser.add_argument(
        "--env", action="append", default=[], metavar="VSR_KEY=VALUE", help="a setting, as the server reads it"
    )
    args = parser.parse_args()

    texts = MIXES[args.mix]()
    bodies = [
        json.dumps({"model": "auto", "messages": [{"role": "user", "content": t}]}).encode()
        for t in texts[-args.warmup :] + texts[: args.requests]
    ]
    router = Router.from_settings(Settings.load(None, environ=dict(e.split("=", 1) for e in args.env)))
    _count_executor_cpu()
    _count_encoder_texts()
    asyncio.run(route_all(router, bodies[: args.warmup], args.concurrency))
    THREAD_CPU.clear()
    JOBS.clear()
    CALLERS.clear()
    PASSES.clear()

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
    encoder_report(router, n)
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
