"""`embedder.precision: int8`: the served encoder's projections quantized at load (dynamic, per
output channel). Its vectors are not the fp32 ones; the check here is that they stay close on a
fixed text set (cosine >= MIN_INT8_COSINE to the fp32 encoder, measured 0.98-0.996 on the shipped
weights), that the graph really is quantized, and that the check catches per-tensor quantization
(one scale a matrix: measured 0.89-0.98). The signal figures int8 moves are in docs/running.md."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from extproc.models.bert_onnx import build_model, model_bytes, quantized_int8
from extproc.models.registry import ModelRegistry, ModelUnavailable
from extproc.models.text_embedder import TextEmbedder, get_text_embedder, load_text_embedder
from extproc.settings import EmbedderSettings, Settings, SettingsError
from tests.models.test_text_embedder_onnx import TEXTS

MIN_INT8_COSINE = 0.975


@pytest.fixture(scope="module")
def fp32_vectors(minilm: Path) -> np.ndarray[Any, Any]:
    vectors: np.ndarray[Any, Any] = TextEmbedder(minilm, cache_size=0).embed(TEXTS)
    return vectors


def int8_failures(served: np.ndarray[Any, Any], fp32: np.ndarray[Any, Any]) -> list[str]:
    cosine = (served * fp32).sum(1) / (np.linalg.norm(served, axis=1) * np.linalg.norm(fp32, axis=1))
    return [f"row {i}: cosine {c:.4f}" for i, c in enumerate(cosine) if c < MIN_INT8_COSINE]


def test_int8_vectors_stay_close_to_fp32(minilm: Path, fp32_vectors: np.ndarray[Any, Any]) -> None:
    models = ModelRegistry()
    served = get_text_embedder(models, EmbedderSettings(precision="int8", cache_size=0))
    assert served.runtime == "onnx" and served.precision == "int8"
    (status,) = models.statuses()
    assert status.loaded and status.detail.endswith(", int8")  # operators see the precision
    vectors = served.embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == fp32_vectors.shape
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)  # still L2-normalised in the graph
    assert int8_failures(vectors, fp32_vectors) == []
    # Quantized for real: the vectors moved (an fp32 graph served by mistake is ~1e-7 away).
    assert float(np.abs(vectors - fp32_vectors).max()) > 1e-3
    # A text's vector does not depend on the texts it was batched with: int8 scales each pass's
    # activations as a whole, so it runs one text a pass (batched, "hello" moved to cosine 0.975).
    assert served._onnx is not None
    before = served._onnx.calls
    single = np.stack([served.embed_uncached([t])[0] for t in TEXTS])
    assert served._onnx.calls - before == len(TEXTS)
    assert np.array_equal(single, vectors)
    before = served._onnx.calls
    served.embed_uncached(TEXTS)
    assert served._onnx.calls - before == len(TEXTS)


def test_batching_int8_activations_together_would_move_a_text(minilm: Path) -> None:
    """The reason for one text a pass: with the batch shared, a short text's vector depends on its
    neighbours (the negative control of the test above)."""
    served = TextEmbedder(minilm, cache_size=0, precision="int8")
    assert served._onnx is not None
    alone = served.embed_uncached(["hello"])[0]
    served._onnx.one_text_a_pass = False
    batched = served.embed_uncached(["hello", "hello there, general kenobi"])[0]
    assert not np.allclose(alone, batched, atol=1e-4)


def test_the_check_catches_per_tensor_quantization(minilm: Path, fp32_vectors: np.ndarray[Any, Any]) -> None:
    import onnxruntime as ort

    served = TextEmbedder(minilm, cache_size=0)
    assert served._onnx is not None
    graph = quantized_int8(build_model(minilm, fused=True), per_channel=False)
    served._onnx.session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    assert int8_failures(served.embed(TEXTS), fp32_vectors)


def test_the_int8_graph_quantizes_the_projections_only(minilm: Path) -> None:
    import onnx

    fp32 = model_bytes(minilm)
    int8 = model_bytes(minilm, precision="int8")
    ops = Counter(node.op_type for node in onnx.load_from_string(int8).graph.node)
    assert ops["QAttention"] == 6 and ops["Attention"] == 0  # every layer's Q/K/V projection
    assert ops["DynamicQuantizeMatMul"] + ops["MatMulInteger"] >= 18 and ops["MatMul"] == 0
    assert ops["Gather"] == 1 and ops["SkipLayerNormalization"] == 12  # embeddings and LayerNorms stay fp32
    # The word table (30,522 x 384 floats, 47 MB) stays fp32; the 6 layers' 10.6M weights shrink 4x.
    assert len(int8) < len(fp32) - 25_000_000


def test_int8_needs_the_onnx_runtime() -> None:
    with pytest.raises(ModelUnavailable, match="precision int8"):
        load_text_embedder(EmbedderSettings(precision="int8", runtime="torch"))
    assert Settings.load(None, environ={"VSR_EMBEDDER__PRECISION": "int8"}).embedder.precision == "int8"
    with pytest.raises(SettingsError, match="precision"):
        Settings.load(None, environ={"VSR_EMBEDDER__PRECISION": "int4"})
