"""A BERT sentence encoder as an ONNX graph, built from the checkpoint's safetensors weights.

No exporter and no torch: a BERT encoder is word + position + token-type embeddings and a
LayerNorm, then N post-LN layers (self-attention, feed-forward with the exact erf GELU), so the
graph is written node by node with the `onnx` package and the weights go in as initializers.
The sentence embedding is computed in the graph as sentence-transformers defines it for
all-MiniLM-L6-v2: token states mean-pooled over the attention mask, then L2-normalised
(torch's `normalize`, eps 1e-12). Inputs: `input_ids` and `attention_mask`, int64 (batch, seq);
output: `sentence_embedding`, float32 (batch, hidden). Token types are all 0 (single texts).

Two exact rewrites make the graph cheaper than a literal transcription: the attention scale
1/sqrt(head_dim) is folded into the query weights and bias, and token-type row 0 is folded into
the position table (both are added to every token). `tests/models/test_text_embedder_onnx.py`
holds the parity with the transformers reference, on random and on the shipped weights.

`python -m extproc.models.bert_onnx MODEL_DIR OUT.onnx` writes the same graph to a file (to
inspect it, or to serve it elsewhere); the router builds it in memory at load (~1 s).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.registry import ModelUnavailable

OPSET = 17  # LayerNormalization is a standard op from 17
INPUTS = ("input_ids", "attention_mask")
OUTPUT = "sentence_embedding"
_PREFIXES = ("bert.", "model.", "")


class BertGraphError(ModelUnavailable):
    """The checkpoint is not a BERT this builder can write (another architecture, activation, ...)."""


def _config(model_dir: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") not in ("bert", None):
        raise BertGraphError(f"{model_dir}: model_type {config.get('model_type')!r} is not bert")
    if config.get("hidden_act", "gelu") != "gelu":
        raise BertGraphError(f"{model_dir}: hidden_act {config.get('hidden_act')!r}, only the exact gelu is built")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise BertGraphError(f"{model_dir}: only absolute position embeddings are built")
    return config


def load_weights(model_dir: Path) -> dict[str, npt.NDArray[Any]]:
    """The encoder's tensors by their BertModel names (a task head's `bert.` prefix removed)."""
    from safetensors.numpy import load_file

    path = model_dir / "model.safetensors"
    if not path.is_file():
        raise BertGraphError(f"{model_dir} has no model.safetensors (the ONNX encoder reads safetensors only)")
    raw = load_file(str(path))
    for prefix in _PREFIXES:
        if f"{prefix}embeddings.word_embeddings.weight" in raw:
            return {k[len(prefix) :]: v for k, v in raw.items() if k.startswith(prefix)}
    raise BertGraphError(f"{path}: no BERT embeddings.word_embeddings.weight")


class _Graph:
    """Nodes and initializers under construction, with unique names."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, value: npt.NDArray[Any]) -> str:
        self.initializers.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def linear(self, x: str, weight: npt.NDArray[Any], bias: npt.NDArray[Any], name: str) -> str:
        """x @ weight.T + bias, weight as torch stores it (out, in)."""
        w = self.const(f"{name}.weight_t", weight.T.astype(np.float32))
        b = self.const(f"{name}.bias", bias.astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, weights: Mapping[str, npt.NDArray[Any]], name: str, eps: float) -> str:
        scale = self.const(f"{name}.weight", weights[f"{name}.weight"].astype(np.float32))
        bias = self.const(f"{name}.bias", weights[f"{name}.bias"].astype(np.float32))
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)


