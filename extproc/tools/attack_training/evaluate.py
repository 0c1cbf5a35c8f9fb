"""Evaluation of the shipped cascade on a split: recall, false positives, tables, curves, latency."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from extproc.models.attack_classifier import (
    AttackClassifier,
)
from extproc.tools.attack_training.corpus import (
    ATTACK,
    BENIGN,
    SHORT_TEXT_CHARS,
    BoolArray,
    CorpusRow,
    EmbedFn,
    F64Array,
)

# --- evaluation -----------------------------------------------------------------------------------------


def _rate(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def evaluate(
    classifier: AttackClassifier,
    rows: Sequence[CorpusRow],
    embed_fn: EmbedFn | None,
    *,
    timing_repeats: int = 1,
) -> dict[str, Any]:
    """One output's cascade on `rows` (its label's rows are the positives, the benign rows the
    negatives; rows of other labels are left out of recall and FP, and reported apart):
    overall / non-English / short recall and FP, per-category and per-language tables, the
    share reaching the embedding stage, lexical latency, and recall/FP trade-off curves.
    Without `embed_fn` uncertain texts count as benign."""
    target = classifier.label
    n = len(rows)
    labels = np.array([r.label for r in rows])
    y = labels == target
    benign_rows = labels == BENIGN
    p, latencies = _lexical_scores(classifier, rows, timing_repeats)
    th = classifier.thresholds
    flagged, embedded, s = _cascade(classifier, rows, p, embed_fn)
    others = ~y & ~benign_rows
    # From here on, recall and FP read the positives and the benign rows only.
    judged = y | benign_rows
    y = y[judged]
    rows_all = rows
    rows = [r for r, keep in zip(rows, judged.tolist(), strict=True) if keep]
    flagged_all, embedded_all = flagged, embedded
    flagged, embedded, p, s = flagged[judged], embedded[judged], p[judged], s[judged]
    short = np.array([len(r.text) < SHORT_TEXT_CHARS for r in rows], dtype=bool)
    non_en = np.array([r.lang != "en" for r in rows], dtype=bool)
    lat = np.array(latencies)
    other_labels = sorted({r.label for r, o in zip(rows_all, others.tolist(), strict=True) if o})
    return {
        "output": target,
        "rows": len(rows),
        "attacks": int(y.sum()),
        "positives": int(y.sum()),
        "benign": int((~y).sum()),
        "thresholds": {
            "low": th.low,
            "high": th.high,
            "decision": th.decision,
            "short_chars": th.short_chars,
            "short_high": th.short_high,
            "long_high": th.long_high,
            "head_scripts": th.head_scripts,
        },
        "embedding_stage": embed_fn is not None,
        "recall": _rate(int(flagged[y].sum()), int(y.sum())),
        "fp_rate": _rate(int(flagged[~y].sum()), int((~y).sum())),
        "false_positives": int(flagged[~y].sum()),
        "non_english_recall": _rate(int(flagged[y & non_en].sum()), int((y & non_en).sum())),
        "non_english_fp_rate": _rate(int(flagged[~y & non_en].sum()), int((~y & non_en).sum())),
        "short_recall": _rate(int(flagged[y & short].sum()), int((y & short).sum())),
        "short_fp_rate": _rate(int(flagged[~y & short].sum()), int((~y & short).sum())),
        "benign_never_embedded": _rate(int((~embedded[~y]).sum()), int((~y).sum())),
        "all_embedded": _rate(int(embedded_all.sum()), n),
        "attack_embedded": _rate(int(embedded[y].sum()), int(y.sum())),
        "other_labels": {
            "labels": other_labels,
            "rows": int(others.sum()),
            "flagged": _rate(int(flagged_all[others].sum()), int(others.sum())),
        },
        "lexical_latency_us": {
            "p50": round(float(np.percentile(lat, 50)), 1),
            "p90": round(float(np.percentile(lat, 90)), 1),
            "p99": round(float(np.percentile(lat, 99)), 1),
            "max": round(float(lat.max()), 1),
        }
        if n
        else {},
        "lexical_only_curve": _lexical_curve(p, y, th.high),
        "cascade_decision_curve": _cascade_curve(classifier, rows, p, s, y, embedded) if embed_fn is not None else [],
        "per_category": _table(rows, y, flagged, embedded, lambda r: r.category),
        "per_language": _table(rows, y, flagged, embedded, lambda r: r.lang),
    }


def _lexical_scores(
    classifier: AttackClassifier, rows: Sequence[CorpusRow], timing_repeats: int
) -> tuple[F64Array, list[float]]:
    """Each row's lexical probability, and the best of `timing_repeats` timings of it in microseconds."""
    p = np.zeros(len(rows), dtype=np.float64)
    latencies: list[float] = []
    for i, r in enumerate(rows):
        best = math.inf
        for _ in range(max(1, timing_repeats)):
            t0 = time.perf_counter()
            score = classifier.lexical_score(r.text)
            best = min(best, time.perf_counter() - t0)
        p[i] = score
        latencies.append(best * 1e6)
    return p, latencies


