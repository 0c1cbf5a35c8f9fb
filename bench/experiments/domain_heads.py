"""Issue 44: stage-2 heads that gain out of source without losing the in-source test split.

    .venv/bin/python bench/experiments/domain_heads.py [--dump F.npz] [--only NAME ...]

Reads `domain_gate.py dump`'s leave-source-out folds (4 folds of whole sources over the 21,374
corpus rows, stage 1's held-out logits). For every candidate head it refits stage 2 on each fold's
training sources + the written rows, fits its temperature on the held-out logits, mixes it 0.7 with
the dump's stage 1 as served and prints: leave-source-out (head alone, every text embedded, at
confident 0.4 and 0.6, per subject at 0.6); then, the head refitted on train.jsonl + the written
rows with the shipped stage 1 gating, the v3 test split (in-source) and the three written sets
(right answers at 0.4 | 0.6). Candidates: class-balanced (shipped before), source-balanced at
powers 0.3 / 0.5 / 1.0, logit ensembles of a class-balanced and a source-balanced head (one linear
head: serving unchanged; `TrainConfig.head_blend`), a small MLP, and some of them with the 484
unshipped written rows (`domain_candidate_rows.jsonl`, batch 5) in the head's training only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from domain_gate import CACHE, SETS, at_share, at_threshold, per_subject, softmax  # noqa: E402

from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR, SUBJECTS, DomainClassifier  # noqa: E402
from extproc.tools.domain_sources import fit_temperature, source_balanced_weights  # noqa: E402
from extproc.tools.domain_training import (  # noqa: E402
    EXTRA_FILE,
    balanced_weights,
    fit_softmax,
    load_rows,
    minilm_embedder,
)

K = len(SUBJECTS)
EXPERIMENTS = Path(__file__).resolve().parent
MORE_ROWS = ("domain_candidate_rows.jsonl", "domain_written_rows_batch5.jsonl")

# A head: (embeddings, labels, sources) -> a function from embeddings to logits (temperature not applied).
Fitter = Callable[[np.ndarray, np.ndarray, list[str]], Callable[[np.ndarray], np.ndarray]]


def linear(l2: float, power: float) -> Fitter:
    def fit(x: np.ndarray, y: np.ndarray, src: list[str]) -> Callable[[np.ndarray], np.ndarray]:
        w = source_balanced_weights(y, src, K, power) if power > 0 else balanced_weights(y, K)
        hw, hb = fit_softmax(x, y, w, K, l2=l2, max_iter=150)
        return lambda e: e @ hw + hb

    return fit


def logit_ensemble(parts: list[tuple[Fitter, float]]) -> Fitter:
    """Each part's logits divided by its temperature on its own training rows, then mixed by share
    (as `domain_training.fit_head` does with `head_blend`)."""

    def fit(x: np.ndarray, y: np.ndarray, src: list[str]) -> Callable[[np.ndarray], np.ndarray]:
        fns = [(p(x, y, src), share) for p, share in parts]
        scales = [fit_temperature(f(x), y) for f, _ in fns]
        return lambda e: sum(share * f(e) / t for (f, share), t in zip(fns, scales, strict=True))

    return fit


def mlp(hidden: int, decay: float, power: float, epochs: int = 40) -> Fitter:
    def fit(x: np.ndarray, y: np.ndarray, src: list[str]) -> Callable[[np.ndarray], np.ndarray]:
        import torch

        torch.manual_seed(0)
        w = source_balanced_weights(y, src, K, power) if power > 0 else balanced_weights(y, K)
        net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, K))
        opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=decay)
        xt = torch.from_numpy(x.astype(np.float32))
        yt = torch.from_numpy(y)
        wt = torch.from_numpy((w * y.size).astype(np.float32))
        gen = torch.Generator().manual_seed(0)
        for _ in range(epochs):
            order = torch.randperm(y.size, generator=gen)
            for i in range(0, y.size, 256):
                idx = order[i : i + 256]
                loss = (torch.nn.functional.cross_entropy(net(xt[idx]), yt[idx], reduction="none") * wt[idx]).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        net.eval()

        def predict(e: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return net(torch.from_numpy(e.astype(np.float32))).numpy().astype(np.float64)

        return predict

    return fit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "domain")
    ap.add_argument("--dump", type=Path, default=CACHE / "domain-gate.npz")
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    d = np.load(args.dump)
    labels = list(SUBJECTS)
    embedder = minilm_embedder(1, CACHE)
    train = load_rows(args.data / "train.jsonl")
    test = load_rows(args.data / "test.jsonl")
    corpus = train + test
    extra = load_rows(DEFAULT_WEIGHTS_DIR / EXTRA_FILE)
    more = [r for name in MORE_ROWS for r in load_rows(EXPERIMENTS / name)]
    y, folds = d["y"], d["folds"]
    src = [r.source or r.group for r in corpus]

    def lab(rows: list) -> np.ndarray:  # type: ignore[type-arg]
        return np.array([labels.index(r.label) for r in rows], dtype=np.int64)

    def vec(rows: list) -> np.ndarray:  # type: ignore[type-arg]
        return np.asarray(embedder.embed([r.text for r in rows]), dtype=np.float64)

    emb, extra_emb, more_emb = vec(corpus), vec(extra), vec(more)
    extra_y, more_y = lab(extra), lab(more)
    extra_src = [r.source or r.group for r in extra]
    more_src = [r.source or r.group for r in more]
    first = softmax(d["lex"] + d["static"])
    clf = DomainClassifier.load()  # the shipped stage 1 gates the test split and the written sets
    held_sets: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for name in ("test", *SETS):
        rows = test if name == "test" else load_rows(REPO / "bench" / "data" / f"domain_{name}.jsonl")
        f1 = np.stack([clf.first_stage_probs(r.text) for r in rows]).astype(np.float64)
        held_sets[name] = (lab(rows), f1, vec(rows))
    n_train = len(train)

    def pool(idx: np.ndarray, with_more: bool) -> tuple[np.ndarray, np.ndarray, list[str]]:
        xs, ys, ss = [emb[idx], extra_emb], [y[idx], extra_y], [src[int(i)] for i in idx] + extra_src
        if with_more:
            xs.append(more_emb)
            ys.append(more_y)
            ss = ss + more_src
        return np.concatenate(xs), np.concatenate(ys), ss

    plain, bal = linear(1e-4, 0.0), linear(1e-3, 1.0)
    cands: list[tuple[str, Fitter, bool]] = [
        ("shipped: class-balanced, l2 1e-4", plain, False),
        ("source power 0.3, l2 1e-4", linear(1e-4, 0.3), False),
        ("source power 0.5, l2 1e-4", linear(1e-4, 0.5), False),
        ("source power 0.5, l2 1e-3", linear(1e-3, 0.5), False),
        ("source power 1.0, l2 1e-3", bal, False),
        ("logit ensemble shipped + power 1.0", logit_ensemble([(plain, 0.5), (bal, 0.5)]), False),
        ("logit ensemble shipped + power 0.5", logit_ensemble([(plain, 0.5), (linear(1e-3, 0.5), 0.5)]), False),
        ("logit ensemble 0.7 shipped + 0.3 power 1.0", logit_ensemble([(plain, 0.7), (bal, 0.3)]), False),
        ("logit ensemble 0.3 shipped + 0.7 power 1.0", logit_ensemble([(plain, 0.3), (bal, 0.7)]), False),
        ("logit ensemble shipped + power 1.0 l2 1e-4", logit_ensemble([(plain, 0.5), (linear(1e-4, 1.0), 0.5)]), False),
        ("mlp 256, power 0", mlp(256, 1e-2, 0.0), False),
        ("mlp 256, power 1.0", mlp(256, 1e-2, 1.0), False),
        ("+rows shipped", plain, True),
        ("+rows source power 0.5, l2 1e-4", linear(1e-4, 0.5), True),
        ("+rows source power 1.0, l2 1e-3", bal, True),
        ("+rows logit ensemble shipped + power 1.0", logit_ensemble([(plain, 0.5), (bal, 0.5)]), True),
        ("+rows logit ensemble 0.3 shipped + 0.7 power 1.0", logit_ensemble([(plain, 0.3), (bal, 0.7)]), True),
    ]
    cands = [c for c in cands if not args.only or c[0] in args.only]
    print("LOSO: head alone / all embedded / at 44.7% / at conf 0.6 | in-source test and written sets at 0.4|0.6")
    for title, fitter, with_more in cands:
        logits = np.zeros((y.size, K))
        for f in np.unique(folds):
            held, kept = np.flatnonzero(folds == f), np.flatnonzero(folds != f)
            logits[held] = fitter(*pool(kept, with_more))(emb[held])
        t = fit_temperature(logits, y)
        head = softmax(logits / t)
        mixed = 0.7 * head + 0.3 * first
        at6 = np.where(first.max(1) < 0.6, mixed.argmax(1), first.argmax(1))
        cells = [
            f"{(head.argmax(1) == y).mean():.4f}",
            f"{(mixed.argmax(1) == y).mean():.4f}",
            f"{at_share(first.max(1), first, mixed, y, 0.447)[0]:.4f}",
            f"{(at6 == y).mean():.4f}",
        ]
        predict = fitter(*pool(np.arange(n_train), with_more))
        sets = []
        for name, (wy, f1, we) in held_sets.items():
            mx = 0.7 * softmax(predict(we) / t) + 0.3 * f1
            right = [at_threshold(f1.max(1), f1, mx, wy, c)[0] for c in (0.4, 0.6)]
            cell = "|".join(f"{r / wy.size:.4f}" for r in right) if name == "test" else "|".join(map(str, right))
            sets.append(f"{name} {cell}")
        print(f"{title} (T {t}): " + " / ".join(cells) + " | " + ", ".join(sets), flush=True)
        print("   per subject at 0.6: " + " ".join(f"{a:.3f}" for a in per_subject(at6, y)), flush=True)


if __name__ == "__main__":
    main()
