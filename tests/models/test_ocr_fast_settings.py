"""The fast OCR defaults against the first wave's settings: same routing-relevant results, skipped work, validation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from extproc.detectors.mrz import find_mrz
from extproc.models.ocr import (
    OcrResult,
    OcrService,
    OcrTuning,
    RapidOcrEngine,
    openvino_available,
    tuning_from_settings,
)
from extproc.settings import Settings, SettingsError
from extproc.signals.document import DocumentSpec, classify
from extproc.signals.image_text import ImageTextSignal, ImageTextSpec
from extproc.testing.ocr_scenes import AWS_KEY, as_image, font

SCENES = ["passport", "passport_degraded", "passport_tampered", "code", "form", "injection", "landscape", "car"]

# What the existing scene tests expect, for both settings (so "both equally wrong" cannot pass).
EXPECTED: dict[str, dict[str, object]] = {
    "passport": {"mrz": "valid", "document": {"identity_document"}},
    "passport_degraded": {"mrz": "valid", "document": {"identity_document"}},
    "passport_tampered": {"mrz": "invalid", "document": {"identity_document"}},
    "code": {"secrets": {"aws_access_key"}, "code": True, "document": {"code"}},
    "form": {"document": {"form"}},
    "injection": {"jailbreak": True, "document": set()},
    "landscape": {"document": {"photo"}},
    "car": {"document": {"photo"}},
}


@pytest.fixture(scope="module")
def fast_engine(ocr_service: OcrService) -> RapidOcrEngine:
    """The session's service engine: built by load_ocr_service from settings, so it has the defaults."""
    engine = ocr_service.engine
    assert isinstance(engine, RapidOcrEngine)
    assert engine.tuning == OcrTuning()
    return engine


@pytest.fixture(scope="module")
def legacy_engine() -> RapidOcrEngine:
    engine = RapidOcrEngine(threads=2, tuning=OcrTuning.legacy())
    engine.warm_up()
    return engine


@pytest.fixture(scope="module")
def legacy_service(legacy_engine: RapidOcrEngine) -> OcrService:
    return OcrService(legacy_engine, budget_ms=60000)


def routing_view(result: OcrResult) -> dict[str, object]:
    """The parts of one image's OCR that routing reads: MRZ validity, secret kinds, the signals' labels."""
    image_text = ImageTextSignal(ImageTextSpec(name="image_text", type="image_text"), None, "test")
    labels, _ = image_text.scan(result.text, result.layout_text())
    scores = classify(result)
    doc_min = DocumentSpec(name="document", type="document").min_score
    mrz = find_mrz(result.text)
    return {
        "mrz": "valid" if any(m.valid for m in mrz) else ("invalid" if mrz else None),
        "secrets": {k.split(":", 1)[1] for k in labels if k.startswith("secrets:")},
        "code": "code" in labels,
        "jailbreak": "jailbreak" in labels,
        "image_text_labels": set(labels),
        "document_labels": {k for k, v in scores.items() if v >= doc_min},
    }


@pytest.mark.slow
@pytest.mark.parametrize("scene", SCENES)
def test_fast_defaults_route_like_the_first_wave(
    scene: str, ocr_service: OcrService, legacy_service: OcrService, scene_bytes: dict[str, bytes]
) -> None:
    new = routing_view(ocr_service.read_sync(as_image(scene_bytes[scene])))
    old = routing_view(legacy_service.read_sync(as_image(scene_bytes[scene])))
    assert new == old
    expected = EXPECTED[scene]
    assert new["mrz"] == expected.get("mrz")
    assert new["secrets"] == expected.get("secrets", set())
    assert new["code"] == expected.get("code", False)
    assert new["jailbreak"] == expected.get("jailbreak", False)
    assert new["document_labels"] == expected["document"]


@pytest.mark.slow
def test_fast_defaults_read_the_key_and_indentation(ocr_service: OcrService, scene_bytes: dict[str, bytes]) -> None:
    code = ocr_service.read_sync(as_image(scene_bytes["code"]))
    assert AWS_KEY in code.text.replace(" ", "")
    assert any(line.startswith("    ") for line in code.layout_text().splitlines())


def _blank(size: tuple[int, int] = (640, 480)) -> Image.Image:
    return Image.new("RGB", size, (250, 250, 246))


def _words(text: str = "SKIP NOTHING 42") -> Image.Image:
    img = Image.new("RGB", (640, 160), "white")
    ImageDraw.Draw(img).text((30, 50), text, font=font(44, bold=True), fill="black")
    return img


@pytest.mark.parametrize("which", ["fast", "legacy"])
def test_recognition_is_skipped_when_detection_finds_nothing(
    which: str, fast_engine: RapidOcrEngine, legacy_engine: RapidOcrEngine
) -> None:
    engine = fast_engine if which == "fast" else legacy_engine

    def counters() -> tuple[int, int, int, int]:
        s = engine.stats  # "found nothing": the full detection's, or the first look's (fast only)
        return s.images, s.det_empty + s.gate_skipped, s.rec_calls, s.lines_read

    before = counters()
    boxes, truncated = engine.recognize(_blank())
    assert boxes == [] and not truncated
    assert counters() == (before[0] + 1, before[1] + 1, before[2], before[3])  # found nothing, no recognition

    boxes, _ = engine.recognize(_words())
    assert "NOTHING" in " ".join(b.text for b in boxes).upper()
    assert counters()[1] == before[1] + 1
    assert counters()[2] > before[2] and counters()[3] > before[3]


