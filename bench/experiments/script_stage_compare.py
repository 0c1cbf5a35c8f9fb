"""The other scripts' stage of the harmful output, two weights side by side: on the texts that stage
scores (those the Latin-only head may not read), how many each flags at its own `script_high`, per
evaluation set and, for the test split's harmful rows, per language. Latin-script texts are left
out: a refit of this stage changes no decision on them. No embeddings needed.

    .venv/bin/python bench/experiments/script_stage_compare.py --weights /tmp/wscript
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.models.attack_classifier import AttackClassifier, load_outputs  # noqa: E402

DATA = REPO / "bench" / "data"
PROBES = ("attack_probes", "attack_probes_unseen", "attack_probes_hiding")


def _rows(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").split("\n")  # not splitlines: texts may hold U+2028
    return [json.loads(line) for line in lines if line.strip()]


def text_sets(data: Path) -> dict[str, list[tuple[str, str]]]:
    """(language, text) per set: the test split by label, the everyday sets, the probes' benign
    rows, the held-out multilingual set and the harmful dev sets by label."""
    test = _rows(data / "test.jsonl")
    sets: dict[str, list[tuple[str, str]]] = {
        f"test {label}": [(r.get("lang", "?"), r["text"]) for r in test if r["label"] == label]
        for label in ("harmful", "benign", "attack")
    }
    bench = {f.stem: _rows(f) for f in sorted(DATA.glob("*.jsonl"))}
    everyday = [k for k in bench if k.startswith("everyday_")]
    sets["everyday"] = [(r.get("lang", "?"), r["text"]) for k in everyday for r in bench[k]]
    sets["probe benign"] = [(r.get("lang", "?"), r["text"]) for k in PROBES for r in bench[k] if r["label"] == "benign"]
    dev = [k for k in bench if k.startswith("harmful_") and k.endswith("_dev")]
    for name, keys in (("held-out", ["harmful_multilingual_heldout"]), ("dev", dev)):
        for harmful in (True, False):
            sets[f"{name} {'harmful' if harmful else 'benign'}"] = [
                (r.get("lang", "?"), r["text"]) for k in keys for r in bench[k] if (r["label"] == "harmful") == harmful
            ]
    return sets


def flagged(c: AttackClassifier, text: str) -> bool:
    return c.lexical_score(text) >= c.thresholds.sure_for(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent.parent / "shared" / "data" / "safety")
    parser.add_argument("--weights", type=Path, required=True, help="the weights compared with the shipped")
    parser.add_argument("--before", type=Path, help="the baseline weights (default: the shipped)")
    args = parser.parse_args()
    outputs = {"before": load_outputs(args.before)["harmful"], "after": load_outputs(args.weights)["harmful"]}
    for label, c in outputs.items():
        print(f"{label}: script_high {c.thresholds.script_high}")
    print(f"{'set':16} {'other-script':>12} {'before':>7} {'after':>7}")
    for name, rows in text_sets(args.data).items():
        other = [(lang, t) for lang, t in rows if outputs["before"].uses_script_model(t)]
        hits = {k: [(lang, t) for lang, t in other if flagged(c, t)] for k, c in outputs.items()}
        print(f"{name:16} {len(other):>12} {len(hits['before']):>7} {len(hits['after']):>7}")
        if name in ("test harmful", "held-out harmful"):
            per = {k: collections.Counter(lang for lang, _ in v) for k, v in hits.items()}
            total = collections.Counter(lang for lang, _ in other)
            cells = [f"{lang} {per['before'][lang]}->{per['after'][lang]}/{n}" for lang, n in sorted(total.items())]
            print("    by language: " + ", ".join(cells))
        elif "benign" in name or name == "everyday":
            for k, sign in (("after", "+"), ("before", "-")):
                other_side = {t for _, t in hits["before" if k == "after" else "after"]}
                for _, t in hits[k]:
                    if t not in other_side:
                        print(f"    {sign} {t[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
