"""The realistic cold mix of request texts the text-path figures are measured on (issue 43).

Distinct texts from: the safety corpus test split's benign rows, the domain corpus test split
(textbook questions), and bench/data's everyday requests (`everyday_requests`, `everyday_unseen`),
routing evaluation (`routing_eval`) and cache pairs (both sides of `cache_pairs`). Deduplicated,
shuffled with a fixed seed (the sources interleave as real traffic would), the first `limit` kept.

    .venv/bin/python bench/text_mix.py OUT.jsonl   # the mix as JSONL, for `bench_envoy.py --texts`
    .venv/bin/python bench/bench_envoy.py --floor --mix realistic   # the same mix, by name
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The shared corpora beside the repository (as bench_safety / bench_domain find them), or a worktree's.
SHARED_CANDIDATES = (REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data")
DATA = REPO / "bench" / "data"
LIMIT = 8000
SEED = 43


def _rows(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _shared(name: str) -> Path:
    for base in SHARED_CANDIDATES:
        if (base / name).is_file():
            return base / name
    raise SystemExit(f"the realistic mix needs {name} under {' or '.join(map(str, SHARED_CANDIDATES))}")


def realistic_mix(limit: int = LIMIT) -> list[str]:
    texts: list[str] = []
    texts += [str(r["text"]) for r in _rows(_shared("safety/test.jsonl")) if r.get("label") == "benign"]
    texts += [str(r["text"]) for r in _rows(_shared("domain/test.jsonl"))]
    for name in ("everyday_requests.jsonl", "everyday_unseen.jsonl", "routing_eval.jsonl"):
        texts += [str(r["text"]) for r in _rows(DATA / name)]
    for row in _rows(DATA / "cache_pairs.jsonl"):
        texts += [str(row["a"]), str(row["b"])]
    distinct = list(dict.fromkeys(t for t in texts if t.strip()))
    random.Random(SEED).shuffle(distinct)
    return distinct[:limit]


MIXES = {"realistic": realistic_mix}


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    mix = realistic_mix()
    lines = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in mix)
    if out is None:
        sys.stdout.write(lines)
    else:
        out.write_text(lines, encoding="utf-8")
        print(f"{len(mix)} distinct texts -> {out}", file=sys.stderr)
