"""The remote guard path through Envoy: the added p50 and the share of the realistic mix it sees.

    .venv/bin/python bench/bench_guard_envoy.py [--delay-ms 20] [--latency-requests 1500]

One run: a stand-in guard (`extproc.testing.guard_stand_in`, vLLM `/classify` wire format) answering
in `--delay-ms`; then `bench/bench_envoy.py --mix realistic` three times on the same host, the
default policy, the guarded policy (`bench_guard.guarded`: the guard in place of the MiniLM head on
the harmful rule's unsure branch), the default policy again, so the host's drift shows. Reported:
each run's one-message p50 / p99, the guarded p50 minus the mean of the two default p50s, and how
many requests reached the guard of those the guarded stack served (sequential phase, warm-up and
throughput phase alike: `bench_envoy`'s request counts). The share of the mix's distinct texts the
lexical stage is unsure of (what lazy dispatch sends the guard) is counted offline too, without
Envoy: it does not depend on the host's load.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_guard import guarded  # noqa: E402
from text_mix import MIXES  # noqa: E402

from extproc.models.attack_classifier import load_outputs  # noqa: E402
from extproc.testing.guard_stand_in import GuardStandIn  # noqa: E402

ONE_MESSAGE = re.compile(r"^ext_proc, 1 message\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.MULTILINE)


def unsure_share(texts: list[str], policy: dict[str, Any]) -> tuple[int, int]:
    """(texts the harmful output's lexical stage is unsure of under `policy`, texts): what lazy
    dispatch sends the guard, which reads every script (the MiniLM head reads Latin only)."""
    harmful = load_outputs()["harmful"]
    th = harmful.thresholds
    lexical = next(
        s for s in policy["signals"] if s.get("model") == "builtin:prompt-attack" and s.get("stage") == "lexical"
    )
    override = (lexical.get("thresholds") or {}).get("harmful")
    unsure = 0
    for text in texts:
        p = harmful.lexical_score(text)
        unsure += int(th.low <= p < (override if override is not None else th.sure_for(text)))
    return unsure, len(texts)


def bench_envoy(policy: Path, args: argparse.Namespace) -> str:
    command = [
        sys.executable, str(REPO / "bench" / "bench_envoy.py"), "--policy", str(policy), "--mix", "realistic",
        "--latency-requests", str(args.latency_requests), "--warmup", str(args.warmup),
        "--duration", str(args.duration),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout_s, check=False)
    if done.returncode not in (0, 1):  # 1: a target missed, still a measurement
        raise SystemExit(f"bench_envoy failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", type=Path, default=REPO / "policies" / "default.yaml")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--latency-requests", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--duration", type=float, default=3.0, help="bench_envoy's throughput phase, seconds")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per bench_envoy run")
    args = parser.parse_args()

    texts = MIXES["realistic"]()
    policy = yaml.safe_load(args.policy.read_text(encoding="utf-8"))
    unsure, total = unsure_share(texts, policy)
    print(f"realistic mix: {total} distinct texts; the harmful lexical stage is unsure of {unsure} "
          f"({unsure / total:.2%}; target <= 5%): what lazy dispatch would send the guard")  # fmt: skip
    stand_in = GuardStandIn(delay_s=args.delay_ms / 1000.0)
    stand_in.start()
    p50: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            guarded_path = Path(tmp) / "guarded.yaml"
            guarded_path.write_text(
                yaml.safe_dump(guarded(policy, "vllm_classify", stand_in.url), sort_keys=False), encoding="utf-8"
            )
            for name, path in (("default", args.policy), ("guarded", guarded_path), ("default", args.policy)):
                before = len(stand_in.received)
                out = bench_envoy(path, args)
                found = ONE_MESSAGE.search(out)
                if found is None:
                    raise SystemExit(f"no one-message row in bench_envoy's output:\n{out[-3000:]}")
                p50.setdefault(name, []).append(float(found.group(1)))
                asked = len(stand_in.received) - before
                print(f"{name:<8} one message: p50 {found.group(1)} ms, p99 {found.group(2)} ms; "
                      f"guard asked {asked} times", flush=True)  # fmt: skip
    finally:
        stand_in.stop()
    base = sum(p50["default"]) / len(p50["default"])
    print(f"added p50 (guarded - mean of the two default runs): {p50['guarded'][0] - base:+.2f} ms, "
          f"guard answering in {args.delay_ms:.0f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