def _attention(g: _Graph, x: str, mask_bias: str, w: Mapping[str, npt.NDArray[Any]], i: int, heads: int) -> str:
    p = f"encoder.layer.{i}.attention"
    hidden = w[f"{p}.self.query.weight"].shape[0]
    head_dim = hidden // heads
    scale = np.float32(1.0 / np.sqrt(head_dim))
    split = g.const(f"{p}.split_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge = g.const(f"{p}.merge_shape", np.array([0, 0, hidden], dtype=np.int64))
    q = g.linear(x, w[f"{p}.self.query.weight"] * scale, w[f"{p}.self.query.bias"] * scale, f"{p}.self.query")
    k = g.linear(x, w[f"{p}.self.key.weight"], w[f"{p}.self.key.bias"], f"{p}.self.key")
    v = g.linear(x, w[f"{p}.self.value.weight"], w[f"{p}.self.value.bias"], f"{p}.self.value")
    q = g.op("Transpose", [g.op("Reshape", [q, split])], perm=[0, 2, 1, 3])  # (b, h, s, d)
    k = g.op("Transpose", [g.op("Reshape", [k, split])], perm=[0, 2, 3, 1])  # (b, h, d, s)
    v = g.op("Transpose", [g.op("Reshape", [v, split])], perm=[0, 2, 1, 3])
    scores = g.op("Add", [g.op("MatMul", [q, k]), mask_bias])
    probs = g.op("Softmax", [scores], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    context = g.op("Reshape", [context, merge])
    out = g.linear(context, w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"], f"{p}.output.dense")
    return out


def _gelu(g: _Graph, x: str) -> str:
    """0.5 x (1 + erf(x / sqrt 2)): the exact GELU (ORT fuses the pattern into one kernel)."""
    inv_sqrt2 = g.const(f"gelu.inv_sqrt2_{len(g.nodes)}", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    one = g.const(f"gelu.one_{len(g.nodes)}", np.array(1.0, dtype=np.float32))
    half = g.const(f"gelu.half_{len(g.nodes)}", np.array(0.5, dtype=np.float32))
    erf = g.op("Erf", [g.op("Mul", [x, inv_sqrt2])])
    return g.op("Mul", [g.op("Mul", [x, g.op("Add", [erf, one])]), half])


def build_model(model_dir: Path) -> Any:
    """The sentence-embedding ModelProto for the BERT checkpoint in `model_dir`."""
    from onnx import TensorProto, helper

    config = _config(model_dir)
    w = load_weights(model_dir)
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    g = _Graph()

    # Embeddings: word[ids] + (position + token type 0)[0:seq], then LayerNorm.
    word = g.const("embeddings.word", w["embeddings.word_embeddings.weight"].astype(np.float32))
    positions = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    pos = g.const("embeddings.position_plus_type0", positions.astype(np.float32))
    zero = g.const("const.zero", np.array([0], dtype=np.int64))
    one_i = g.const("const.one_index", np.array([1], dtype=np.int64))
    seq_len = g.op("Slice", [g.op("Shape", ["input_ids"]), one_i, g.const("const.two", np.array([2], np.int64))])
    x = g.op("Add", [g.op("Gather", [word, "input_ids"], axis=0), g.op("Slice", [pos, zero, seq_len, zero])])
    x = g.layer_norm(x, w, "embeddings.LayerNorm", eps)

    # Padding masked out of attention: (1 - mask) * -1e9 added to the scores, shape (b, 1, 1, s).
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    unsq = g.const("const.axes_1_2", np.array([1, 2], dtype=np.int64))
    big = g.const("const.neg_big", np.array(-1e9, dtype=np.float32))
    one_f = g.const("const.one_f", np.array(1.0, dtype=np.float32))
    mask_bias = g.op("Mul", [g.op("Sub", [one_f, g.op("Unsqueeze", [mask, unsq])]), big])

    for i in range(layers):
        p = f"encoder.layer.{i}"
        attended = _attention(g, x, mask_bias, w, i, heads)
        x = g.layer_norm(g.op("Add", [attended, x]), w, f"{p}.attention.output.LayerNorm", eps)
        inner = g.linear(x, w[f"{p}.intermediate.dense.weight"], w[f"{p}.intermediate.dense.bias"], f"{p}.inter")
        ffn = g.linear(_gelu(g, inner), w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"], f"{p}.out")
        x = g.layer_norm(g.op("Add", [ffn, x]), w, f"{p}.output.LayerNorm", eps)

    # Mean pooling over real tokens, then L2 normalisation.
    last = g.const("const.axis_last", np.array([-1], dtype=np.int64))
    axis_seq = g.const("const.axis_seq", np.array([1], dtype=np.int64))
    token_mask = g.op("Unsqueeze", [mask, last])  # (b, s, 1)
    summed = g.op("ReduceSum", [g.op("Mul", [x, token_mask]), axis_seq], keepdims=0)
    counts = g.op("ReduceSum", [token_mask, axis_seq], keepdims=0)
    tiny = g.const("const.count_floor", np.array(1e-9, dtype=np.float32))
    pooled = g.op("Div", [summed, g.op("Max", [counts, tiny])])
    norm = g.op("ReduceL2", [pooled], axes=[-1], keepdims=1)  # axes an attribute until opset 18
    eps_norm = g.const("const.norm_floor", np.array(1e-12, dtype=np.float32))
    g.nodes.append(helper.make_node("Div", [pooled, g.op("Max", [norm, eps_norm])], [OUTPUT], name=OUTPUT))

    hidden = int(config["hidden_size"])
    graph = helper.make_graph(
        g.nodes,
        "bert_sentence_embedding",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"]) for name in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", hidden])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="extproc")
    model.ir_version = 8  # readable by every onnxruntime >= 1.14
    return model


def model_bytes(model_dir: Path) -> bytes:
    serialized: bytes = build_model(model_dir).SerializeToString()
    return serialized


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a BERT checkpoint's sentence-embedding ONNX graph.")
    parser.add_argument("model_dir", type=Path, help="a BERT checkpoint folder (config.json, model.safetensors)")
    parser.add_argument("out", type=Path, help="the .onnx file to write")
    args = parser.parse_args(argv)
    args.out.write_bytes(model_bytes(args.model_dir))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
