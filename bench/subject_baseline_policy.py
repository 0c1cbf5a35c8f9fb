"""Write the default policy without subject and difficulty routing: issue 44's throughput baseline.

    .venv/bin/python bench/subject_baseline_policy.py OUT.yaml [--policy policies/default.yaml]
    .venv/bin/python bench/bench_envoy.py --mix realistic --baseline-policy OUT.yaml

The `domain` and `complexity` signals go, and so does every decision that reads one of them (the
STEM and health routes); everything else (safety, cache, the default route) stays as it is, so the
throughput ratio is what subject and difficulty routing cost.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
ROUTING_TYPES = {"domain", "complexity"}


def names_in(node: Any) -> set[str]:
    """Every signal name a decision's `when` tree reads."""
    if isinstance(node, dict):
        found = {str(node["signal"])} if "signal" in node else set()
        for value in node.values():
            found |= names_in(value)
        return found
    if isinstance(node, list):
        return set().union(*(names_in(item) for item in node)) if node else set()
    return set()


def without_subject_routing(policy: dict[str, Any]) -> dict[str, Any]:
    signals = policy.get("signals", [])
    dropped = {s["name"] for s in signals if s.get("type") in ROUTING_TYPES}
    if not dropped:
        raise SystemExit("the policy has no domain or complexity signal: nothing to compare")
    out = dict(policy)
    out["signals"] = [s for s in signals if s["name"] not in dropped]
    out["decisions"] = [d for d in policy.get("decisions", []) if not names_in(d.get("when")) & dropped]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--policy", type=Path, default=REPO / "policies" / "default.yaml")
    args = parser.parse_args()
    policy = yaml.safe_load(args.policy.read_text(encoding="utf-8"))
    baseline = without_subject_routing(policy)
    args.out.write_text(yaml.safe_dump(baseline, sort_keys=False, allow_unicode=True), encoding="utf-8")
    gone = sorted({s["name"] for s in policy["signals"]} - {s["name"] for s in baseline["signals"]})
    kept = {d["name"] for d in baseline["decisions"]}
    dropped = [d["name"] for d in policy["decisions"] if d["name"] not in kept]
    print(f"{args.out}: without signals {gone} and decisions {dropped}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
