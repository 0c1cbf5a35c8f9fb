"""Loading SigLIP / SigLIP2 checkpoints through the real loading code; loud failures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from extproc.models.lru import LruCache
from extproc.models.siglip import CheckpointError, VisionEncoder, inspect_checkpoint
from extproc.testing.tiny_siglip import drop_weights


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_loads_both_families(any_model_dir: Path, corpus_dir: Path) -> None:
    from PIL import Image

    encoder = VisionEncoder.load(any_model_dir, precision="fp32")
    assert encoder.model_type in ("siglip", "siglip2")
    assert encoder.logit_scale == pytest.approx(10.0) and encoder.logit_bias == pytest.approx(-2.0)
    with Image.open(corpus_dir / "rocket.jpg") as img:
        vectors = encoder.embed_images([img, img])
    assert vectors.shape == (2, encoder.embed_dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[0], vectors[1])


def test_bf16_stays_close_to_fp32(any_model_dir: Path, corpus_dir: Path) -> None:
    from PIL import Image

    fp32 = VisionEncoder.load(any_model_dir, precision="fp32")
    bf16 = VisionEncoder.load(any_model_dir, precision="bf16")
    with Image.open(corpus_dir / "coffee.jpg") as img:
        a, b = fp32.embed_images([img])[0], bf16.embed_images([img])[0]
    assert float(a @ b) >= 0.999
    assert next(bf16.model.vision_model.parameters()).dtype.is_floating_point
    assert str(next(bf16.model.vision_model.parameters()).dtype) == "torch.bfloat16"
    assert str(next(bf16.model.text_model.parameters()).dtype) == "torch.float32"


def test_text_embeddings_are_cached_per_prompt(siglip_dir: Path) -> None:
    encoder = VisionEncoder.load(siglip_dir, precision="fp32")
    first = encoder.embed_texts(["a photo of a passport", "a chest x-ray"])
    assert encoder.text_cache_size == 2
    again = encoder.embed_texts(["a chest x-ray", "a photo of a car"])
    assert encoder.text_cache_size == 3
    assert np.array_equal(first[1], again[0])
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert float(first[0] @ first[1]) < 0.999  # different prompts, different embeddings


def test_the_text_cache_is_bounded_and_repeats_are_computed_once(siglip_dir: Path) -> None:
    encoder = VisionEncoder.load(siglip_dir, precision="fp32")
    encoder.text_cache = LruCache(2)
    prompts = ["a photo of a passport", "a chest x-ray", "a photo of a car", "a chest x-ray"]
    rows = encoder.embed_texts(prompts)
    assert rows.shape == (4, encoder.embed_dim) and rows.dtype == np.float32
    assert np.array_equal(rows[1], rows[3])  # the repeat is the same row
    assert encoder.text_cache_size == 2  # bounded: the oldest prompt left
    assert np.allclose(encoder.embed_texts(["a photo of a passport"])[0], rows[0], atol=1e-6)  # computed again, same


def test_missing_pooling_head_fails_loudly(siglip_dir: Path, tmp_path: Path) -> None:
    broken = _copy(siglip_dir, tmp_path / "nohead")
    dropped = drop_weights(broken, "vision_model.head.")
    assert "vision_model.head.probe" in dropped
    with pytest.raises(CheckpointError, match="pooling head"):
        VisionEncoder.load(broken)


def test_missing_pooling_head_fails_loudly_siglip2(siglip2_dir: Path, tmp_path: Path) -> None:
    broken = _copy(siglip2_dir, tmp_path / "nohead2")
    drop_weights(broken, "vision_model.head.attention.")
    with pytest.raises(CheckpointError, match="pooling head"):
        inspect_checkpoint(broken)


def test_other_missing_weights_fail_loudly(siglip_dir: Path, tmp_path: Path) -> None:
    broken = _copy(siglip_dir, tmp_path / "noln")
    drop_weights(broken, "vision_model.post_layernorm.")
    with pytest.raises(CheckpointError, match="post_layernorm"):
        VisionEncoder.load(broken)


@pytest.mark.parametrize(
    ("remove", "message"),
    [
        ("config.json", "no config.json"),
        ("model.safetensors", "no weights"),
        ("preprocessor_config.json", "no image processor config"),
        ("spiece.model", "no tokenizer"),
    ],
)
def test_incomplete_checkpoint_is_refused(siglip_dir: Path, tmp_path: Path, remove: str, message: str) -> None:
    broken = _copy(siglip_dir, tmp_path / "broken")
    (broken / remove).unlink()
    with pytest.raises(CheckpointError, match=message):
        VisionEncoder.load(broken)


def test_no_head_config_and_missing_calibration_are_refused(siglip_dir: Path, tmp_path: Path) -> None:
    nohead = _copy(siglip_dir, tmp_path / "cfg")
    config = json.loads((nohead / "config.json").read_text())
    config["vision_config"]["vision_use_head"] = False
    (nohead / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="vision_use_head"):
        inspect_checkpoint(nohead)
    nobias = _copy(siglip_dir, tmp_path / "bias")
    drop_weights(nobias, "logit_bias")
    with pytest.raises(CheckpointError, match="logit_bias"):
        inspect_checkpoint(nobias)
    with pytest.raises(CheckpointError, match="does not exist"):
        inspect_checkpoint(tmp_path / "nowhere")


