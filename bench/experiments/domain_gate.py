"""Issue 44, item 3/4: does a stage-1 gate learned on held-out sources send the right texts to stage 2?

    .venv/bin/python bench/experiments/domain_gate.py dump  [--data D] [--out F.npz]   # leave-source-out, ~15 min
    .venv/bin/python bench/experiments/domain_gate.py gates [--out F.npz]              # seconds

`dump` runs the shipped recipe's leave-source-out folds (as `domain_loso.leave_source_out`, the
shipped temperatures) and keeps, per corpus row, stage 1's two blocks' logits (n-grams and static
vector) apart, stage 2's head probabilities and the row's fold; the written sets (exam, everyday,
issue-44 unseen) are scored by the shipped weights the same way. `gates` compares, at the same
share of texts embedded, the shipped rule (stage 1's top probability) with a margin rule and a
small logistic gate (P(stage 1 right) from stage 1's top probability, margin, entropy, whether
its two blocks agree and the text's length), fitted on three source folds and scored on the
fourth, then fitted on all folds for the written sets. It also prints, on the texts each rule
sends to stage 2, stage 1's accuracy beside stage 2's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR, SUBJECTS, DomainClassifier  # noqa: E402
from extproc.models.static_embedding import load_tokenizer, packaged_tokenizer_path  # noqa: E402
from extproc.tools.domain_sources import softmax_rows, source_folds  # noqa: E402
from extproc.tools.domain_training import (  # noqa: E402
    EXTRA_FILE,
    TrainConfig,
    balanced_weights,
    first_stage_matrix,
    fit_softmax,
    load_rows,
    minilm_embedder,
    packaged_token_vectors,
    predict_softmax,
    stage1_text,
    static_embedding,
)

SETS = ("exam", "everyday", "unseen")
CACHE = Path(tempfile.gettempdir()) / "extproc-domain-cache"


def dump(args: argparse.Namespace) -> None:
    import torch

    clf = DomainClassifier.load()
    temps = clf.meta["cv_metrics"]["cv_temperatures"]
    t_first, t_head = float(temps["first"]), float(temps["head"])
    cfg = TrainConfig()
    labels = list(SUBJECTS)
    k = len(labels)
    embedder = minilm_embedder(1, CACHE)
    corpus = load_rows(args.data / "train.jsonl") + load_rows(args.data / "test.jsonl")
    extra = load_rows(DEFAULT_WEIGHTS_DIR / EXTRA_FILE)
    y = np.array([labels.index(r.label) for r in corpus], dtype=np.int64)
    folds = source_folds([r.source or r.group for r in corpus], [r.label for r in corpus], cfg.folds)
    extra_y = np.array([labels.index(r.label) for r in extra], dtype=np.int64)
    emb = np.asarray(embedder.embed([r.text for r in corpus]), dtype=np.float64)
    extra_emb = np.asarray(embedder.embed([r.text for r in extra]), dtype=np.float64)
    vectors = packaged_token_vectors(1, CACHE)
    tokenizer = load_tokenizer(packaged_tokenizer_path())
    n_lex = cfg.lexical.n_features
    lex_logits = np.zeros((len(corpus), k))
    static_logits = np.zeros((len(corpus), k))
    head = np.zeros((len(corpus), k))
    for f in range(cfg.folds):
        held = np.flatnonzero(folds == f)
        kept = np.flatnonzero(folds != f)
        texts = [stage1_text(corpus[int(i)].text, cfg) for i in kept] + [stage1_text(r.text, cfg) for r in extra]
        ty = np.concatenate([y[kept], extra_y])
        weights = balanced_weights(ty, k)
        static = static_embedding(vectors, tokenizer, texts, cfg.sif_a)
        x = first_stage_matrix(texts, cfg.lexical, static, cfg.static_scale)
        w, b = fit_softmax(x, ty, weights, k, l2=cfg.first_l2, max_iter=cfg.first_max_iter, threads=1)
        held_texts = [stage1_text(corpus[int(i)].text, cfg) for i in held]
        held_x = first_stage_matrix(held_texts, cfg.lexical, static, cfg.static_scale)
        full = (held_x.torch_pair()[0] @ torch.from_numpy(np.ascontiguousarray(w))).numpy() + b
        sv = np.stack([static.vector(t).astype(np.float64) for t in held_texts]) * cfg.static_scale
        static_logits[held] = sv @ w[n_lex:]
        lex_logits[held] = full - static_logits[held]  # the n-gram block plus the bias
        hw, hb = fit_softmax(
            np.concatenate([emb[kept], extra_emb]), ty, weights, k, l2=cfg.head_l2, max_iter=cfg.head_max_iter
        )
        hl = np.log(np.maximum(predict_softmax(emb[held], hw, hb), 1e-300))
        head[held] = softmax_rows(hl / t_head)
        first = softmax_rows(full / t_first)
        print(f"fold {f}: {held.size} rows, stage 1 {float((first.argmax(1) == y[held]).mean()):.3f}", flush=True)
    out: dict[str, Any] = {
        "y": y,
        "folds": folds,
        "lex": lex_logits / t_first,
        "static": static_logits / t_first,
        "head": head,
        "length": np.array([len(r.text) for r in corpus]),
        "ascii": np.array([ascii_share(r.text) for r in corpus]),
    }
    for name in SETS:
        rows = load_rows(REPO / "bench" / "data" / f"domain_{name}.jsonl")
        vec = np.asarray(embedder.embed([r.text for r in rows]), dtype=np.float32)
        lex, stat, hd = [], [], []
        for i, r in enumerate(rows):
            text = stage1_text(r.text, cfg) if clf.neutralise else r.text
            from extproc.models.domain_classifier import lexical_logits

            lx = lexical_logits(text, clf.config, clf.lexical_weight, clf.bias)
            st = clf.static.vector(text) @ clf.static_weight
            lex.append(lx)
            stat.append(st)
            hd.append(
                np.asarray(softmax_rows((vec[i] @ clf.head_weight + clf.head_bias)[None, :].astype(np.float64))[0])
            )
        out[f"{name}_y"] = np.array([labels.index(r.label) for r in rows])
        out[f"{name}_lex"] = np.stack(lex).astype(np.float64)  # shipped weights: temperature folded in
        out[f"{name}_static"] = np.stack(stat).astype(np.float64)
        out[f"{name}_head"] = np.stack(hd)
        out[f"{name}_length"] = np.array([len(r.text) for r in rows])
        out[f"{name}_ascii"] = np.array([ascii_share(r.text) for r in rows])
    np.savez_compressed(args.out, **out, head_mix=np.array(clf.head_mix), confident=np.array(clf.confident))
    print(f"wrote {args.out}")


def ascii_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(c.isascii() for c in letters) / max(1, len(letters))


SHARES = (0.2, 0.3, 0.4, 0.447, 0.5, 0.6, 0.7, 0.735, 0.8)


def softmax(z: np.ndarray) -> np.ndarray:
    return softmax_rows(np.asarray(z, dtype=np.float64))


def features(lex: np.ndarray, static: np.ndarray, length: np.ndarray, ascii_: np.ndarray, kind: str) -> np.ndarray:
    """What the gate reads, all known before any embedding: stage 1's calibrated probabilities and
    its two blocks (n-grams + bias, static vector) apart."""
    p = softmax(lex + static)
    order = np.sort(p, axis=1)
    top = p.argmax(1)
    rows = np.arange(p.shape[0])
    cols = [
        order[:, -1],
        order[:, -1] - order[:, -2],
        -(p * np.log(np.maximum(p, 1e-12))).sum(1),
        (lex.argmax(1) == static.argmax(1)).astype(np.float64),
        softmax(lex)[rows, top],
        softmax(static)[rows, top],
        np.log1p(length) / 6.0,
        ascii_,
    ]
    x = np.stack(cols[:3] if kind.startswith("probs") else cols, axis=1)
    if kind.endswith("label"):
        x = np.concatenate([x, np.eye(p.shape[1])[top]], axis=1)
    return x


def fit_gate(x: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = right.astype(np.int64)
    w = np.full(y.size, 1.0 / y.size)
    return fit_softmax(x, y, w, 2, l2=1e-4, max_iter=200)


def gate_score(x: np.ndarray, wb: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return predict_softmax(x, wb[0], wb[1])[:, 1]


def at_share(
    score: np.ndarray, first: np.ndarray, mixed: np.ndarray, y: np.ndarray, share: float
) -> tuple[float, float, float, float]:
    """Embed the `share` of texts with the lowest score: cascade accuracy, and on the embedded texts
    stage 1's accuracy beside stage 2's (mixed, as served)."""
    n = y.size
    m = round(share * n)
    order = np.argsort(score, kind="stable")
    embedded = np.zeros(n, dtype=bool)
    embedded[order[:m]] = True
    pred = np.where(embedded, mixed.argmax(1), first.argmax(1))
    s1 = float((first.argmax(1)[embedded] == y[embedded]).mean()) if m else 0.0
    s2 = float((mixed.argmax(1)[embedded] == y[embedded]).mean()) if m else 0.0
    return float((pred == y).mean()), s1, s2, float(embedded.mean())


def at_threshold(score: np.ndarray, first: np.ndarray, mixed: np.ndarray, y: np.ndarray, t: float) -> tuple[int, float]:
    embedded = score < t
    pred = np.where(embedded, mixed.argmax(1), first.argmax(1))
    return int((pred == y).sum()), float(embedded.mean())


def per_subject(pred: np.ndarray, y: np.ndarray) -> list[float]:
    return [float((pred[y == i] == i).mean()) for i in range(len(SUBJECTS))]


def gates(args: argparse.Namespace) -> None:
    d = np.load(args.out)
    mix_share = float(d["head_mix"])
    y, folds = d["y"], d["folds"]
    first = softmax(d["lex"] + d["static"])
    mixed = mix_share * d["head"] + (1 - mix_share) * first
    right = first.argmax(1) == y
    print(
        f"leave-source-out rows {y.size}: stage 1 {right.mean():.4f}, "
        f"stage 2 (mixed) {(mixed.argmax(1) == y).mean():.4f}, "
        f"oracle {(right | (mixed.argmax(1) == y)).mean():.4f}"
    )
    rules: dict[str, np.ndarray] = {"top probability (shipped)": first.max(1)}
    srt = np.sort(first, axis=1)
    rules["margin top1-top2"] = srt[:, -1] - srt[:, -2]
    for scale in (0.6, 1.6):  # another temperature reorders texts by their top probability
        rules[f"top probability, temperature x{scale}"] = softmax((d["lex"] + d["static"]) / scale).max(1)
    variants = {
        "gate (probabilities)": "probs",
        "gate (probabilities + label)": "probs+label",
        "gate (8 features)": "all",
        "gate (8 + stage-1 label)": "all+label",
    }
    x_all = {v: features(d["lex"], d["static"], d["length"], d["ascii"], t) for v, t in variants.items()}
    for v in variants:
        score = np.zeros(y.size)
        for f in np.unique(folds):
            wb = fit_gate(x_all[v][folds != f], right[folds != f])
            score[folds == f] = gate_score(x_all[v][folds == f], wb)
        rules[v + ", cross-fold"] = score
    print("share embedded -> cascade accuracy [stage 1 | stage 2 on the embedded texts]")
    print(f"{'rule':34s}" + "".join(f" {s:>22.3f}" for s in SHARES))
    for name, score in rules.items():
        cells = []
        for s in SHARES:
            acc, s1, s2, _ = at_share(score, first, mixed, y, s)
            cells.append(f"{acc:.4f} [{s1:.2f}|{s2:.2f}]")
        print(f"{name:34s}" + "".join(f" {c:>22s}" for c in cells))
    # the shipped thresholds' own shares, and per subject at the policy's share
    for t in (0.4, float(d["confident"])):
        share = float((first.max(1) < t).mean())
        line = f"confident {t}: {share:.1%} embedded;"
        for name, score in rules.items():
            line += f" {name.split(',')[0]} {at_share(score, first, mixed, y, share)[0]:.4f};"
        print(line)
        for name in (next(iter(rules)), list(rules)[-1]):
            m = round(share * y.size)
            emb = np.zeros(y.size, dtype=bool)
            emb[np.argsort(rules[name], kind="stable")[:m]] = True
            pred = np.where(emb, mixed.argmax(1), first.argmax(1))
            print(f"  {name[:24]:24s} per subject: " + " ".join(f"{a:.3f}" for a in per_subject(pred, y)))
    # written sets: each gate fitted on every fold, its threshold the LOSO score at the shipped rule's share
    for v, top in variants.items():
        wb = fit_gate(x_all[v], right)
        loso_score = gate_score(x_all[v], wb)
        for t in (0.4, float(d["confident"])):
            share = float((first.max(1) < t).mean())
            gate_t = float(np.quantile(loso_score, share))
            line = f"{v} at the share of confident {t} (gate threshold {gate_t:.3f}):"
            for name in SETS:
                fy = d[f"{name}_y"]
                f1 = softmax(d[f"{name}_lex"] + d[f"{name}_static"])
                mx = mix_share * d[f"{name}_head"] + (1 - mix_share) * f1
                base_right, base_share = at_threshold(f1.max(1), f1, mx, fy, t)
                xs = features(d[f"{name}_lex"], d[f"{name}_static"], d[f"{name}_length"], d[f"{name}_ascii"], top)
                g_right, g_share = at_threshold(gate_score(xs, wb), f1, mx, fy, gate_t)
                line += f" {name} {base_right}->{g_right}/{fy.size} ({base_share:.0%}->{g_share:.0%} embedded);"
            print(line)


def mixes(args: argparse.Namespace) -> None:
    """Stage 2's share of the final probabilities, linear (as shipped) and log-linear, on the
    leave-source-out rows (every text embedded, and at the policy's and the knee's shares) and on
    the written sets (cascade at confident 0.4 and the knee, the shipped stage 1 gating)."""
    d = np.load(args.out)
    y = d["y"]
    first = softmax(d["lex"] + d["static"])
    written = {}
    for name in SETS:
        f1 = softmax(d[f"{name}_lex"] + d[f"{name}_static"])
        written[name] = (d[f"{name}_y"], f1, d[f"{name}_head"])
    print(
        "mix -> leave-source-out: every text embedded / at 44.7% / at 73.5% embedded; written sets right at 0.4 | knee"
    )
    for kind in ("linear", "log-linear"):
        for a in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0):

            def combine(f: np.ndarray, h: np.ndarray, kind: str = kind, a: float = a) -> np.ndarray:
                if kind == "linear":
                    return a * h + (1 - a) * f
                return softmax(a * np.log(np.maximum(h, 1e-12)) + (1 - a) * np.log(np.maximum(f, 1e-12)))

            mixed = combine(first, d["head"])
            cells = [f"{(mixed.argmax(1) == y).mean():.4f}"]
            cells += [f"{at_share(first.max(1), first, mixed, y, s)[0]:.4f}" for s in (0.447, 0.735)]
            sets = []
            for name, (wy, f1, hd) in written.items():
                mx = combine(f1, hd)
                sets.append(
                    f"{name} "
                    + "|".join(str(at_threshold(f1.max(1), f1, mx, wy, t)[0]) for t in (0.4, float(d["confident"])))
                )
            print(f"{kind:10s} {a:.1f}: " + " / ".join(cells) + "; " + ", ".join(sets))


def source_balanced(ty: np.ndarray, sources: list[str], k: int, power: float = 1.0) -> np.ndarray:
    """Every subject the same total weight, and inside a subject every source the same share:
    a big textbook no longer outweighs the smaller sources that look more like users' text.
    `power` < 1 tempers it: a row's weight inside its subject goes as 1 / (its source's rows) ** power."""
    from collections import Counter

    per = Counter(zip(ty.tolist(), sources, strict=True))
    w = np.array([per[(int(t), s)] ** -power for t, s in zip(ty, sources, strict=True)])
    subject_total = np.bincount(ty, weights=w, minlength=k)
    w = w / subject_total[ty]
    return w / w.sum()


def heads(args: argparse.Namespace) -> None:
    """Stage 2's head refitted per leave-source-out fold with other settings (L2, source-balanced
    weights), mixed with the dump's stage 1 as served; then on train.jsonl + the written rows for the
    written sets. Both stages' temperatures are refitted on these held-out logits for every setting."""
    from extproc.tools.domain_sources import fit_temperature

    d = np.load(args.out)
    cfg = TrainConfig()
    labels = list(SUBJECTS)
    k = len(labels)
    embedder = minilm_embedder(1, CACHE)
    train = load_rows(args.data / "train.jsonl")
    corpus = train + load_rows(args.data / "test.jsonl")
    extra = load_rows(DEFAULT_WEIGHTS_DIR / EXTRA_FILE)
    y = d["y"]
    folds = d["folds"]
    src = [r.source or r.group for r in corpus]
    extra_src = [r.source or "written" for r in extra]
    extra_y = np.array([labels.index(r.label) for r in extra], dtype=np.int64)
    emb = np.asarray(embedder.embed([r.text for r in corpus]), dtype=np.float64)
    extra_emb = np.asarray(embedder.embed([r.text for r in extra]), dtype=np.float64)
    first = softmax(d["lex"] + d["static"])
    written = {}
    for name in SETS:
        rows = load_rows(REPO / "bench" / "data" / f"domain_{name}.jsonl")
        written[name] = (
            d[f"{name}_y"],
            softmax(d[f"{name}_lex"] + d[f"{name}_static"]),
            np.asarray(embedder.embed([r.text for r in rows]), dtype=np.float64),
        )
    settings = [
        ("shipped (l2 1e-4, balanced)", 1e-4, 0.0),
        ("l2 1e-3", 1e-3, 0.0),
        ("l2 1e-5", 1e-5, 0.0),
        ("source-balanced, l2 1e-4", 1e-4, 1.0),
        ("source-balanced, l2 1e-3", 1e-3, 1.0),
        ("source-balanced power 0.5, l2 1e-4", 1e-4, 0.5),
        ("source-balanced power 0.75, l2 1e-4", 1e-4, 0.75),
    ]
    settings = [s for s in settings if not args.only or s[0] in args.only]
    for title, l2, power in settings:
        by_source = power > 0
        logits = np.zeros((y.size, k))
        for f in range(cfg.folds):
            held, kept = np.flatnonzero(folds == f), np.flatnonzero(folds != f)
            ty = np.concatenate([y[kept], extra_y])
            wts = (
                source_balanced(ty, [src[int(i)] for i in kept] + extra_src, k, power)
                if by_source
                else balanced_weights(ty, k)
            )
            hw, hb = fit_softmax(np.concatenate([emb[kept], extra_emb]), ty, wts, k, l2=l2, max_iter=cfg.head_max_iter)
            logits[held] = emb[held] @ hw + hb
        t = fit_temperature(logits, y)
        head = softmax(logits / t)
        mixed = 0.7 * head + 0.3 * first
        cells = [f"head alone {(head.argmax(1) == y).mean():.4f}", f"mixed {(mixed.argmax(1) == y).mean():.4f}"]
        cells += [f"at {s:.1%} {at_share(first.max(1), first, mixed, y, s)[0]:.4f}" for s in (0.447, 0.735)]
        per = per_subject(np.where(first.max(1) < 0.6, mixed.argmax(1), first.argmax(1)), y)
        ty = np.concatenate([y[: len(train)], extra_y])
        tsrc = src[: len(train)] + extra_src
        wts = source_balanced(ty, tsrc, k, power) if by_source else balanced_weights(ty, k)
        hw, hb = fit_softmax(
            np.concatenate([emb[: len(train)], extra_emb]), ty, wts, k, l2=l2, max_iter=cfg.head_max_iter
        )
        sets = []
        for name, (wy, f1, we) in written.items():
            mx = 0.7 * softmax((we @ hw + hb) / t) + 0.3 * f1
            sets.append(f"{name} " + "|".join(str(at_threshold(f1.max(1), f1, mx, wy, c)[0]) for c in (0.4, 0.6)))
        print(f"{title} (T {t}): " + ", ".join(cells) + "; " + ", ".join(sets), flush=True)
        print("   per subject at 0.6: " + " ".join(f"{a:.3f}" for a in per), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("dump", "gates", "mixes", "heads"))
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "domain")
    parser.add_argument("--out", type=Path, default=CACHE / "domain-gate.npz")
    parser.add_argument("--only", nargs="*", default=[], help="heads: these settings only")
    a = parser.parse_args()
    if a.what == "dump":
        dump(a)
    elif a.what == "gates":
        gates(a)
    elif a.what == "mixes":
        mixes(a)
    else:
        heads(a)
