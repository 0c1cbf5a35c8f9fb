"""The event loop's CPU per request on the realistic mix, by item, measured by thread CPU (no profiler).

    nice -n 10 .venv/bin/python bench/profile_items.py [--requests 1500] [--concurrency 16] [--rounds 3]

cProfile inflates Python-heavy functions several-fold (docs/profile_cuts_issue43.md), so this
times each item by `time.thread_time()` around it instead: the body's parsing, every signal run
inline (keyword, jailbreak, classifier first stages, ...) and every heavy signal's `answer_now`
(the first stages that settle a text without the encoder), by signal type; the policy's decision;
and the rest of the loop thread's CPU (the lazy dispatch, per-request objects, asyncio). The
heavy executor's threads (the encoder) are not in these figures: `profile_mix.py` reports them.

After a warm-up on texts not measured, each round routes its own distinct texts (no per-text
cache answers); the figures are each item's median over rounds. Two runs (main, a branch) on the
same `--requests`/`--rounds` route the same texts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_mix import route_all  # noqa: E402
from text_mix import MIXES  # noqa: E402

import extproc.router as router_module  # noqa: E402
from extproc.router import Router  # noqa: E402
from extproc.settings import Settings  # noqa: E402
from extproc.signals.dispatch import Dispatcher  # noqa: E402

ITEMS: dict[str, float] = defaultdict(float)
BY_NAME = "--by-name" in sys.argv  # inline signals by name (set before `instrument`)


def _inline_item(signal: Any, request: Any) -> str:
    return f"inline {signal.type} {signal.name}" if BY_NAME else f"inline {signal.type}"


def _timed(name_of: Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            ITEMS[name_of(*args, **kwargs)] += time.thread_time() - started

    return wrapper


def instrument() -> None:
    """Time parsing, each inline signal's run, each heavy signal's answer_now and the decision."""
    router_module.parse_request = _timed(lambda *a, **k: "parse body", router_module.parse_request)
    router_module.decide = _timed(lambda *a, **k: "policy decide", router_module.decide)
    router_module.next_needed = _timed(lambda *a, **k: "policy next_needed", router_module.next_needed)
    Dispatcher._run_inline = staticmethod(  # type: ignore[method-assign]
        _timed(_inline_item, Dispatcher._run_inline)
    )
    Dispatcher._answer_now = staticmethod(  # type: ignore[method-assign]
        _timed(lambda signal, request: f"answer_now {signal.type}", Dispatcher._answer_now)
    )


def bodies_of(texts: list[str]) -> list[bytes]:
    return [json.dumps({"model": "auto", "messages": [{"role": "user", "content": t}]}).encode() for t in texts]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mix", choices=sorted(MIXES), default="realistic")
    parser.add_argument(
        "--env", action="append", default=[], metavar="VSR_KEY=VALUE", help="a setting, as the server reads it"
    )
    parser.add_argument("--by-name", action="store_true", help="inline signals by name, not by type")
    args = parser.parse_args()

    texts = MIXES[args.mix]()
    need = args.requests * args.rounds
    if args.warmup + need > len(texts):
        raise SystemExit(f"the mix has {len(texts)} texts; warm-up + measured needs {args.warmup + need}")
    warm = bodies_of(texts[-args.warmup :])
    router = Router.from_settings(Settings.load(None, environ=dict(e.split("=", 1) for e in args.env)))
    instrument()
    asyncio.run(route_all(router, warm, args.concurrency))

    per_round: dict[str, list[float]] = defaultdict(list)
    for r in range(args.rounds):
        start = r * args.requests
        measured = bodies_of(texts[start : start + args.requests])
        ITEMS.clear()
        loop0, proc0 = time.thread_time(), time.process_time()
        asyncio.run(route_all(router, measured, args.concurrency))
        loop_cpu, proc_cpu = time.thread_time() - loop0, time.process_time() - proc0
        n = len(measured)
        timed = sum(ITEMS.values())  # every item runs on the loop thread
        per_round["process CPU (all threads)"].append(proc_cpu * 1e6 / n)
        per_round["event loop thread CPU"].append(loop_cpu * 1e6 / n)
        per_round["loop: rest (dispatch, objects, asyncio)"].append((loop_cpu - timed) * 1e6 / n)
        for name, spent in ITEMS.items():
            per_round[name].append(spent * 1e6 / n)

    print(f"{args.requests} requests x {args.rounds} rounds at concurrency {args.concurrency}; us a request:")
    for name, values in sorted(per_round.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {statistics.median(values):9.1f}  {name}  (rounds: {', '.join(f'{v:.0f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
