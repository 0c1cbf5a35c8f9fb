"""Our preprocessing: checkpoint-driven, pixel-identical to transformers' PIL processor."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from extproc.models.preprocess import PreprocessConfig, PreprocessConfigError, Preprocessor, naflex_size, to_rgb
from extproc.tools.parity import ReferencePath


def test_config_comes_from_the_checkpoint(siglip_dir: Path, siglip2_dir: Path) -> None:
    fixed = PreprocessConfig.from_dir(siglip_dir)
    assert (fixed.mode, fixed.height, fixed.width, fixed.resample) == ("fixed", 48, 48, Image.Resampling.BICUBIC)
    assert fixed.mean == (0.5, 0.5, 0.5) and fixed.std == (0.5, 0.5, 0.5)
    naflex = PreprocessConfig.from_dir(siglip2_dir)
    assert (naflex.mode, naflex.patch_size, naflex.max_num_patches) == ("naflex", 8, 64)
    assert naflex.resample == Image.Resampling.BILINEAR  # what this checkpoint's config says


def test_config_size_is_not_hard_coded(tmp_path: Path) -> None:
    raw = {"image_processor_type": "SiglipImageProcessor", "size": {"height": 384, "width": 384}, "resample": 3}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(raw))
    config = PreprocessConfig.from_dir(tmp_path)
    out = Preprocessor(config)(Image.new("RGB", (100, 50), (10, 20, 30)))
    assert out.pixel_values.shape == (3, 384, 384)


def test_missing_or_odd_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PreprocessConfigError, match="no image processor config"):
        PreprocessConfig.from_dir(tmp_path)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"size": {"shortest_edge": 224}}))
    with pytest.raises(PreprocessConfigError, match="height and width"):
        PreprocessConfig.from_dir(tmp_path)


def test_transparency_is_composited_onto_white() -> None:
    rgba = Image.new("RGBA", (4, 4), (255, 0, 0, 0))  # fully transparent red
    assert to_rgb(rgba).getpixel((0, 0)) == (255, 255, 255)
    assert rgba.convert("RGB").getpixel((0, 0)) == (255, 0, 0)  # the naive conversion keeps red
    half = Image.new("RGBA", (1, 1), (0, 0, 0, 128))
    assert to_rgb(half).getpixel((0, 0)) == (127, 127, 127)
    palette = Image.new("P", (2, 1))
    palette.putpalette([0, 0, 0, 0, 255, 0] + [0] * 762)
    palette.putpixel((1, 0), 1)
    palette.info["transparency"] = 0
    assert to_rgb(palette).getpixel((0, 0)) == (255, 255, 255)
    assert to_rgb(palette).getpixel((1, 0)) == (0, 255, 0)


def test_normalisation_maps_bytes_to_minus_one_one(siglip_dir: Path) -> None:
    pre = Preprocessor(PreprocessConfig.from_dir(siglip_dir))
    white = pre(Image.new("RGB", (48, 48), (255, 255, 255))).pixel_values
    black = pre(Image.new("RGB", (48, 48), (0, 0, 0))).pixel_values
    assert np.allclose(white, 1.0) and np.allclose(black, -1.0)


def test_naflex_size_matches_transformers_rule() -> None:
    from transformers.models.siglip2.image_processing_pil_siglip2 import get_image_size_for_max_num_patches

    rng = random.Random(4)
    for _ in range(200):
        h, w = rng.randint(1, 3000), rng.randint(1, 3000)
        patch, budget = rng.choice([8, 14, 16]), rng.choice([64, 256, 576, 1024])
        ours = naflex_size(h, w, patch, budget)
        assert ours == get_image_size_for_max_num_patches(h, w, patch, budget)
        assert ours[0] % patch == 0 and ours[1] % patch == 0
        assert (ours[0] // patch) * (ours[1] // patch) <= budget


@pytest.mark.parametrize(
    "name",
    [
        "chelsea_rgba.png",
        "rocket_cmyk.jpg",
        "coffee_palette_transparent.gif",
        "camera_la.png",
        "astronaut_tiny.png",
        "rocket_strip.png",
    ],
)
def test_pixels_identical_to_reference_processor(any_model_dir: Path, corpus_dir: Path, name: str) -> None:
    ref = ReferencePath(any_model_dir)
    ours = Preprocessor(PreprocessConfig.from_dir(any_model_dir))(ReferencePath.open(corpus_dir / name))
    theirs = ref.inputs(ReferencePath.open(corpus_dir / name))
    assert np.array_equal(ours.pixel_values, theirs["pixel_values"][0].numpy())
    if ours.spatial_shape is not None:
        assert ours.spatial_shape == tuple(int(v) for v in theirs["spatial_shapes"][0])
        assert np.array_equal(ours.attention_mask, theirs["pixel_attention_mask"][0].numpy())


def test_resize_filter_shows_in_the_pixels(siglip_dir: Path, corpus_dir: Path) -> None:
    config = PreprocessConfig.from_dir(siglip_dir)
    image = ReferencePath.open(corpus_dir / "astronaut.jpg")
    bicubic = Preprocessor(config)(image).pixel_values
    bilinear = Preprocessor(config.with_drift(resample=int(Image.Resampling.BILINEAR)))(image).pixel_values
    assert np.abs(bicubic - bilinear).max() > 0.05


def test_exif_orientation_is_applied(siglip2_dir: Path, corpus_dir: Path) -> None:
    pre = Preprocessor(PreprocessConfig.from_dir(siglip2_dir))
    with Image.open(corpus_dir / "grace_hopper_exif6.jpg") as stored:
        assert stored.size == (600, 512)  # stored sideways
        rotated = pre(stored)
    with Image.open(corpus_dir / "grace_hopper.jpg") as upright_file:
        upright = pre(upright_file)
    assert rotated.spatial_shape == upright.spatial_shape
    n = int(upright.attention_mask.sum()) if upright.attention_mask is not None else 0
    assert np.abs(rotated.pixel_values[:n] - upright.pixel_values[:n]).mean() < 0.05
