"""The plain baselines the subject classifier is judged beside (the issue's TF-IDF and MiniLM
logistic regressions, and their average), fitted on the same training rows as the classifier,
and `extproc train-domain`'s entry point (train, then the test split beside the baselines)."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR, SUBJECTS, DomainClassifier
from extproc.tools.domain_training import (
    EXTRA_FILE,
    HEAD_EXTRA_FILE,
    FloatArray,
    Row,
    TrainConfig,
    balanced_weights,
    cascade,
    embed_all,
    fit_softmax,
    load_rows,
    minilm_embedder,
    packaged_token_vectors,
    predict_softmax,
    scores,
    tradeoff,
    train,
)
from extproc.tools.domain_training import __doc__ as training_doc
from extproc.tools.fitting import Sparse

_WORD = re.compile(r"[a-z0-9]+")


# --- evaluation -----------------------------------------------------------------------------------------------


def evaluate(
    classifier: DomainClassifier,
    rows: Sequence[Row],
    embed_fn: Callable[[Sequence[str]], npt.ArrayLike] | None,
    *,
    timing_repeats: int = 3,
) -> dict[str, Any]:
    """The cascade on `rows`: scores, stage-1 share, stage-1 latency, the threshold trade-off curve."""
    labels = list(classifier.labels)
    y = np.array([labels.index(r.label) for r in rows], dtype=np.int64)
    lex = np.zeros((len(rows), len(labels)), dtype=np.float64)
    latencies = []
    for i, r in enumerate(rows):
        best = math.inf
        for _ in range(max(1, timing_repeats)):
            t0 = time.perf_counter()
            p = classifier.first_stage_probs(r.text)
            best = min(best, time.perf_counter() - t0)
        lex[i] = p
        latencies.append(best * 1e6)
    head = lex.copy()
    if embed_fn is not None and rows:
        vecs = np.asarray(embed_fn([r.text for r in rows]), dtype=np.float32)
        for i in range(len(rows)):
            head[i] = classifier.embedding_probs(vecs[i], lex[i].astype(np.float32))
    pred, embedded = cascade(lex, head, classifier.confident)
    lat = np.array(latencies) if latencies else np.zeros(1)
    return {
        "cascade": scores(y, pred, labels),
        "stage1_only": scores(y, lex.argmax(1), labels),
        "stage2_everywhere": scores(y, head.argmax(1), labels) if embed_fn is not None else None,
        "confident": classifier.confident,
        "stage1_share": round(1.0 - float(embedded.mean()), 4),
        "stage1_latency_us": {
            q: round(float(np.percentile(lat, v)), 1) for q, v in (("p50", 50), ("p90", 90), ("p99", 99))
        },
        "tradeoff": tradeoff(lex, head, y) if embed_fn is not None else [],
    }


def format_scores(name: str, s: dict[str, Any]) -> str:
    return f"{name:22s} accuracy {s['accuracy']:.4f}  macro-F1 {s['macro_f1']:.4f}"


def format_report(report: dict[str, Any], base: dict[str, Any] | None) -> str:
    lines = [
        f"rows {report['cascade']['rows']}  confident {report['confident']}  stage-1 share {report['stage1_share']}",
        f"stage-1 latency us {report['stage1_latency_us']}",
    ]
    lines.append(format_scores("cascade (shipped)", report["cascade"]))
    lines.append(format_scores("stage 1 only", report["stage1_only"]))
    if report["stage2_everywhere"] is not None:
        lines.append(format_scores("stage 2 on every text", report["stage2_everywhere"]))
    if base:
        for key, title in (
            ("tfidf_lr", "baseline TF-IDF LR"),
            ("minilm_lr", "baseline MiniLM LR"),
            ("average", "baseline average"),
        ):
            lines.append(format_scores(title, base[key]))
    header = f"{'subject':18s} {'n':>4s} {'cascade':>8s}" + ("  tfidf  minilm  average" if base else "")
    lines.append("per-subject recall:")
    lines.append(header)
    for name, row in report["cascade"]["per_label"].items():
        line = f"{name:18s} {row['support']:4d} {row['recall']:8.3f}"
        if base:
            line += "".join(
                f" {base[k]['per_label'][name]['recall']:6.3f} " for k in ("tfidf_lr", "minilm_lr", "average")
            )
        lines.append(line)
    if report["tradeoff"]:
        lines.append("threshold trade-off (confident -> share embedded, accuracy):")
        lines.extend(f"  {c['confident']:.2f} -> {c['embedded']:.3f} {c['accuracy']:.4f}" for c in report["tradeoff"])
    return "\n".join(lines)


class TfidfFeatures:
    """Word unigrams + bigrams, min_df 2, sublinear tf, smoothed idf, L2-normalised (scikit-learn's
    TfidfVectorizer defaults with sublinear_tf and ngram_range=(1, 2)), fitted on the training texts."""

    def __init__(self, texts: Sequence[str]) -> None:
        df: Counter[str] = Counter()
        for text in texts:
            df.update(set(self.terms(text)))
        vocab = sorted(t for t, c in df.items() if c >= 2)
        self.index = {t: i for i, t in enumerate(vocab)}
        n = len(texts)
        self.idf = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in vocab], dtype=np.float64)

    @staticmethod
    def terms(text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]

    def __call__(self, text: str) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        counts = Counter(self.index[t] for t in self.terms(text) if t in self.index)
        ids = np.array(sorted(counts), dtype=np.int64)
        vals = np.array([(1.0 + math.log(counts[i])) * self.idf[i] for i in ids], dtype=np.float64)
        norm = float(np.linalg.norm(vals))
        return ids, (vals / norm if norm else vals)


def baselines(
    train_rows: Sequence[Row], test_rows: Sequence[Row], train_emb: FloatArray, test_emb: FloatArray, threads: int = 1
) -> dict[str, Any]:
    """The issue's baselines on the same splits: TF-IDF LR, LR on mean-pooled MiniLM, their average."""
    labels = list(SUBJECTS)
    k = len(labels)
    y = np.array([labels.index(r.label) for r in train_rows], dtype=np.int64)
    yt = np.array([labels.index(r.label) for r in test_rows], dtype=np.int64)
    w = balanced_weights(y, k)
    tfidf = TfidfFeatures([r.text for r in train_rows])
    xtr = Sparse.from_texts([r.text for r in train_rows], tfidf, len(tfidf.index))
    xte = Sparse.from_texts([r.text for r in test_rows], tfidf, len(tfidf.index))
    tw, tb = fit_softmax(xtr, y, w, k, l2=1e-4, max_iter=300, threads=threads)
    p_tfidf = predict_softmax(xte, tw, tb)
    ew, eb = fit_softmax(train_emb.astype(np.float64), y, w, k, l2=1e-4, max_iter=300, threads=threads)
    p_emb = predict_softmax(test_emb.astype(np.float64), ew, eb)
    p_avg = (p_tfidf + p_emb) / 2.0
    return {
        "tfidf_lr": scores(yt, p_tfidf.argmax(1), labels),
        "minilm_lr": scores(yt, p_emb.argmax(1), labels),
        "average": scores(yt, p_avg.argmax(1), labels),
    }


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="extproc train-domain", description=training_doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="folder with train.jsonl and test.jsonl")
    parser.add_argument("--out", type=Path, default=None, help="weights folder (default: the packaged one)")
    parser.add_argument("--extra", type=Path, default=None, help=f"extra training rows (default: OUT/{EXTRA_FILE})")
    parser.add_argument(
        "--head-extra", type=Path, default=None, help=f"rows for stage 2 only (default: OUT/{HEAD_EXTRA_FILE})"
    )
    parser.add_argument("--eval-only", action="store_true", help="evaluate the weights in --out on test.jsonl")
    parser.add_argument("--no-baselines", action="store_true", help="skip the TF-IDF / MiniLM baselines")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: deterministic)")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "extproc-domain-cache")
    parser.add_argument("--no-cache", action="store_true", help="no on-disk cache of embeddings and token vectors")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(list(argv) if argv is not None else None)
    out_dir: Path = args.out or DEFAULT_WEIGHTS_DIR
    embedder = minilm_embedder(args.threads, None if args.no_cache else args.cache_dir)
    if not args.eval_only:
        metrics = train(
            args.data,
            out_dir,
            embedder=embedder,
            token_vectors=packaged_token_vectors(args.threads, None if args.no_cache else args.cache_dir),
            config=TrainConfig(threads=args.threads),
            extra=args.extra or out_dir / EXTRA_FILE,
            head_extra=args.head_extra or out_dir / HEAD_EXTRA_FILE,
            log=lambda m: print(m, file=sys.stderr),
        )
        print(json.dumps({"train_cv_metrics": metrics}, indent=2, sort_keys=True), file=sys.stderr)
    test_file = args.data / "test.jsonl"
    if not test_file.is_file():
        print(f"no {test_file}: nothing to evaluate", file=sys.stderr)
        return 0
    classifier = DomainClassifier.load(out_dir)
    test_rows = load_rows(test_file)
    report = evaluate(classifier, test_rows, embedder.embed)
    base = None
    if not args.no_baselines:
        train_rows = load_rows(args.data / "train.jsonl")
        base = baselines(
            train_rows,
            test_rows,
            embed_all(embedder, [r.text for r in train_rows]),
            embed_all(embedder, [r.text for r in test_rows]),
            threads=args.threads,
        )
    print(json.dumps({"report": report, "baselines": base}, indent=2) if args.json else format_report(report, base))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
