"""The other scripts' lexical model (fitted by `train.fit_script_lexical`; its figures here): for
an output whose embedding stage reads Latin script only (`harmful`), a second lexical logistic
regression that scores only the texts the head cannot read (CJK, Hangul, Cyrillic, Arabic,
Devanagari, Thai ...), decided alone at a threshold of their own.

It is fitted on the training set plus the written multilingual rows (`harmful_written.jsonl`), so
the base outputs' rows, weights and thresholds stay what they were without it. Its threshold
(`script_high`) comes from out-of-fold scores: the lowest at which at most `script_stage_fp_target`
of those scripts' benign corpus rows and crops, and none of the project-written benign texts in
those scripts (everyday requests, benign twins), are flagged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.tools.attack_training.corpus import BoolArray, F64Array

# Thresholds of the out-of-fold curve in meta.json (and the weights README).
SCRIPT_CURVE = (0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999)


@dataclass(frozen=True, slots=True)
class ScriptFit:
    """The other scripts' lexical model of one output: weights, its threshold and its figures."""

    weight: npt.NDArray[np.float16]
    bias: float
    script_high: float
    metrics: dict[str, Any]


def script_metrics(
    oof_p: F64Array, y: BoolArray, other: BoolArray, corpus: BoolArray, project: BoolArray, script_high: float
) -> dict[str, Any]:
    """The stage's figures: its rows and the out-of-fold curve over `SCRIPT_CURVE` and `script_high`."""
    return {
        "rows": int(y.shape[0]),
        "other_script_rows": int(other.sum()),
        "cv_curve": [_curve_point(t, oof_p, y, other, corpus, project) for t in sorted({*SCRIPT_CURVE, script_high})],
    }


def _curve_point(
    threshold: float,
    oof_p: F64Array,
    y: BoolArray,
    other: BoolArray,
    corpus: BoolArray,
    project: BoolArray,
) -> dict[str, float | int]:
    """Out of fold, texts in other scripts than Latin at `threshold`: harmful corpus rows and
    written harmful rows caught, benign corpus rows and crops flagged, project-written benign flagged."""
    flagged = oof_p >= threshold

    def share(rows: npt.NDArray[np.bool_]) -> float:
        return float(round(float(flagged[rows].mean()), 6)) if rows.any() else 0.0

    return {
        "threshold": float(round(threshold, 6)),
        "corpus_harmful_recall": share(other & y & corpus),
        "written_harmful_recall": share(other & y & ~corpus),
        "benign_fp_rate": share(other & ~y & ~project),
        "project_benign_flagged": int(flagged[other & project].sum()),
        "project_benign": int((other & project).sum()),
    }