def _cascade(
    classifier: AttackClassifier, rows: Sequence[CorpusRow], p: F64Array, embed_fn: EmbedFn | None
) -> tuple[BoolArray, BoolArray, F64Array]:
    """(flagged, embedded, head score: NaN where the head did not run) of the shipped cascade."""
    th = classifier.thresholds
    n = len(rows)
    sure = np.array([th.sure(len(r.text)) for r in rows], dtype=np.float64)
    embedded = (p >= th.low) & (p < sure) & np.array([th.head_reads(r.text) for r in rows], dtype=bool)
    s = np.full(n, np.nan, dtype=np.float64)
    band = np.flatnonzero(embedded)
    if embed_fn is not None and band.size:
        band_rows = [int(i) for i in band]
        vecs = np.asarray(embed_fn([rows[i].text for i in band_rows]), dtype=np.float32)
        for j, i in enumerate(band_rows):
            s[i] = classifier.embedding_score(vecs[j], float(p[i]))
    flagged = (p >= sure) | (embedded & (np.nan_to_num(s, nan=0.0) >= th.decision))
    return flagged, embedded, s


def _table(
    rows: Sequence[CorpusRow],
    y: BoolArray,
    flagged: BoolArray,
    embedded: BoolArray,
    key: Callable[[CorpusRow], str],
) -> dict[str, dict[str, Any]]:
    """Recall, FP rate and embedded share per group of rows (`key`: category or language)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[key(r)].append(i)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(groups):
        idx = np.array(groups[name])
        att, ben = idx[y[idx]], idx[~y[idx]]
        out[name] = {
            "attacks": int(att.size),
            "recall": _rate(int(flagged[att].sum()), att.size),
            "benign": int(ben.size),
            "fp_rate": _rate(int(flagged[ben].sum()), ben.size),
            "embedded": _rate(int(embedded[idx].sum()), idx.size),
        }
    return out


def _lexical_curve(p: F64Array, y: BoolArray, high: float) -> list[dict[str, Any]]:
    """Recall and FP of the lexical stage alone at a few thresholds (and the shipped `high`)."""
    curve = []
    for t in (0.3, 0.5, 0.7, 0.9, high):
        f = p >= t
        curve.append(
            {
                "threshold": round(float(t), 4),
                "recall": _rate(int(f[y].sum()), int(y.sum())),
                "fp_rate": _rate(int(f[~y].sum()), int((~y).sum())),
            }
        )
    return curve


def _cascade_curve(
    classifier: AttackClassifier,
    rows: Sequence[CorpusRow],
    p: F64Array,
    s: F64Array,
    y: BoolArray,
    embedded: BoolArray,
) -> list[dict[str, Any]]:
    """Recall and FP of the cascade at a few decision thresholds (and the shipped one)."""
    th = classifier.thresholds
    lexical_sure = p >= np.array([th.sure(len(r.text)) for r in rows], dtype=np.float64)
    curve = []
    for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, th.decision):
        f = lexical_sure | (embedded & (np.nan_to_num(s, nan=0.0) >= t))
        curve.append(
            {
                "decision": round(float(t), 4),
                "recall": _rate(int(f[y].sum()), int(y.sum())),
                "fp_rate": _rate(int(f[~y].sum()), int((~y).sum())),
            }
        )
    return curve


def format_report(report: dict[str, Any]) -> str:
    output = report.get("output", ATTACK)
    others = report.get("other_labels", {})
    lines = [
        f"== output {output}: rows {report['rows']} ({output} {report['positives']}, benign {report['benign']})",
        f"thresholds {report['thresholds']}",
        f"recall {report['recall']}  fp_rate {report['fp_rate']} ({report['false_positives']} benign flagged)",
        f"non-English recall {report['non_english_recall']}  non-English fp_rate {report['non_english_fp_rate']}",
        f"short (< {SHORT_TEXT_CHARS} chars) recall {report['short_recall']}  short fp_rate {report['short_fp_rate']}",
        f"rows of other labels {others.get('labels')} ({others.get('rows')}): flagged {others.get('flagged')}",
        f"benign never embedded {report['benign_never_embedded']}  attacks embedded {report['attack_embedded']}"
        f"  all embedded {report['all_embedded']}",
        f"lexical latency us {report['lexical_latency_us']}",
        f"lexical only: {report['lexical_only_curve']}",
        f"cascade, decision threshold: {report['cascade_decision_curve']}",
    ]
    for name in ("per_category", "per_language"):
        lines.append(f"{name}:  name  {output} recall | benign fp_rate | embedded")
        for key, row in report[name].items():
            attack = f"{row['attacks']:5d} {row['recall']!s:>7}"
            benign = f"{row['benign']:5d} {row['fp_rate']!s:>7}"
            lines.append(f"  {key:24s} {attack} | {benign} | {row['embedded']}")
    return "\n".join(lines)
