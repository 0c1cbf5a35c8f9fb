"""Per-request overhead of the transport-free core on text-only requests (default policy).

Prints the core's latency beside a baseline measured in the same run: parsing the same
body with json.loads alone, which is the least any router must do. Usage:

    .venv/bin/python bench/bench_core.py [--policy policies/default.yaml] [--iterations 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from extproc.router import Router
from extproc.settings import Settings

REQUESTS = [
    "plain_question.json",
    "passport_text.json",
    "jailbreak.json",
    "code_secret.json",
    "responses_api.json",
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(router: Router, bodies: list[bytes], iterations: int) -> tuple[list[float], list[float]]:
    core: list[float] = []
    baseline: list[float] = []
    for i in range(iterations):
        body = bodies[i % len(bodies)]
        started = time.perf_counter()
        json.loads(body)
        baseline.append((time.perf_counter() - started) * 1e6)
        started = time.perf_counter()
        outcome = await router.route(body)
        if outcome.action == "route":
            outcome.rewritten_body()
        core.append((time.perf_counter() - started) * 1e6)
    return core, baseline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", type=Path, default=Path("policies/default.yaml"))
    parser.add_argument("--iterations", type=int, default=5000)
    args = parser.parse_args()
    settings = Settings.load(None).model_copy(update={"policy_path": args.policy})
    router = Router.from_settings(settings)
    folder = Path("policies/examples/requests")
    bodies = [(folder / name).read_bytes() for name in REQUESTS]
    asyncio.run(measure(router, bodies, 500))  # warm-up
    core, baseline = asyncio.run(measure(router, bodies, args.iterations))
    router.close()
    print(f"text-only requests through Router.route + body rewrite, {args.iterations} iterations, default policy")
    print(f"{'path':<32} {'p50 us':>9} {'p99 us':>9} {'mean us':>9}")
    for name, values in (("baseline: json.loads only", baseline), ("core: parse+signals+decide", core)):
        p50, p99, mean = percentile(values, 0.5), percentile(values, 0.99), statistics.fmean(values)
        print(f"{name:<32} {p50:>9.1f} {p99:>9.1f} {mean:>9.1f}")
    added = percentile(core, 0.5) - percentile(baseline, 0.5)
    print(f"core overhead over baseline at p50: {added:.1f} us (target: well under 1000 us)")


if __name__ == "__main__":
    main()
