"""Every candidate text region is examined: rapidocr's post-processing keeps the first 1,000
contours of the detector's map and drops the rest unseen, so an injection line above a field of
specks was not read at all. Beyond the engine's own bound a read is truncated, never "no text"."""

from __future__ import annotations

from typing import Any

import pytest

from extproc.models.ocr import OcrService, OcrTimeout, OcrTuning, RapidOcrEngine
from extproc.models.ocr_runtime import MAX_TEXT_CANDIDATES
from extproc.testing.ocr_routing import routing_view
from extproc.testing.ocr_scenes import INJECTION_TEXT, as_image, png_bytes, speckled_injection, text_on_white

SEEDS = [0, 1, 2]


@pytest.fixture(scope="module")
def engine() -> RapidOcrEngine:
    engine = RapidOcrEngine(threads=2, tuning=OcrTuning())
    engine.warm_up()
    return engine


def _reads_injection(service: OcrService, seed: int) -> bool:
    text = service.read_pixels(speckled_injection(seed)).text.lower()
    return INJECTION_TEXT[0].lower().split()[-1] in text  # "instructions"


def _rapidocr_post() -> Any:
    """The full pass as rapidocr post-processes it: the first 1,000 contours, the rest dropped."""
    from rapidocr.ch_ppocr_det.utils import DBPostProcess

    capped = DBPostProcess(
        thresh=0.3, box_thresh=0.5, max_candidates=1000, unclip_ratio=1.6, use_dilation=True, score_mode="fast"
    )
    return lambda post, pred, shape: (capped(pred, shape)[0], False)


@pytest.mark.slow
def test_an_injection_above_thousands_of_specks_is_read(engine: RapidOcrEngine) -> None:
    service = OcrService(engine, budget_ms=120_000)
    assert all(_reads_injection(service, seed) for seed in SEEDS)
    assert engine._det_post.max_candidates == MAX_TEXT_CANDIDATES > 1000
    # ...and the image_text signal finds the attack in what was read.
    assert "jailbreak" in routing_view(service.read_pixels(speckled_injection(SEEDS[0]))).image_text


@pytest.mark.slow
def test_the_check_catches_rapidocrs_candidate_cap(engine: RapidOcrEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """With rapidocr's own post-processing the same scenes lose the line (so the test above can fail)."""
    service = OcrService(engine, budget_ms=120_000)
    monkeypatch.setattr(engine, "_text_boxes", _rapidocr_post())
    assert sum(_reads_injection(service, seed) for seed in SEEDS) <= 1


def test_more_regions_than_the_bound_is_a_truncated_read(
    engine: RapidOcrEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = OcrService(engine, budget_ms=120_000)
    page = text_on_white(["first line of the page", "second line here", "third line at last"], 28)
    assert not service.read_pixels(page).truncated
    monkeypatch.setattr(engine._det_post, "max_candidates", 2)  # three lines, two examined
    before = engine.stats.det_overflow
    result = service.read_pixels(page)
    assert result.truncated and result.lines  # what was read counts; the rest is not called empty
    assert engine.stats.det_overflow == before + 1
    monkeypatch.setattr(engine._det_post, "max_candidates", 0)  # nothing examined: no text is not claimed
    with pytest.raises(OcrTimeout, match="candidate text regions"):
        service.read_pixels(page)


def test_the_first_look_never_skips_an_image_it_could_not_examine(monkeypatch: pytest.MonkeyPatch) -> None:
    gated = RapidOcrEngine(threads=2, tuning=OcrTuning.gated())
    gated.warm_up()
    service = OcrService(gated, budget_ms=120_000)
    page = png_bytes(text_on_white(["deploy settings", "key = 1234"], 16))
    pixels = as_image(page).pixels()
    monkeypatch.setattr(gated._gate_post, "max_candidates", 0)
    skipped = gated.stats.gate_skipped
    looks = gated.stats.gate_looks
    service.read_pixels(pixels)
    assert gated.stats.gate_looks == looks + 1 and gated.stats.gate_skipped == skipped
