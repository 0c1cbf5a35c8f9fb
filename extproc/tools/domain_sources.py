"""Judging the subject classifier as users meet it: on sources it was not trained on.

The corpus's test split shares its textbooks with the training split, so it flatters a model
that learned a book's style. Here every corpus source is held out in turn: the rows are cut
into `folds` folds of whole sources (a source never straddles two folds; sources of the same
subject go to different folds where possible, so each fold still teaches every subject), each
fold is predicted by a model fitted on the others (plus the project's written rows, which are
no corpus source and always train), and the out-of-source predictions give

- the figures users will meet (accuracy overall and per subject, `scores`);
- stage 1's temperature (`fit_temperature`): the scale that makes its probabilities honest on
  text unlike its training rows, folded into the shipped weights;
- the cascade's threshold curve, so that unfamiliar text goes to stage 2.

Tiny sources (under `SMALL_SOURCE` rows, e.g. the six LegalBench diversity tasks, 25 rows
each) are held out together with the other small sources of their subject.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from extproc.models.softmax import softmax

SMALL_SOURCE = 60
F64Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def source_units(sources: Sequence[str], labels: Sequence[str]) -> list[str]:
    """Each row's hold-out unit: its source, or "small sources: <subject>" for a small source
    (the subject being the source's most common label)."""
    size = Counter(sources)
    main_label: dict[str, str] = {}
    by_source: dict[str, Counter[str]] = defaultdict(Counter)
    for source, label in zip(sources, labels, strict=True):
        by_source[source][label] += 1
    for source, counts in by_source.items():
        main_label[source] = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    return [s if size[s] >= SMALL_SOURCE else f"small sources: {main_label[s]}" for s in sources]


def source_folds(sources: Sequence[str], labels: Sequence[str], folds: int) -> IntArray:
    """A fold for every row, by whole source units: the largest unit first, each to the
    smallest fold holding no unit of its subject yet (else the smallest fold). Deterministic."""
    if folds < 2:
        raise ValueError(f"need two or more folds, got {folds}")
    units = source_units(sources, labels)
    rows: Counter[str] = Counter(units)
    unit_labels: dict[str, set[str]] = defaultdict(set)
    for unit, label in zip(units, labels, strict=True):
        unit_labels[unit].add(label)
    fold_rows = [0] * folds
    fold_labels: list[set[str]] = [set() for _ in range(folds)]
    where: dict[str, int] = {}
    for unit in sorted(rows, key=lambda u: (-rows[u], u)):
        free = [f for f in range(folds) if not fold_labels[f] & unit_labels[unit]]
        f = min(free or range(folds), key=lambda i: (fold_rows[i], i))
        where[unit] = f
        fold_rows[f] += rows[unit]
        fold_labels[f] |= unit_labels[unit]
    return np.array([where[u] for u in units], dtype=np.int64)


def source_balanced_weights(y: IntArray, sources: Sequence[str], k: int, power: float) -> F64Array:
    """Row weights summing to 1: every subject the same total, and inside a subject a row weighs
    1 / (rows of its source) ** `power` (0: every row alike, the class-balanced weights; 1: every
    source of the subject alike). Out of source, one big textbook teaching a subject teaches its
    style as much as its subject; equal sources teach more of what they share (issue 44)."""
    if len(sources) != y.size:
        raise ValueError(f"{y.size} labels but {len(sources)} sources")
    size = Counter(zip(y.tolist(), sources, strict=True))
    w = np.array([float(size[(int(label), source)]) ** -power for label, source in zip(y, sources, strict=True)])
    w = w / np.maximum(np.bincount(y, weights=w, minlength=k), 1e-300)[y]
    return np.asarray(w / w.sum(), dtype=np.float64)


def nll(logits: F64Array, y: IntArray, temperature: float) -> float:
    p = softmax(logits / temperature)
    return float(-np.log(np.maximum(p[np.arange(y.size), y], 1e-12)).mean())


def fit_temperature(logits: F64Array, y: IntArray, low: float = 0.25, high: float = 8.0) -> float:
    """The temperature minimising the negative log-likelihood of out-of-source logits (golden
    section on log T; the NLL is unimodal in T), rounded to 3 decimals so retraining is stable."""
    a, b = np.log(low), np.log(high)
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    for _ in range(60):
        if nll(logits, y, float(np.exp(c))) < nll(logits, y, float(np.exp(d))):
            b = d
        else:
            a = c
        c, d = b - ratio * (b - a), a + ratio * (b - a)
    return round(float(np.exp((a + b) / 2.0)), 3)


def per_subject_accuracy(y: IntArray, pred: IntArray, labels: Sequence[str]) -> dict[str, float]:
    return {name: round(float((pred[y == i] == i).mean()), 4) for i, name in enumerate(labels) if (y == i).any()}
