"""The harmful output's cascade alone (no keyword or pattern rules), two weights on the same MiniLM
embeddings, by head decision: test-split harmful recall (all and French), test benign flagged,
everyday texts refused, held-out multilingual harmful requests held.

    .venv/bin/python bench/bench_harmful_curve.py --data ../shared/data/safety --weights /tmp/w

Latin-script texts: harmful when the lexical score reaches `--sure` (the default policy's 0.999),
else, from the weights' `low` up, when the head's score reaches the decision. Texts the head cannot
read: at the weights' own sure threshold (`script_high`). The baseline is the shipped weights.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from extproc.models.attack_classifier import AttackClassifier, load_outputs  # noqa: E402
from extproc.tools.attack_training.cli import _minilm  # noqa: E402

DATA = REPO / "bench" / "data"
EVERYDAY = ("everyday_requests", "everyday_safety_questions", "everyday_unseen")
LOOKALIKES = ("attack_probes", "attack_probes_unseen", "attack_probes_hiding", "harmful_multilingual_heldout")
DECISIONS = (0.95, 0.98, 0.99, 0.995, 0.997, 0.999)


def _rows(path: Path) -> list[dict[str, str]]:
    lines = path.read_text(encoding="utf-8").split("\n")  # not splitlines: texts may hold U+2028
    return [json.loads(line) for line in lines if line.strip()]


def text_sets(data: Path) -> dict[str, list[str]]:
    test = _rows(data / "test.jsonl")
    return {
        "test harmful": [r["text"] for r in test if r["label"] == "harmful"],
        "test harmful fr": [r["text"] for r in test if r["label"] == "harmful" and r.get("lang") == "fr"],
        "test benign": [r["text"] for r in test if r["label"] == "benign"],
        "everyday": [r["text"] for name in EVERYDAY for r in _rows(DATA / f"{name}.jsonl")]
        + [r["text"] for name in LOOKALIKES for r in _rows(DATA / f"{name}.jsonl") if r["label"] == "benign"],
        "held-out harmful": [
            r["text"] for r in _rows(DATA / "harmful_multilingual_heldout.jsonl") if r["label"] == "harmful"
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "safety")
    parser.add_argument("--weights", type=Path, required=True, help="the weights compared with the shipped")
    parser.add_argument("--sure", type=float, default=0.999, help="lexical score deciding a Latin text alone")
    args = parser.parse_args()
    sets = text_sets(args.data)
    outputs = {"shipped": load_outputs()["harmful"], "weights": load_outputs(args.weights)["harmful"]}
    embedder = _minilm(1, Path(tempfile.gettempdir()) / "extproc-attack-cache")

    def unsure(c: AttackClassifier, text: str) -> bool:
        return c.thresholds.head_reads(text) and c.thresholds.low <= c.lexical_score(text) < args.sure

    need = sorted({t for c in outputs.values() for texts in sets.values() for t in texts if unsure(c, t)})
    vectors = dict(zip(need, embedder.embed(need), strict=True))
    print(f"{'weights':8} {'decision':>8} " + " ".join(f"{name:>18}" for name in sets))
    for label, c in outputs.items():
        # Per text: a decision already taken (bool) or the head's score (float).
        scored: dict[str, list[bool | float]] = {name: [] for name in sets}
        for name, texts in sets.items():
            for t in texts:
                p = c.lexical_score(t)
                if not c.thresholds.head_reads(t):
                    scored[name].append(p >= c.thresholds.sure_for(t))
                elif p >= args.sure or p < c.thresholds.low:
                    scored[name].append(p >= args.sure)
                else:
                    scored[name].append(c.embedding_score(vectors[t], p))
        for d in DECISIONS:
            cells = []
            for name in sets:
                hits = sum(v if isinstance(v, bool) else v >= d for v in scored[name])
                cells.append(f"{hits}/{len(scored[name])} {hits / max(1, len(scored[name])):6.1%}")
            print(f"{label:8} {d:>8} " + " ".join(f"{cell:>18}" for cell in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
