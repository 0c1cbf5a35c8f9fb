"""The int8 detector (`ocr.det_precision: int8`, the default): faster detection, no routing label changed.

The reference is full OCR with the wheel's own fp32 detector; the candidate is the default
engine (the session's OCR service), which detects through the shipped int8 copy.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

import extproc.models.ocr_runtime as ocr_runtime
from extproc.models.ocr import OcrService, OcrTuning, RapidOcrEngine, tuning_from_settings
from extproc.settings import Settings
from extproc.testing.ocr_routing import corpus_images, label_changes, routing_view, scene_images
from extproc.testing.ocr_scenes import as_image, captioned_photo


@pytest.fixture(scope="module")
def fp32() -> OcrService:
    engine = RapidOcrEngine(threads=2, tuning=OcrTuning(det_precision="fp32"))
    engine.warm_up()
    assert engine.det_precision == "fp32"
    return OcrService(engine, budget_ms=120_000)


@pytest.fixture(scope="module")
def int8(ocr_service: OcrService) -> OcrService:
    engine = ocr_service.engine
    assert isinstance(engine, RapidOcrEngine) and engine.tuning == OcrTuning()
    return OcrService(engine, max_side=ocr_service.max_side, budget_ms=120_000)


def test_the_default_detects_in_int8_and_settings_can_turn_it_off(int8: OcrService) -> None:
    assert isinstance(int8.engine, RapidOcrEngine) and int8.engine.det_precision == "int8"
    ocr = Settings.load(None, environ={}).ocr
    assert tuning_from_settings(ocr).det_precision == "int8"
    off = Settings.load(None, environ={"VSR_OCR__DET_PRECISION": "fp32"}).ocr
    assert tuning_from_settings(off).det_precision == "fp32"
    assert OcrTuning.legacy().det_precision == "fp32"


@pytest.mark.slow
def test_int8_detection_changes_no_routing_label_on_the_corpus(int8: OcrService, fp32: OcrService) -> None:
    images = corpus_images()
    assert len(images) == 32
    assert label_changes(int8, fp32, images) == []
    assert routing_view(int8.read_pixels(as_image(images["passport"]).pixels())).mrz == "valid"
    assert routing_view(int8.read_pixels(as_image(images["passport_tampered"]).pixels())).mrz == "invalid"
    assert routing_view(int8.read_pixels(as_image(images["code"]).pixels())).secrets == {"aws_access_key"}


# Small, rotated and pale captions (height px, contrast, angle, canvas) that fp32 detection reads.
CAPTIONS = [
    (18, 1.0, 20.0, (1600, 1200)),
    (12, 1.0, 0.0, (900, 600)),
    (14, 1.0, 15.0, (900, 600)),
    (16, 1.0, 30.0, (640, 480)),
    (24, 0.4, 0.0, (1600, 1200)),
    (18, 0.3, 0.0, (900, 600)),
    (14, 0.5, 0.0, (900, 600)),
]


@pytest.mark.slow
def test_small_rotated_and_pale_text_fp32_reads_int8_reads(int8: OcrService, fp32: OcrService) -> None:
    read_by_fp32 = 0
    for height, contrast, angle, size in CAPTIONS:
        img = captioned_photo(height, contrast=contrast, angle=angle, size=size)
        if "4471" in fp32.read_pixels(img).text.replace(" ", ""):
            read_by_fp32 += 1
            assert "4471" in int8.read_pixels(img).text.replace(" ", ""), (height, contrast, angle, size)
    assert read_by_fp32 >= 5  # the cases exercise text fp32 does read


def test_the_check_catches_a_detector_that_finds_nothing(
    int8: OcrService, fp32: OcrService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken int8 detector (an empty probability map) must fail the label check on every text scene."""
    engine = int8.engine
    assert isinstance(engine, RapidOcrEngine)
    monkeypatch.setattr(engine, "_det", lambda x: np.zeros((x.shape[0], 1, x.shape[2], x.shape[3]), np.float32))
    changed = {c.image for c in label_changes(int8, fp32, scene_images())}
    assert {"passport", "passport_degraded", "passport_tampered", "code", "form", "injection"} <= changed


def _copy_detector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / ocr_runtime.INT8_DETECTOR.name
    shutil.copy(ocr_runtime.INT8_DETECTOR, copy)
    shutil.copy(ocr_runtime.INT8_DETECTOR.with_suffix(".json"), copy.with_suffix(".json"))
    monkeypatch.setattr(ocr_runtime, "INT8_DETECTOR", copy)
    return copy


def test_an_int8_detector_made_from_another_model_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    source, _ = ocr_runtime.rapidocr_model_files()
    copy = _copy_detector(tmp_path, monkeypatch)
    assert ocr_runtime.int8_detector(source) == copy
    meta_path = copy.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps(meta | {"source_sha256": "0" * 64}))
    with caplog.at_level(logging.WARNING):
        assert ocr_runtime.int8_detector(source) is None
    assert "made from another detector" in caplog.text
    engine = RapidOcrEngine(threads=1)  # falls back to the wheel's fp32 detector, and still reads
    assert engine.det_precision == "fp32"


def test_a_damaged_or_missing_int8_detector_falls_back_to_fp32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    source, _ = ocr_runtime.rapidocr_model_files()
    copy = _copy_detector(tmp_path, monkeypatch)
    copy.write_bytes(copy.read_bytes()[:-10])  # truncated: its hash no longer matches
    assert ocr_runtime.int8_detector(source) is None
    copy.with_suffix(".json").unlink()
    with caplog.at_level(logging.WARNING):
        assert ocr_runtime.int8_detector(source) is None
    assert "unavailable" in caplog.text


@pytest.mark.slow
def test_the_quantize_tool_remakes_a_detector_that_routes_alike(tmp_path: Path, fp32: OcrService) -> None:
    pytest.importorskip("onnx")  # in the test extra; the router itself never needs it
    from extproc.testing.quantize_ocr import main

    assert main(["--out", str(tmp_path)]) == 0
    made = tmp_path / ocr_runtime.INT8_DETECTOR.name
    record = json.loads(made.with_suffix(".json").read_text())
    shipped = json.loads(ocr_runtime.INT8_DETECTOR.with_suffix(".json").read_text())
    assert record["source_sha256"] == shipped["source_sha256"]
    engine = RapidOcrEngine(threads=2)
    engine._det, _ = ocr_runtime.ort_model(made, 2, True)  # the remade file, in the default engine
    assert label_changes(OcrService(engine, budget_ms=120_000), fp32, scene_images()) == []
