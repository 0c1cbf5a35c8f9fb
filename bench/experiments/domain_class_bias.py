"""Issue 44: would a per-subject offset on stage 2's logits (free at serving time: folded into the
head's bias) lift psychology and `other` out of source? Measured on saved leave-source-out
probabilities (`domain_rows_measure.py --loso --save DIR`), each fold's offsets chosen on the
other three folds' rows only (nested: the offsets never see the source they are scored on).

    .venv/bin/python bench/experiments/domain_class_bias.py LOSO.npz [--confident 0.75] [--mix 0.7]

The saved `head` is the served mix (mix * stage 2 + (1 - mix) * stage 1); stage 2's own
probabilities are recovered from it, multiplied by exp(offset) (a logit offset), renormalised and
mixed again.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.models.domain_classifier import SUBJECTS  # noqa: E402
from extproc.tools.domain_training import cascade  # noqa: E402

GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
TUNED = ("psychology", "other")


def shifted(first: np.ndarray, mixed: np.ndarray, mix: float, offset: np.ndarray) -> np.ndarray:
    head = np.maximum((mixed - (1 - mix) * first) / mix, 1e-12) * np.exp(offset)
    head /= head.sum(axis=1, keepdims=True)
    return mix * head + (1 - mix) * first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npz", type=Path)
    ap.add_argument("--confident", type=float, default=0.75)
    ap.add_argument("--mix", type=float, default=0.7)
    args = ap.parse_args()
    saved = np.load(args.npz)
    y, folds, first, mixed = saved["y"], saved["folds"], saved["first"], saved["head"]
    labels = list(SUBJECTS)
    idx = [labels.index(s) for s in TUNED]
    out = np.zeros_like(mixed)
    for f in range(int(folds.max()) + 1):
        rest, held = folds != f, folds == f
        best: tuple[float, tuple[float, ...]] = (-1.0, ())
        for values in itertools.product(GRID, repeat=len(idx)):
            offset = np.zeros(len(labels))
            offset[idx] = values
            pred, _ = cascade(first[rest], shifted(first[rest], mixed[rest], args.mix, offset), args.confident)
            acc = float((pred == y[rest]).mean())
            best = max(best, (acc, values))
        offset = np.zeros(len(labels))
        offset[idx] = best[1]
        print(f"fold {f}: offsets {dict(zip(TUNED, best[1], strict=True))} (other folds' accuracy {best[0]:.4f})")
        out[held] = shifted(first[held], mixed[held], args.mix, offset)
    for name, head in (("as trained", mixed), ("nested offsets", out)):
        pred, embedded = cascade(first, head, args.confident)
        per = {s: float((pred[y == i] == i).mean()) for i, s in enumerate(labels)}
        print(f"{name}: cascade {float((pred == y).mean()):.4f} at {args.confident} ({embedded.mean():.1%} embedded)")
        print("   " + " ".join(f"{s} {a:.3f}" for s, a in per.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