@pytest.mark.parametrize(("size", "mono"), [(9, False), (9, True), (12, False)])
def test_small_text_in_a_small_image_is_still_read(size: int, mono: bool, fast_engine: RapidOcrEngine) -> None:
    """The first wave scaled a small image's short side up to 736; the defaults scale by at most 1.25x."""
    img = Image.new("RGB", (size * 16, size * 4), "white")
    ImageDraw.Draw(img).text((4, size), f"{AWS_KEY} key", font=font(size, mono=mono), fill="black")
    boxes, _ = fast_engine.recognize(img)
    assert AWS_KEY in "".join(b.text for b in boxes).replace(" ", "")


def test_an_expired_deadline_reads_no_line_and_says_so(fast_engine: RapidOcrEngine) -> None:
    skipped = fast_engine.stats.lines_skipped
    boxes, truncated = fast_engine.recognize(_words(), deadline=time.monotonic() - 1)
    assert boxes == [] and truncated
    assert fast_engine.stats.lines_skipped > skipped


def test_the_runtime_follows_what_is_installed(fast_engine: RapidOcrEngine) -> None:
    assert fast_engine.runtime == ("openvino" if openvino_available() else "onnxruntime")
    assert fast_engine.name == f"rapidocr-fast/{fast_engine.runtime}"


def test_onnxruntime_fast_pipeline_reads_like_the_default(fast_engine: RapidOcrEngine) -> None:
    ort = RapidOcrEngine(threads=1, tuning=OcrTuning(runtime="onnxruntime", rec_warm_width=0))
    ort.warm_up()
    assert ort.runtime == "onnxruntime"
    text = " ".join(b.text for b in ort.recognize(_words("ROUTE 66 NORTH"))[0])
    assert text.replace(" ", "") == "ROUTE66NORTH"


def test_legacy_tuning_is_the_first_wave() -> None:
    legacy = OcrTuning.legacy()
    assert (legacy.pipeline, legacy.runtime, legacy.det_limit_type, legacy.det_limit_side_len) == (
        "rapidocr", "onnxruntime", "min", 736,
    )  # fmt: skip
    assert (legacy.rec_batch, legacy.mem_arena, legacy.det_max_upscale, legacy.gate_scale) == (6, False, None, 0)
    assert OcrTuning() != legacy
    assert "rapidocr pipeline" in legacy.describe() and "fast pipeline" in OcrTuning().describe()


def test_settings_choose_the_tuning() -> None:
    ocr = Settings.load(None, environ={}).ocr
    assert tuning_from_settings(ocr) == OcrTuning()
    assert tuning_from_settings(ocr.model_copy(update={"preset": "legacy"})) == OcrTuning.legacy()
    assert tuning_from_settings(ocr.model_copy(update={"runtime": "onnxruntime"})).runtime == "onnxruntime"
    assert tuning_from_settings(ocr).gate_scale == 0  # the first look is opt-in
    assert tuning_from_settings(ocr.model_copy(update={"text_gate": True})) == OcrTuning.gated()
    assert Settings.load(None, environ={"VSR_OCR__TEXT_GATE": "true"}).ocr.text_gate is True
    # The arena bound: 1.0 (2**20 pixels) is the default; a host with memory to spare raises it.
    assert tuning_from_settings(ocr).det_arena_keep_px == 1024 * 1024
    raised = Settings.load(None, environ={"VSR_OCR__DET_ARENA_KEEP_MP": "2.5"}).ocr
    assert tuning_from_settings(raised).det_arena_keep_px == round(2.5 * 1024 * 1024)
    with pytest.raises(SettingsError, match=r"ocr\.det_arena_keep_mp \(VSR_OCR__DET_ARENA_KEEP_MP\)"):
        Settings.load(None, environ={"VSR_OCR__DET_ARENA_KEEP_MP": "-1"})
    # Warm-up widths: 1600 (every width a line is read at) unless the settings lower it; 0 warms none.
    assert tuning_from_settings(ocr).rec_warm_width == 1600
    cold = Settings.load(None, environ={"VSR_OCR__WARM_WIDTH": "0"}).ocr
    assert tuning_from_settings(cold).rec_warm_width == 0
    with pytest.raises(SettingsError, match=r"ocr\.warm_width \(VSR_OCR__WARM_WIDTH\)"):
        Settings.load(None, environ={"VSR_OCR__WARM_WIDTH": "5000"})
    # Unknown values are refused by the settings themselves, with the field and its variable named.
    with pytest.raises(SettingsError, match=r"ocr\.preset \(VSR_OCR__PRESET\)"):
        Settings.load(None, environ={"VSR_OCR__PRESET": "turbo"})
    with pytest.raises(SettingsError, match=r"ocr\.runtime \(VSR_OCR__RUNTIME\)"):
        Settings.load(None, environ={"VSR_OCR__RUNTIME": "tensorrt"})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("pipeline", "paddle", "pipeline must be 'fast' or 'rapidocr'"),
        ("runtime", "tensorrt", "runtime must be 'auto', 'onnxruntime' or 'openvino'"),
        ("det_limit_type", "mid", "det_limit_type must be 'min' or 'max'"),
        ("det_limit_side_len", 16, "det_limit_side_len must be an integer in [32, 4096]"),
        ("det_limit_side_len", 736.0, "det_limit_side_len must be an integer"),
        ("det_max_upscale", 0.5, "det_max_upscale must be None or a number in [1, 8]"),
        ("det_max_upscale", True, "det_max_upscale must be None or a number"),
        ("rec_batch", 0, "rec_batch must be an integer in [1, 64]"),
        ("rec_batch", True, "rec_batch must be an integer"),
        ("rec_min_width", 20, "rec_min_width must be an integer in [48, 2048]"),
        ("rec_width_step", 0, "rec_width_step must be an integer in [1, 256]"),
        ("rec_warm_width", -1, "rec_warm_width must be an integer in [0, 4096]"),
        ("mem_arena", "yes", "mem_arena must be a bool"),
        ("det_arena_keep_px", -1, "det_arena_keep_px must be an integer >= 0"),
        ("det_arena_keep_px", 1.5, "det_arena_keep_px must be an integer"),
        ("det_precision", "int4", "det_precision must be 'fp32' or 'int8'"),
        ("ov_precision", "int8", "ov_precision must be 'auto', 'f32' or 'bf16'"),
        ("gate_scale", 0.05, "gate_scale must be 0 \\(off\\) or a number in [0.1, 0.7]"),
        ("gate_scale", True, "gate_scale must be 0"),
        ("gate_min_side", 10, "gate_min_side must be an integer in [64, 2048]"),
        ("gate_probe_lines", -1, "gate_probe_lines must be an integer in [0, 64]"),
    ],
)
def test_bad_tuning_values_are_refused_clearly(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match="invalid OCR tuning: .*" + message.replace("[", r"\[").replace("]", r"\]")):
        OcrTuning(**{field: value})  # type: ignore[arg-type]


