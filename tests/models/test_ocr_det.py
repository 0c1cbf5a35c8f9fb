"""The detector's edges (`extproc/models/ocr_det.py`) give exactly what rapidocr's own steps give.

`det_tensor` against rapidocr's `x / 127.5 - 1.0`, bit for bit; `text_boxes` against
DBPostProcess's `boxes_from_bitmap` + `filter_det_res` on real detector maps, among them maps
with thousands of specks, which the speck filter drops before the per-region work.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from PIL import Image

from extproc.models.ocr import OcrTuning, RapidOcrEngine
from extproc.models.ocr_det import det_tensor, is_speck, text_boxes
from extproc.testing.ocr_reference import rapidocr_det_tensor, rapidocr_text_boxes
from extproc.testing.ocr_routing import CORPUS_DIR
from extproc.testing.ocr_scenes import captioned_photo, passport_page, speckled_injection


def _bgr(img: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(img.convert("RGB"))[:, :, ::-1])


def _specks(post: Any, pred: np.ndarray) -> int:
    """Regions of the map small enough for the speck filter to drop unexamined."""
    import cv2

    mask = cv2.dilate((pred[0, 0] > post.thresh).astype(np.uint8), post.dilation_kernel)
    contours, _ = cv2.findContours(mask * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    return sum(is_speck(w, h, post.min_size) for _, _, w, h in map(cv2.boundingRect, contours))


@pytest.fixture(scope="module")
def engine() -> RapidOcrEngine:
    engine = RapidOcrEngine(threads=2, tuning=OcrTuning())
    engine.warm_up()
    return engine


IMAGES = {
    "retina": lambda: Image.open(CORPUS_DIR / "retina.jpg"),
    "cell": lambda: Image.open(CORPUS_DIR / "cell.png"),
    "speckled injection": lambda: speckled_injection(0),
    "passport": passport_page,
    "pale caption": lambda: captioned_photo(24, contrast=0.4, size=(1200, 900)),
}


@pytest.mark.parametrize("size", [(32, 64), (736, 1120), (1408, 1408)])
def test_the_tensor_is_rapidocrs_bit_for_bit(size: tuple[int, int]) -> None:
    rng = np.random.default_rng(len(size) + size[0])
    img = rng.integers(0, 256, size=(901, 1333, 3), dtype=np.uint8)
    img[:10] = 0  # both ends of the table
    img[-10:] = 255
    got = det_tensor(img, *size)
    want = rapidocr_det_tensor(img, *size)
    assert got.dtype == np.float32 and got.flags.c_contiguous and got.shape == (1, 3, *size)
    assert np.array_equal(got, want)


def test_the_tensor_check_can_fail() -> None:
    img = np.full((64, 64, 3), 200, dtype=np.uint8)
    # rapidocr's detector normalises with mean and std 0.5; ImageNet's would be a different tensor.
    imagenet = (img.astype(np.float32) / 255.0 - 0.485) / 0.229
    assert not np.array_equal(det_tensor(img, 64, 64)[0, 0], imagenet[:, :, 0])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(IMAGES))
def test_boxes_are_rapidocrs_on_real_maps(name: str, engine: RapidOcrEngine) -> None:
    img = _bgr(IMAGES[name]())
    x = engine._det_input(img)
    assert x is not None
    pred = engine._det(x)
    for post in (engine._det_post, engine._gate_post):
        found, overflow = text_boxes(post, pred, img.shape[:2])
        want, _ = rapidocr_text_boxes(post, pred, img.shape[:2])
        assert not overflow
        assert np.array_equal(np.asarray(found), want), (name, post.thresh)


@pytest.mark.slow
def test_the_maps_exercise_the_speck_filter(engine: RapidOcrEngine) -> None:
    """Not vacuous: the fundus photo's map holds thousands of specks, and real boxes besides."""
    img = _bgr(IMAGES["retina"]())
    x = engine._det_input(img)
    assert x is not None
    pred = engine._det(x)
    assert _specks(engine._det_post, pred) > 1000
    found, _ = text_boxes(engine._det_post, pred, img.shape[:2])
    passport = _bgr(passport_page())
    x = engine._det_input(passport)
    assert x is not None and len(text_boxes(engine._det_post, engine._det(x), passport.shape[:2])[0]) >= 10
    assert len(found) <= 2  # the fundus reads as one region at most


def test_a_filter_that_drops_real_regions_is_caught(engine: RapidOcrEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison fails when the speck bound drops regions DBPostProcess keeps."""
    from extproc.models import ocr_det

    img = _bgr(passport_page())
    x = engine._det_input(img)
    assert x is not None
    pred = engine._det(x)
    want, _ = rapidocr_text_boxes(engine._det_post, pred, img.shape[:2])
    monkeypatch.setattr(ocr_det, "is_speck", lambda w, h, min_size: w * h < 40 * min_size**2)
    found, _ = text_boxes(engine._det_post, pred, img.shape[:2])
    assert 0 < len(np.asarray(found)) < len(want)


def test_the_speck_bound_is_tight() -> None:
    """A 3 x 3 region (2 x 2 extents: short side 2) is a speck; a 4 x 4 one (short side 3) is not;
    a thin diagonal 40 x 40 region has a short side near 0 yet a large box, so it is examined."""
    assert is_speck(3, 3, 3) and is_speck(1, 40, 3) and is_speck(40, 1, 3)
    assert not is_speck(4, 4, 3) and not is_speck(40, 40, 3) and not is_speck(2, 10, 3)
