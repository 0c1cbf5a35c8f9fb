"""Cost of derived signals, and the default policy's throughput beside main's (in process).

1. A decision on a `score` (weighted sum of five keyword signals, two bands) against the same
   decision written as an `any` over those five signals: p50 / p99 per request of Router.route,
   distinct everyday texts, both policies in the same run. The difference is what the score's
   arithmetic and explanation cost over its inputs.
2. `--default-throughput`: requests per second of the default policy over distinct everyday
   texts, run once on this tree and once on another checkout (`--baseline-tree DIR`, e.g. main
   extracted with `git archive`), alternating, in the same run. The default policy uses no derived
   signal, so the two should agree within noise.

    .venv/bin/python bench/bench_derived.py [--texts 400] [--default-throughput --baseline-tree /tmp/main]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KEYWORDS = {
    "k_compare": ["compare", "versus", "trade-offs"],
    "k_design": ["design", "architecture", "system"],
    "k_debug": ["debug", "error", "stack trace"],
    "k_prove": ["prove", "derive", "theorem"],
    "k_plan": ["plan", "steps", "roadmap"],
}
HEAD = """\
version: 1
models:
  - {name: small, cluster: small}
  - {name: big, cluster: big}
signals:
"""


def signals_yaml() -> str:
    return "".join(f"  - {{name: {n}, type: keyword, keywords: {json.dumps(k)}}}\n" for n, k in KEYWORDS.items())


def score_policy() -> str:
    inputs = "".join(f"      - {{signal: {n}, weight: 0.3}}\n" for n in KEYWORDS)
    return (
        HEAD
        + signals_yaml()
        + "  - name: effort\n    type: score\n    inputs:\n"
        + inputs
        + "    bands: [{name: light, lt: 0.5}, {name: heavy, gte: 0.5}]\n"
        + "decisions:\n"
        + "  - {name: heavy, priority: 1, when: {signal: effort, label: heavy}, action: {type: route, models: [big]}}\n"
        + "default: {name: general, action: {type: route, models: [small]}}\n"
    )


def boolean_policy() -> str:
    leaves = ", ".join(f"{{signal: {n}}}" for n in KEYWORDS)
    return (
        HEAD
        + signals_yaml()
        + "decisions:\n"
        + f"  - {{name: heavy, priority: 1, when: {{any: [{leaves}]}}, action: {{type: route, models: [big]}}}}\n"
        + "default: {name: general, action: {type: route, models: [small]}}\n"
    )


def texts(limit: int) -> list[bytes]:
    rows = [json.loads(line) for line in (HERE / "data" / "everyday_requests.jsonl").read_text().splitlines() if line]
    out = []
    for row in rows[:limit]:
        text = row.get("text") or row.get("prompt") or row.get("query") or ""
        out.append(json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode())
    return out


async def latencies(router: object, bodies: list[bytes], rounds: int) -> list[float]:
    out: list[float] = []
    for _ in range(rounds):
        for body in bodies:
            started = time.perf_counter()
            await router.route(body)  # type: ignore[attr-defined]
            out.append((time.perf_counter() - started) * 1e6)
    return out


def derived_cost(n_texts: int) -> None:
    from extproc.router import Router
    from extproc.settings import Settings

    bodies = texts(n_texts)
    results: dict[str, list[float]] = {"score": [], "any": []}
    with tempfile.TemporaryDirectory() as tmp:
        routers = {}
        for name, text in (("score", score_policy()), ("any", boolean_policy())):
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(text)
            settings = Settings.load(None, environ={}).model_copy(update={"policy_path": path})
            routers[name] = Router.from_settings(settings)
        for router in routers.values():
            asyncio.run(latencies(router, bodies, 1))  # warm-up
        for _ in range(5):  # alternate so drift on a shared machine hits both
            for name, router in routers.items():
                results[name] += asyncio.run(latencies(router, bodies, 1))
        for router in routers.values():
            router.close()
    print(f"decision on a score over 5 keyword inputs vs an `any` over them, {len(bodies)} distinct texts x 5")
    for name, values in results.items():
        q = statistics.quantiles(values, n=100)
        print(f"  {name:<6} p50 {statistics.median(values):7.1f} us   p99 {q[98]:7.1f} us")
    print(f"  score - any at p50: {statistics.median(results['score']) - statistics.median(results['any']):+.1f} us")


THROUGHPUT = """
import asyncio, json, sys, time
from pathlib import Path
from extproc.router import Router
from extproc.settings import Settings
bodies = [l.encode() for l in sys.stdin.read().splitlines()]
settings = Settings.load(None, environ={}).model_copy(update={"policy_path": Path("policies/default.yaml")})
router = Router.from_settings(settings)
async def run():
    for b in bodies[:50]:
        await router.route(b)
    started = time.perf_counter()
    for b in bodies:
        await router.route(b)
    return len(bodies) / (time.perf_counter() - started)
print(asyncio.run(run()))
router.close()
"""


def default_throughput(tree: Path, baseline: Path, n_texts: int) -> None:
    payload = b"\n".join(texts(n_texts))
    rates: dict[str, list[float]] = {"this tree": [], "baseline": []}
    for _ in range(3):
        for name, root in (("this tree", tree), ("baseline", baseline)):
            env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
            proc = subprocess.run(
                [sys.executable, "-c", THROUGHPUT], input=payload, capture_output=True, cwd=tree, env=env, check=True
            )
            rates[name].append(float(proc.stdout.decode().strip().splitlines()[-1]))
    print(f"default policy, in process, {n_texts} distinct everyday texts, 3 alternating runs each")
    for name, values in rates.items():
        print(f"  {name:<10} median {statistics.median(values):7.1f} req/s   runs {[round(v, 1) for v in values]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--default-throughput", action="store_true")
    parser.add_argument("--baseline-tree", type=Path)
    args = parser.parse_args()
    derived_cost(args.texts)
    if args.default_throughput:
        if args.baseline_tree is None:
            parser.error("--default-throughput needs --baseline-tree")
        default_throughput(HERE.parent, args.baseline_tree, args.texts)


if __name__ == "__main__":
    main()
