"""The fits: the sparse lexical logistic regression, the embedding head, the cascade's thresholds."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.attack_classifier import (
    LexicalConfig,
    lexical_features,
)
from extproc.tools.attack_training.corpus import BoolArray, F64Array, FloatArray, TrainConfig
from extproc.tools.fitting import Sparse, minimise_lbfgs

# --- sparse lexical matrix + logistic regression ------------------------------------------------


def lexical_matrix(texts: Sequence[str], config: LexicalConfig) -> Sparse:
    return Sparse.from_texts(texts, lambda text: lexical_features(text, config), config.n_features)


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
    x: Sparse, y: BoolArray, weights: F64Array, *, l2: float, max_iter: int, threads: int = 1
) -> tuple[F64Array, float]:
    """Weighted L2 logistic regression on a sparse matrix, full-batch L-BFGS (torch)."""
    import torch

    rows = x.row_ids()
    cw = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    target = y.astype(np.float64)
    d = x.n_cols

    def loss_and_grad(params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        theta = params.numpy()
        w, b = theta[:d], theta[d]
        z = np.bincount(rows, weights=x.data * w[x.indices], minlength=x.n_rows) + b
        # loss_i = -[y log s(z) + (1-y) log s(-z)]
        loss = -float(np.dot(cw, target * _log_sigmoid(z) + (1.0 - target) * _log_sigmoid(-z)))
        loss += 0.5 * l2 * float(w @ w)
        resid = cw * (1.0 / (1.0 + np.exp(-z)) - target)
        grad = np.empty(d + 1, dtype=np.float64)
        grad[:d] = np.bincount(x.indices, weights=x.data * resid[rows], minlength=d) + l2 * w
        grad[d] = resid.sum()
        return torch.tensor(loss, dtype=torch.float64), torch.from_numpy(grad)

    theta = minimise_lbfgs(
        loss_and_grad, d + 1, max_iter=max_iter, tolerance_grad=1e-7, tolerance_change=1e-10, threads=threads
    )
    return theta[:d], float(theta[d])


def sparse_logits(x: Sparse, w: npt.NDArray[Any], b: float) -> F64Array:
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
    long_high: float | None = None  # the sure threshold of the other texts (None: high)
    script_high: float | None = None  # the sure threshold of texts the head may not read (None: as the others)


def with_script_high(sure: F64Array | float, readable: BoolArray | None, script_high: float | None) -> F64Array | float:
    """`sure` with `script_high` in place for the texts the embedding stage may not read (other
    scripts than Latin, for a Latin-only head): the lexical stage alone decides those, so their
    sure threshold is chosen on their own benign texts."""
    if script_high is None or readable is None:
        return sure
    return np.where(readable, sure, script_high)


@dataclass(frozen=True, slots=True)
class HeldBenign:
    """Benign texts that must stay unflagged out of fold (the project's own everyday requests):
    their lexical and head probabilities, which are short, which the head may read."""

    p: F64Array
    s: F64Array
    short: BoolArray
    readable: BoolArray
    # How many of them a choice may flag out of fold. 0 pushed issue 48's head decision to 1.0 (the
    # grid's fallback) and the harmful output's recall to 9%: one odd everyday text out of ~5,000
    # vetoed every threshold. A few flagged out of fold, checked on the evaluation sets, costs less.
    budget: int = 0


def sure_thresholds(
    high: float, short: BoolArray | None, short_high: float | None, long_high: float | None = None
) -> F64Array | float:
    """Per text, the lexical probability at or above which it is decided without the embedding
    stage: `short_high` for the short texts, `long_high` for the rest, neither below `high`."""
    short_top = high if short_high is None else max(high, short_high)
    long_top = high if long_high is None else max(high, long_high)
    if short is None:
        return long_top
    return np.where(short, short_top, long_top)


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


# The head decisions tried above 0.99 when held benign texts bound the search.
FINE_DECISIONS = (0.992, 0.994, 0.995, 0.996, 0.997, 0.998, 0.999, 0.9995)


def choose_thresholds(
    p: F64Array,
    s: F64Array,
    y: BoolArray,
    fp_target: float,
    embed_target: float,
    short: BoolArray | None = None,
    short_high: float | None = None,
    readable: BoolArray | None = None,
    long_high: float | None = None,
    script_high: float | None = None,
    held: HeldBenign | None = None,
) -> CascadeChoice:
    """Grid search on out-of-fold scores: max recall s.t. FP <= fp_target and benign
    embedding share <= embed_target; ties go to fewer embedded texts, then higher thresholds.
    Texts marked `short` are decided by the lexical stage alone only at max(high, short_high), the
    others at max(high, long_high); texts not `readable` at `script_high` when given. With `held`,
    a choice that flags more than `held.budget` of those benign texts out of fold is not taken."""
    pb, pa = p[~y], p[y]
    lows = sorted({float(np.quantile(pb, q)) for q in np.arange(0.80, 0.999, 0.005)})
    highs = sorted({float(np.quantile(pb, 1.0 - q)) for q in np.arange(0.0005, 0.0105, 0.0005)} | {1.0})
    decisions = np.round(np.arange(0.02, 0.995, 0.01), 4)
    if held is not None:  # a budget of held texts sits among the head's top scores: finer steps there
        decisions = np.union1d(decisions, FINE_DECISIONS)
    best: CascadeChoice | None = None
    best_key: tuple[float, ...] = ()
    for low in lows:
        for high in highs:
            if high < low:
                continue
            sure = with_script_high(sure_thresholds(high, short, short_high, long_high), readable, script_high)
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
            allowed = fpr <= fp_target
            if held is not None:
                held_sure = with_script_high(
                    sure_thresholds(high, held.short, short_high, long_high), held.readable, script_high
                )
                held_sure_hits = int((held.p >= held_sure).sum())
                if held_sure_hits > held.budget:
                    continue
                held_embedded = (held.p >= low) & (held.p < held_sure) & held.readable
                if held_embedded.any():
                    held_head_hits = (held.s[held_embedded][None, :] >= decisions[:, None]).sum(axis=1)
                    allowed &= held_sure_hits + held_head_hits <= held.budget
            for k in np.flatnonzero(allowed):
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
                        long_high=None if long_high is None else max(high, long_high),
                        script_high=script_high,
                    )
    if best is None:  # nothing meets the targets: be conservative
        high = float(np.quantile(pb, 1.0 - fp_target)) if pb.size else 1.0
        top = None if short_high is None else max(high, short_high)
        long_top = None if long_high is None else max(high, long_high)
        sure = with_script_high(sure_thresholds(high, short, top, long_top), readable, script_high)
        flagged, embedded = cascade_predict(p, s, high, high, 1.0, sure, readable)
        best = CascadeChoice(
            high, high, 1.0, float(flagged[y].mean()), float(flagged[~y].mean()), 0.0, 0.0, top, long_top, script_high
        )
    return best
