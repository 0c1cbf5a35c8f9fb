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
from collections import Counter
from collections.abc import Iterable, Sequence
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
    embed_all,
    evaluate,
    fit_softmax,
    format_report,
    load_rows,
    minilm_embedder,
    packaged_token_vectors,
    predict_softmax,
    scores,
    train,
)
from extproc.tools.domain_training import __doc__ as training_doc
from extproc.tools.fitting import Sparse

_WORD = re.compile(r"[a-z0-9]+")


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