def test_contradictory_tuning_is_refused() -> None:
    with pytest.raises(ValueError, match="runtime 'openvino' needs pipeline 'fast'"):
        OcrTuning(pipeline="rapidocr", runtime="openvino", det_max_upscale=None, gate_scale=0)
    with pytest.raises(ValueError, match="det_max_upscale needs pipeline 'fast'"):
        OcrTuning(pipeline="rapidocr", runtime="onnxruntime", gate_scale=0)
    with pytest.raises(ValueError, match="gate_scale needs pipeline 'fast'"):
        OcrTuning(pipeline="rapidocr", runtime="onnxruntime", det_max_upscale=None, gate_scale=0.4)
    with pytest.raises(ValueError) as info:
        OcrTuning(rec_batch=0, rec_min_width=1)
    assert "rec_batch" in str(info.value) and "rec_min_width" in str(info.value)  # every problem at once


def test_bad_engine_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="min_score must be within"):
        RapidOcrEngine(min_score=1.5)
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        RapidOcrEngine(threads=0)
    with pytest.raises(ValueError, match="rec_batch must be"):
        RapidOcrEngine(rec_batch=0)


def test_only_detections_above_the_bound_give_the_arena_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ort_model` runs an input of more than `shrink_above` values with onnxruntime's arena
    shrinkage on, anything smaller (and everything with the arena off) without it."""
    import numpy as np
    import onnxruntime as ort

    from extproc.models import ocr_runtime

    seen: list[str | None] = []

    class FakeSession:
        def __init__(self, *_args: object, **_kwargs: object) -> None: ...

        def get_inputs(self) -> list[object]:
            return [type("Arg", (), {"name": "x"})()]

        def get_outputs(self) -> list[object]:
            return [type("Arg", (), {"name": "y"})()]

        def get_modelmeta(self) -> object:
            return type("Meta", (), {"custom_metadata_map": {}})()

        def run(self, _names: list[str], feed: dict[str, object], options: ort.RunOptions) -> list[object]:
            try:
                seen.append(options.get_run_config_entry("memory.enable_memory_arena_shrinkage"))
            except RuntimeError:  # onnxruntime raises for an entry never set
                seen.append(None)
            return [feed["x"]]

    monkeypatch.setattr(ort, "InferenceSession", FakeSession)
    run, _ = ocr_runtime.ort_model(Path("unused.onnx"), 1, True, shrink_above=3 * 100)
    run(np.zeros((1, 3, 10, 10), np.float32))  # 300 values: at the bound, kept
    run(np.zeros((1, 3, 10, 11), np.float32))  # 330: given back
    off, _ = ocr_runtime.ort_model(Path("unused.onnx"), 1, False, shrink_above=3 * 100)
    off(np.zeros((1, 3, 10, 11), np.float32))  # no arena, nothing to give back
    assert seen == [None, "cpu:0", None]
