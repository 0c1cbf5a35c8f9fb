"""Issue 44: leave-source-out of two stage-2 recipes on the same stage-1 fits, in one run.

    .venv/bin/python bench/experiments/domain_heads_loso.py --weights DIR [--base-weights DIR] [--blend B]
        [--base-blend B] [--head-rows F] [--base-head-rows F] [--also DIR ...]

Runs the packaged `domain_loso.leave_source_out` (4 folds of whole sources over all corpus rows,
stage 1 refitted per fold) with `TrainConfig(head_blend=B)`, the head-only rows of --head-rows
(default DIR/head_train.jsonl, if there) and the temperatures of the weights in DIR; then refits
the other recipe's head (`--base-blend`, default 0: the weights before the ensemble; its head-only
rows --base-head-rows, default none) on the same folds and mixes it with the same stage-1
probabilities, at the temperature of the weights in --base-weights; likewise each --also folder's
recipe (its meta.json's `head_blend`, its head_train.jsonl, its temperature). `--stage1 F.npz`
saves stage 1's out-of-source probabilities, or, when F exists, reads them and refits heads only
(minutes instead of four stage-1 fits). Stage 1 is the same in both
recipes, so the two differ by stage 2 only. Prints each at its weights' knee and at `confident`
0.4 (the default policy), per subject.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR, SUBJECTS, DomainClassifier  # noqa: E402
from extproc.tools.domain_loso import LeaveSourceOut, leave_source_out  # noqa: E402
from extproc.tools.domain_training import (  # noqa: E402
    EXTRA_FILE,
    HEAD_EXTRA_FILE,
    Row,
    TrainConfig,
    fit_head,
    load_rows,
    minilm_embedder,
    mix,
    packaged_token_vectors,
    row_sources,
    stage2_probs,
)

CACHE = Path(tempfile.gettempdir()) / "extproc-domain-cache"


def temps(clf: DomainClassifier) -> tuple[float, float]:
    t = clf.meta["cv_metrics"]["cv_temperatures"]
    return float(t["first"]), float(t["head"])


def vote_of(clf: DomainClassifier) -> tuple[int, float]:
    """The weights' neighbour vote: its k (0: none) and its mix temperature."""
    if clf.neighbours is None:
        return 0, 1.0
    return clf.neighbours.settings.k, clf.neighbours.settings.mix_temperature


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/domain"))
    ap.add_argument("--weights", type=Path, required=True)
    ap.add_argument("--base-weights", type=Path, default=DEFAULT_WEIGHTS_DIR)
    ap.add_argument("--blend", type=float, default=0.5)
    ap.add_argument("--base-blend", type=float, default=0.0)
    ap.add_argument("--head-rows", type=Path, default=None)
    ap.add_argument("--base-head-rows", type=Path, default=None)
    ap.add_argument("--also", type=Path, action="append", default=[], help="more weight folders, heads refitted")
    ap.add_argument("--stage1", type=Path, default=None, help="stage 1's probabilities: saved here, or read if there")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    cand, base = DomainClassifier.load(args.weights), DomainClassifier.load(args.base_weights)
    corpus = load_rows(args.data / "train.jsonl") + load_rows(args.data / "test.jsonl")
    extra = load_rows(DEFAULT_WEIGHTS_DIR / EXTRA_FILE)
    head_file = args.head_rows or args.weights / HEAD_EXTRA_FILE
    head_rows = load_rows(head_file) if head_file.is_file() else []
    base_head_rows = load_rows(args.base_head_rows) if args.base_head_rows else []
    print(
        f"candidate: blend {args.blend}, {len(head_rows)} head-only rows; base: blend {args.base_blend}, "
        f"{len(base_head_rows)} head-only rows"
    )
    embedder = minilm_embedder(1, CACHE)
    cfg = TrainConfig(head_blend=args.blend, neighbours_k=vote_of(cand)[0])
    if args.stage1 is not None and args.stage1.is_file():
        # stage 1's leave-source-out probabilities of an earlier run: only the heads are refitted
        saved = np.load(args.stage1)
        first = saved["first"]  # one array: `head is first` below marks the candidate's head as not fitted yet
        result = LeaveSourceOut(saved["y"], saved["folds"], first, first)
    else:
        result = leave_source_out(
            corpus,
            extra,
            embedder.embed,
            packaged_token_vectors(1, CACHE),
            cfg,
            temps(cand),
            log=print,
            head_extra=head_rows,
            vote_temperature=vote_of(cand)[1],
        )
        if args.stage1 is not None:
            np.savez(args.stage1, y=result.y, folds=result.folds, first=result.first)
    labels = list(SUBJECTS)
    emb = np.asarray(embedder.embed([r.text for r in corpus]), dtype=np.float64)

    def refit(blend: float, more_rows: list[Row], t_head: float, vote: tuple[int, float] = (0, 1.0)) -> LeaveSourceOut:
        """Another recipe's head (and neighbour vote) on the same folds, mixed with the same stage-1 probabilities."""
        cfg = TrainConfig(head_blend=blend, neighbours_k=vote[0])
        written = extra + more_rows  # the head's written rows: stage 1's and the head-only ones
        extra_emb = np.asarray(embedder.embed([r.text for r in written]), dtype=np.float64)
        extra_y = np.array([labels.index(r.label) for r in written], dtype=np.int64)
        sources, extra_sources = row_sources(corpus), row_sources(written)
        y, folds = result.y, result.folds
        head = np.zeros_like(result.head)
        for f in range(int(folds.max()) + 1):
            held, kept = np.flatnonzero(folds == f), np.flatnonzero(folds != f)
            memory = (
                np.concatenate([emb[kept], extra_emb]),
                np.concatenate([y[kept], extra_y]),
                [sources[int(i)] for i in kept] + extra_sources,
            )
            hw, hb = fit_head(*memory, len(labels), cfg)
            probs, _ = stage2_probs((emb[held] @ hw + hb) / t_head, emb[held], memory, cfg, vote_temperature=vote[1])
            head[held] = mix(probs, result.first[held], cfg.head_mix)
        return LeaveSourceOut(y, folds, result.first, head)

    if args.stage1 is not None and result.head is result.first:
        result = refit(args.blend, head_rows, temps(cand)[1], vote_of(cand))
    recipes: list[tuple[str, LeaveSourceOut, DomainClassifier]] = [
        ("candidate", result, cand),
        ("base", refit(args.base_blend, base_head_rows, temps(base)[1], vote_of(base)), base),
    ]
    for folder in args.also:
        other = DomainClassifier.load(folder)
        rows_file = folder / HEAD_EXTRA_FILE
        more = load_rows(rows_file) if rows_file.is_file() else []
        blend = float(other.meta["training"]["head_blend"])
        print(f"{folder}: blend {blend}, {len(more)} head-only rows")
        recipes.append((str(folder), refit(blend, more, temps(other)[1], vote_of(other)), other))
    out: dict[str, Any] = {}
    for name, res, clf in recipes:
        for conf in sorted({clf.confident, 0.4, 0.6}):
            rep = res.report(conf)
            rep.pop("tradeoff")
            out[f"{name}@{conf}"] = rep
            print(
                f"{name} at confident {conf}: cascade {rep['cascade']} ({rep['embedded']:.1%} embedded), "
                f"stage 1 {rep['stage1']}, stage 2 {rep['stage2']}"
            )
            print("   " + " ".join(f"{s} {a:.3f}" for s, a in rep["per_subject"].items()))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
