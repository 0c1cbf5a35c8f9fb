"""What a remote guard model would cost the default policy: the share of a realistic mix of
requests it would see, and the latency it adds, with a stand-in guard answering in `--delay-ms`.

    .venv/bin/python bench/bench_guard.py [--delay-ms 20] [--backend vllm_classify] [--limit N]

Two policies route the same texts through the real `Router`, one after the other, in one run:

- `default`: the default policy (its harmful rule confirms an unsure lexical verdict with the
  MiniLM head, `attack_slow`);
- `guarded`: the same, with a `remote_guard` signal (`--backend`, at the stand-in) in place of the
  head on that branch: `all: [{attack_fast: harmful_unsure}, {guard: unsafe}]`; lazy dispatch asks
  the guard only for texts the lexical stage is unsure of.

The mix (`--texts`, default below) is what bench_envoy's `--texts` sends: everyday requests of every
kind, protective and help-seeking questions, subject questions (everyday and exam-style), and the
benign rows of the safety corpus's test split. Reported: how many texts reached the guard (the
stand-in counts what it was asked), the router's p50 / p95 / p99 per policy and the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_safety import build_router, read_jsonl  # noqa: E402

from extproc.router import Router  # noqa: E402
from extproc.testing.guard_stand_in import GuardStandIn  # noqa: E402

DATA = REPO / "bench" / "data"
MIX = (
    "everyday_requests.jsonl",
    "everyday_unseen.jsonl",
    "everyday_safety_questions.jsonl",
    "domain_everyday.jsonl",
    "domain_exam.jsonl",
)
GUARD = "harmful_guard"


def guarded(policy: dict[str, Any], backend: str, url: str) -> dict[str, Any]:
    """The policy with a remote guard in place of the MiniLM head on the harmful rule's unsure branch."""
    out = copy.deepcopy(policy)
    spec: dict[str, Any] = {"name": GUARD, "type": "remote_guard", "backend": backend, "url": url, "timeout_ms": 1000}
    if backend != "tei_predict":
        spec["model"] = "guard"
    out["signals"].append(spec)
    decision = next(d for d in out["decisions"] if d["name"] == "harmful_request")
    branches = decision["when"]["any"]
    for i, branch in enumerate(branches):
        if (
            isinstance(branch, dict)
            and "all" in branch
            and any(leaf.get("signal") == "attack_slow" for leaf in branch["all"])
        ):
            branches[i] = {
                "all": [{"signal": "attack_fast", "label": "harmful_unsure"}, {"signal": GUARD, "label": "unsafe"}]
            }
    return out


async def route_interleaved(routers: dict[str, Router], texts: list[str]) -> dict[str, list[float]]:
    """Each text through every router in turn (the order alternating text by text), so the host's
    other load weighs on all of them alike."""
    latencies: dict[str, list[float]] = {name: [] for name in routers}
    names = list(routers)
    for i, text in enumerate(texts):
        body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
        for name in names if i % 2 == 0 else reversed(names):
            started = time.perf_counter()
            await routers[name].route(body)
            latencies[name].append((time.perf_counter() - started) * 1000.0)
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", type=Path, default=REPO / "policies" / "default.yaml")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "safety")
    parser.add_argument("--texts", type=Path, nargs="*", default=[DATA / name for name in MIX])
    parser.add_argument("--backend", default="vllm_classify", choices=["vllm_classify", "openai_chat", "tei_predict"])
    parser.add_argument("--delay-ms", type=float, default=20.0, help="the stand-in guard's answer time")
    parser.add_argument("--limit", type=int, default=0, help="only the first N texts of the mix (0: all)")
    args = parser.parse_args()

    texts = [row["text"] for path in args.texts for row in read_jsonl(path)]
    test = args.data / "test.jsonl"
    if test.is_file():
        texts += [row["text"] for row in read_jsonl(test) if row["label"] == "benign"]
    if args.limit:
        texts = texts[: args.limit]
    stand_in = GuardStandIn(delay_s=args.delay_ms / 1000.0)
    stand_in.start()
    policy = yaml.safe_load(args.policy.read_text(encoding="utf-8"))
    routers: dict[str, Router] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, document in (("default", policy), ("guarded", guarded(policy, args.backend, stand_in.url))):
                path = Path(tmp) / f"{name}.yaml"
                path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
                routers[name] = build_router(path, None)
            asyncio.run(route_interleaved(routers, texts[:20]))  # warm-up: models loaded
            before = len(stand_in.received)
            results = asyncio.run(route_interleaved(routers, texts[20:]))
            asked = {"guarded": len(stand_in.received) - before}
    finally:
        for router in routers.values():
            router.close()
        stand_in.stop()
    n = len(texts) - 20
    print(f"{n} texts of the realistic mix ({', '.join(p.name for p in args.texts)} + the test split's benign rows)")
    print(f"stand-in guard: {args.backend}, answering in {args.delay_ms:.0f} ms")
    share = asked["guarded"] / n if n else 0.0
    print(f"reached the guard: {asked['guarded']} of {n} ({share:.2%}; target <= 5%)")
    print(f"{'policy':<10} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for name, lat in results.items():
        print(
            f"{name:<10} {statistics.median(lat):>8.2f} {percentile(lat, 0.95):>8.2f} "
            f"{percentile(lat, 0.99):>8.2f} {statistics.fmean(lat):>8.2f}"
        )
    added = statistics.median(results["guarded"]) - statistics.median(results["default"])
    print(f"added p50: {added:+.2f} ms (the guard's {args.delay_ms:.0f} ms fall on {share:.2%} of requests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
