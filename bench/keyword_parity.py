"""Keyword signals of two policies, side by side: every answer compared, each signal's CPU timed.

    .venv/bin/python bench/keyword_parity.py [--before REV] [--policy PATH] [--limit N]

Builds every `keyword` signal of the default policy as it stands at git revision `--before`
(default `main`) and as it stands in `--policy` (default: the working tree's), then runs both on
every text of bench/data/*.jsonl (each string field that is text: `text`, `a`, `b`, `prompt`), the
shared safety corpus's train and test splits and the domain test split, each text as one user
message. Reported: the number of texts
whose answer (matched, labels) differs, per signal, with the first few texts (this must read 0
for a change meant as a pure speed-up), and each signal's thread CPU a text, before and after,
measured alternately in the same run (medians of `--rounds`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from text_mix import SHARED_CANDIDATES  # noqa: E402

from extproc.protocol.openai import parse_request  # noqa: E402
from extproc.signals.keyword import KeywordSignal, KeywordSpec  # noqa: E402

POLICY = "extproc/data/policies/default.yaml"
TEXT_FIELDS = ("text", "a", "b", "prompt")


def keyword_signals(policy_text: str) -> dict[str, KeywordSignal]:
    policy = yaml.safe_load(policy_text)
    return {
        s["name"]: KeywordSignal(KeywordSpec.model_validate(s))
        for s in policy.get("signals", [])
        if s.get("type") == "keyword"
    }


def corpus_texts(limit: int | None) -> list[str]:
    texts: list[str] = []
    paths = sorted((REPO / "bench" / "data").glob("*.jsonl"))
    for base in SHARED_CANDIDATES:
        for name in ("safety/train.jsonl", "safety/test.jsonl", "domain/test.jsonl"):
            if (base / name).is_file():
                paths.append(base / name)
    for path in paths:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                texts += [row[k] for k in TEXT_FIELDS if isinstance(row.get(k), str) and row[k].strip()]
    distinct = list(dict.fromkeys(texts))
    return distinct[:limit] if limit else distinct


def requests_of(texts: list[str]) -> list[Any]:
    return [parse_request({"model": "auto", "messages": [{"role": "user", "content": t}]}) for t in texts]


def answer(signal: KeywordSignal, request: Any) -> tuple[bool, tuple[str, ...]]:
    evaluation = signal.compute(request)
    return evaluation.matched, tuple(sorted(evaluation.labels))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="main", help="git revision of the policy to compare against")
    parser.add_argument("--policy", type=Path, default=REPO / POLICY)
    parser.add_argument("--limit", type=int, default=None, help="the first N texts only")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--show", type=int, default=3, help="differing texts shown per signal")
    args = parser.parse_args()

    before_text = subprocess.run(
        ["git", "show", f"{args.before}:{POLICY}"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    before, after = keyword_signals(before_text), keyword_signals(args.policy.read_text(encoding="utf-8"))
    names = [n for n in after if n in before]
    texts = corpus_texts(args.limit)
    requests = requests_of(texts)
    differ: Counter[str] = Counter()
    shown: dict[str, list[str]] = {}
    for text, request in zip(texts, requests, strict=True):
        for name in names:
            old, new = answer(before[name], request), answer(after[name], request)
            if old != new:
                differ[name] += 1
                shown.setdefault(name, []).append(f"{text[:100]!r}: {old} -> {new}")

    cpu: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for side, signals in (("before", before), ("after", after)):
            for name in names:
                signal = signals[name]
                started = time.thread_time()
                for request in requests:
                    signal.compute(request)
                cpu.setdefault((name, side), []).append((time.thread_time() - started) * 1e6 / len(requests))

    print(f"{len(texts)} distinct texts, {len(names)} keyword signals; policy {args.before} vs {args.policy}")
    print(f"texts whose answer differs: {sum(differ.values())}")
    for name in names:
        b, a = statistics.median(cpu[(name, "before")]), statistics.median(cpu[(name, "after")])
        print(f"  {name:32s} differ {differ[name]:5d}   us a text: before {b:7.1f}  after {a:7.1f}")
        for line in shown.get(name, [])[: args.show]:
            print(f"      {line}")
    total_b = sum(statistics.median(cpu[(n, "before")]) for n in names)
    total_a = sum(statistics.median(cpu[(n, "after")]) for n in names)
    print(f"  {'all keyword signals':32s}                us a text: before {total_b:7.1f}  after {total_a:7.1f}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
