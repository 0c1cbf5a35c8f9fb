"""The other scripts' lexical model: for an output whose embedding stage reads Latin script only
(`harmful`), a second lexical logistic regression that scores only the texts the head cannot read
(CJK, Hangul, Cyrillic, Arabic, Devanagari, Thai ...), decided alone at a threshold of their own.

It is fitted on the training set plus the written multilingual rows (`harmful_written.jsonl`), so
the base outputs' rows, weights and thresholds stay what they were without it. Its threshold
(`script_high`) comes from out-of-fold scores: the lowest at which at most `script_stage_fp_target`
of those scripts' benign corpus rows and crops, and none of the project-written benign texts in
those scripts (everyday requests, benign twins), are flagged."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.tools.attack_training.corpus import F64Array, TrainConfig
from extproc.tools.attack_training.fitting import fit_logistic_sparse, lexical_matrix, sigmoid, sparse_logits
from extproc.tools.attack_training.train import _out_of_fold_lexical, _script_high, _training_set, rows_for

# Thresholds of the out-of-fold curve in meta.json (and the weights README).
SCRIPT_CURVE = (0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999)


@dataclass(frozen=True, slots=True)
class ScriptFit:
    """The other scripts' lexical model of one output: weights, its threshold and its figures."""

    weight: npt.NDArray[np.float16]
    bias: float
    script_high: float
    metrics: dict[str, Any]


def fit_script_lexical(corpus_dir: Path, cfg: TrainConfig, output: str, say: Callable[[str], None]) -> ScriptFit | None:
    """The other scripts' lexical model of `output`; None when the training set has no benign text
    in another script than Latin to choose its threshold on."""
    data = _training_set(corpus_dir, dataclasses.replace(cfg, written_harmful=True), say)
    used, positive = rows_for(data, output)
    idx = np.flatnonzero(used)
    y = positive[idx]
    x_out = lexical_matrix(data.texts, cfg.lexical).take(idx)
    oof_p = sigmoid(_out_of_fold_lexical(data, x_out, idx, y, f"{output} (other scripts)", say))
    reads = data.latin[idx]
    script_high = _script_high(data, idx, oof_p, reads, cfg.script_stage_fp_target, budget=0)
    if script_high is None:
        say(f"{output}: no benign text in another script: no lexical model of their own")
        return None
    say(f"{output} (other scripts): script_high {script_high:.6f}")
    w, b = fit_logistic_sparse(
        x_out, y, data.weights(idx, y), l2=cfg.lexical_l2, max_iter=cfg.lexical_max_iter, threads=cfg.threads
    )
    w16 = w.astype(np.float16)
    other = ~reads
    p16 = sigmoid(sparse_logits(x_out, w16, b))
    fp16_diff = float(np.abs(sigmoid(sparse_logits(x_out, w.astype(np.float32), b)) - p16)[other].max(initial=0.0))
    if fp16_diff > 1e-2:
        raise RuntimeError(f"{output} (other scripts): float16 weights change scores by {fp16_diff:.4f}")
    corpus = data.original[idx]
    project = data.project[idx] & data.benign[idx]
    metrics = {
        "rows": int(idx.shape[0]),
        "other_script_rows": int(other.sum()),
        "cv_curve": [_curve_point(t, oof_p, y, other, corpus, project) for t in sorted({*SCRIPT_CURVE, script_high})],
        "float16_max_abs_prob_diff": float(round(fp16_diff, 8)),
    }
    return ScriptFit(w16, float(b), script_high, metrics)


def _curve_point(
    threshold: float,
    oof_p: F64Array,
    y: npt.NDArray[np.bool_],
    other: npt.NDArray[np.bool_],
    corpus: npt.NDArray[np.bool_],
    project: npt.NDArray[np.bool_],
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
