"""Leave-source-out figures of the subject classifier's training recipe (`bench_domain.py --loso`).

Every corpus row (train and test split alike) is predicted by both stages fitted without its
source (`domain_sources.source_folds`: `folds` folds of whole sources), on the remaining corpus
rows plus the project's written rows. The stages' temperatures, mix and threshold are the
shipped weights' (`meta.json`), so the cascade is scored as it would run. Costs `folds` stage-1
fits (minutes each on one core).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.domain_classifier import SUBJECTS
from extproc.models.softmax import softmax
from extproc.models.static_embedding import load_tokenizer, packaged_tokenizer_path
from extproc.tools.domain_head_rows import HeadRows, label_indices
from extproc.tools.domain_sources import per_subject_accuracy, source_folds
from extproc.tools.domain_training import (
    F64Array,
    Row,
    TrainConfig,
    balanced_weights,
    cascade,
    first_stage_matrix,
    fit_head,
    fit_softmax,
    mix,
    predict_softmax,
    row_sources,
    stage1_text,
    stage2_probs,
    static_embedding,
    tradeoff,
)


@dataclass(frozen=True, slots=True)
class LeaveSourceOut:
    y: npt.NDArray[np.int64]
    folds: npt.NDArray[np.int64]
    first: F64Array  # stage 1's calibrated probabilities, each row from a model without its source
    head: F64Array  # stage 2's, mixed with stage 1's as served

    def report(self, confident: float) -> dict[str, Any]:
        labels = list(SUBJECTS)
        pred, embedded = cascade(self.first, self.head, confident)
        return {
            "rows": int(self.y.size),
            "folds": int(self.folds.max()) + 1,
            "confident": confident,
            "embedded": round(float(embedded.mean()), 4),
            "cascade": round(float((pred == self.y).mean()), 4),
            "stage1": round(float((self.first.argmax(1) == self.y).mean()), 4),
            "stage2": round(float((self.head.argmax(1) == self.y).mean()), 4),
            "per_subject": per_subject_accuracy(self.y, pred, labels),
            "per_subject_stage2": per_subject_accuracy(self.y, self.head.argmax(1), labels),
            "tradeoff": tradeoff(self.first, self.head, self.y),
        }


def leave_source_out(
    corpus: Sequence[Row],
    extra: Sequence[Row],
    embed: Callable[[Sequence[str]], npt.ArrayLike],
    token_vectors: npt.NDArray[Any],
    cfg: TrainConfig,
    temperatures: tuple[float, float] = (1.0, 1.0),
    log: Callable[[str], None] = lambda _m: None,
    head_extra: Sequence[Row] = (),
    vote_temperature: float = 1.0,
) -> LeaveSourceOut:
    labels = list(SUBJECTS)
    k = len(labels)
    y = np.array([labels.index(r.label) for r in corpus], dtype=np.int64)
    folds = source_folds([r.source or r.group for r in corpus], [r.label for r in corpus], cfg.folds)
    extra_y = np.array([labels.index(r.label) for r in extra], dtype=np.int64)
    emb = np.asarray(embed([r.text for r in corpus]), dtype=np.float64)
    extra_emb = np.asarray(embed([r.text for r in extra]), dtype=np.float64) if extra else emb[:0]
    sources, extra_sources = row_sources(corpus), row_sources(extra)
    # rows for stage 2 only (`head_train.jsonl`): written text, in every fold's head training
    head_rows = HeadRows(
        np.asarray(embed([r.text for r in head_extra]), dtype=np.float32).reshape(len(head_extra), -1)
        if head_extra
        else np.zeros((0, emb.shape[1]), dtype=np.float32),
        label_indices(head_extra, labels),
        row_sources(head_extra),
    )

    def read(text: str) -> str:
        return stage1_text(text, cfg)

    tokenizer = load_tokenizer(packaged_tokenizer_path())
    first = np.zeros((len(corpus), k))
    head = np.zeros((len(corpus), k))
    for f in range(cfg.folds):
        held = np.flatnonzero(folds == f)
        kept = np.flatnonzero(folds != f)
        texts = [read(corpus[int(i)].text) for i in kept] + [read(r.text) for r in extra]
        ty = np.concatenate([y[kept], extra_y])
        weights = balanced_weights(ty, k)
        static = static_embedding(token_vectors, tokenizer, texts, cfg.sif_a)
        x = first_stage_matrix(texts, cfg.lexical, static, cfg.static_scale)
        w, b = fit_softmax(x, ty, weights, k, l2=cfg.first_l2, max_iter=cfg.first_max_iter, threads=cfg.threads)
        held_x = first_stage_matrix([read(corpus[int(i)].text) for i in held], cfg.lexical, static, cfg.static_scale)
        logits = np.log(np.maximum(predict_softmax(held_x, w, b), 1e-300))
        first[held] = softmax(logits / temperatures[0])
        kept_sources = [sources[int(i)] for i in kept] + extra_sources
        head_train = head_rows.joined(np.concatenate([emb[kept], extra_emb]), ty, kept_sources)
        hw, hb = fit_head(*head_train, k, cfg)
        head_logits = np.log(np.maximum(predict_softmax(emb[held], hw, hb), 1e-300))
        probs, _ = stage2_probs(
            head_logits / temperatures[1], emb[held], head_train, cfg, vote_temperature=vote_temperature
        )
        head[held] = mix(probs, first[held], cfg.head_mix)
        log(f"fold {f}: {held.size} rows held out, stage 1 {float((first[held].argmax(1) == y[held]).mean()):.3f}")
    return LeaveSourceOut(y, folds, first, head)
