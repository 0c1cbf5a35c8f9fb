"""Issue 44: the subject head beside a vote of the nearest training rows, screened out of source.

    .venv/bin/python bench/experiments/domain_neighbours.py [--data ../shared/data/domain] [--dims 0 128 64]

Head alone (stage 2 without stage 1's mix, so no stage-1 fits are needed: minutes, not half an
hour): 4 folds of whole corpus sources (`domain_sources.source_folds`, as `bench_domain.py
--loso`), each fold's head fitted on the other folds' corpus rows plus every written row
(`extra_train.jsonl`, `head_train.jsonl`), with the shipped recipe (`TrainConfig()`); the vote's
memory is the same rows. Also the three written evaluation sets (`bench/data/domain_exam.jsonl`,
`domain_everyday.jsonl`, `domain_unseen.jsonl`) scored by a head and memory of every corpus row.
Prints the accuracy per setting (k, temperature, weight, principal components of the memory,
centred; 0 = all 384) beside the head alone, and per subject. Uses `subject_neighbours.vote`
and `combine`, the served functions; the mix temperature is left at 1 (it does not move an argmax).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR, SUBJECTS  # noqa: E402
from extproc.models.subject_neighbours import NeighbourMemory, NeighbourSettings, log_softmax  # noqa: E402
from extproc.tools.domain_sources import source_folds  # noqa: E402
from extproc.tools.domain_training import (  # noqa: E402
    EXTRA_FILE,
    HEAD_EXTRA_FILE,
    TrainConfig,
    fit_head,
    load_rows,
    minilm_embedder,
    row_sources,
)

SETTINGS = [(k, t, w) for k in (10, 25, 50, 100) for t in (0.02, 0.05, 0.1) for w in (0.3, 0.5)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "domain")
    ap.add_argument("--dims", type=int, nargs="+", default=[0, 128])
    ap.add_argument("--quick", action="store_true", help="only k 25, temperature 0.05, weight 0.3")
    args = ap.parse_args()
    labels, k = list(SUBJECTS), len(SUBJECTS)
    corpus = load_rows(args.data / "train.jsonl") + load_rows(args.data / "test.jsonl")
    written = load_rows(DEFAULT_WEIGHTS_DIR / EXTRA_FILE) + load_rows(DEFAULT_WEIGHTS_DIR / HEAD_EXTRA_FILE)
    embedder = minilm_embedder(1, Path(tempfile.gettempdir()) / "extproc-domain-cache")
    emb = np.asarray(embedder.embed([r.text for r in corpus]), dtype=np.float64)
    wemb = np.asarray(embedder.embed([r.text for r in written]), dtype=np.float64)
    y = np.array([labels.index(r.label) for r in corpus])
    wy = np.array([labels.index(r.label) for r in written])
    src, wsrc = row_sources(corpus), row_sources(written)
    cfg = TrainConfig()
    folds = source_folds([r.source or r.group for r in corpus], [r.label for r in corpus], cfg.folds)
    sets = {}
    for name in ("domain_exam", "domain_everyday", "domain_unseen"):
        rows = [
            json.loads(line)
            for line in (REPO / "bench" / "data" / f"{name}.jsonl").read_text().split("\n")
            if line.strip()
        ]
        x = np.asarray(embedder.embed([r["text"] for r in rows]), dtype=np.float64)
        sets[name] = (x, np.array([labels.index(r["label"]) for r in rows]))
    # (memory rows, their labels, query rows, the head's log-probabilities, truth, where to write)
    parts = []
    for f in range(cfg.folds):
        held, kept = np.flatnonzero(folds == f), np.flatnonzero(folds != f)
        xt, yt = np.concatenate([emb[kept], wemb]), np.concatenate([y[kept], wy])
        hw, hb = fit_head(xt, yt, [src[int(i)] for i in kept] + wsrc, k, cfg)
        parts.append((xt, yt, emb[held], log_softmax(emb[held] @ hw + hb), y[held], ("loso", held)))
    xt, yt = np.concatenate([emb, wemb]), np.concatenate([y, wy])
    hw, hb = fit_head(xt, yt, src + wsrc, k, cfg)
    for name, (x, truth) in sets.items():
        parts.append((xt, yt, x, log_softmax(x @ hw + hb), truth, (name, None)))
    head_pred = np.zeros(len(corpus), dtype=np.int64)
    for _, _, _, head, truth, (name, held) in parts:
        if name == "loso":
            head_pred[held] = head.argmax(1)
        else:
            print(f"head alone, {name}: {int((head.argmax(1) == truth).sum())} of {truth.size}")
    print(f"head alone, leave-source-out: {(head_pred == y).mean():.4f}")
    grid = [(25, 0.05, 0.3)] if args.quick else SETTINGS
    for dims in args.dims:
        for n, t, w in grid:
            settings = NeighbourSettings(n, t, w)
            pred = np.zeros(len(corpus), dtype=np.int64)
            written_right = {}
            for xt, yt, x, head, truth, (name, held) in parts:
                memory = NeighbourMemory.fit(xt, yt, k, settings, dims or xt.shape[1])
                combined = memory.probs(head, x) if w else np.exp(head)
                if name == "loso":
                    pred[held] = combined.argmax(1)
                else:
                    written_right[name[7:]] = int((combined.argmax(1) == truth).sum())
            per = " ".join(f"{labels[c][:5]} {(pred[y == c] == c).mean():.3f}" for c in range(k))
            loso = (pred == y).mean()
            print(f"dims {dims or 384} k {n} t {t} w {w}: leave-source-out {loso:.4f} {written_right} | {per}")


if __name__ == "__main__":
    main()
