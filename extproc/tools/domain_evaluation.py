"""The plain baselines the subject classifier is judged beside (the issue's TF-IDF and MiniLM
logistic regressions, and their average), fitted on the same training rows as the classifier."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.domain_classifier import SUBJECTS
from extproc.tools.domain_training import FloatArray, Row, balanced_weights, fit_softmax, predict_softmax, scores
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
