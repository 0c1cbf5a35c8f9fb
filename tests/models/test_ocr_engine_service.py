"""The OCR service: real rapidocr on rendered scenes, cache by sha256, downscaling, time budget."""

from __future__ import annotations

import io
import time

import pytest
from PIL import Image

from extproc.models.executor import HeavyExecutor
from extproc.models.ocr import OcrBox, OcrService, OcrTimeout, assemble_lines, prepare_image
from extproc.testing.ocr_scenes import AWS_KEY, as_image, valid_mrz


def test_reads_passport_mrz_and_code_key(ocr_service: OcrService, scene_bytes: dict[str, bytes]) -> None:
    passport = ocr_service.read_sync(as_image(scene_bytes["passport"]))
    l1, l2 = valid_mrz()
    flat = passport.text.replace(" ", "").replace("0", "O")
    assert l2.replace("0", "O") in flat and l1.replace("0", "O") in flat
    code = ocr_service.read_sync(as_image(scene_bytes["code"]))
    assert AWS_KEY in code.text.replace(" ", "")
    # Rows keep their left offsets: indented code lines come out indented.
    assert any(line.startswith("    ") for line in code.layout_text().splitlines())


async def test_cache_by_hash_skips_ocr(
    ocr_service: OcrService, heavy: HeavyExecutor, scene_bytes: dict[str, bytes]
) -> None:
    first = await ocr_service.read(as_image(scene_bytes["injection"]), heavy)
    misses = ocr_service.misses
    start = time.perf_counter()
    again = await ocr_service.read(as_image(scene_bytes["injection"]), heavy)  # a new object, same bytes
    assert (time.perf_counter() - start) < 0.01
    assert again is first and ocr_service.misses == misses


def test_huge_images_are_downscaled_and_boxes_mapped_back(ocr_service: OcrService) -> None:
    big = Image.new("RGB", (4800, 1200), "white")
    from PIL import ImageDraw

    from extproc.testing.ocr_scenes import font

    ImageDraw.Draw(big).text((200, 400), "DOWNSCALED TEXT 42", font=font(220, bold=True), fill="black")
    prepared, scale = prepare_image(big, ocr_service.max_side)
    assert max(prepared.size) == ocr_service.max_side and scale < 1
    result = ocr_service.read_pixels(big)
    assert "DOWNSCALED" in result.text.replace(" ", "").upper()
    x0, y0, _, _ = result.lines[0].box
    assert 150 < x0 < 400 and 300 < y0 < 700  # in the original image's pixels
    assert (result.width, result.height) == (4800, 1200)


def test_transparent_png_is_composited_on_white() -> None:
    rgba = Image.new("RGBA", (40, 20), (0, 0, 0, 0))
    out, _ = prepare_image(rgba, 1600)
    assert out.mode == "RGB" and out.getpixel((5, 5)) == (255, 255, 255)


class _SlowEngine:
    name = "slow"

    def recognize(self, image: Image.Image, deadline: float | None = None) -> tuple[list[OcrBox], bool]:
        time.sleep(0.05)
        if deadline is not None and time.monotonic() >= deadline:
            return [], True
        return [OcrBox("late", (0, 0, 10, 10), 0.9)], False


def test_time_budget_is_enforced_and_truncated_results_not_cached() -> None:
    service = OcrService(_SlowEngine(), budget_ms=10)
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(buf, format="PNG")
    image = as_image(buf.getvalue())
    with pytest.raises(OcrTimeout):
        service.read_sync(image)
    assert service.cached(image.sha256) is None
    relaxed = OcrService(_SlowEngine(), budget_ms=5000)
    assert relaxed.read_sync(image).text == "late"
    assert relaxed.cached(image.sha256) is not None


def test_corrupt_image_errors_propagate(ocr_service: OcrService, scene_bytes: dict[str, bytes]) -> None:
    from extproc.errors import UnprocessableRequest

    image = as_image(scene_bytes["passport"][:3000])  # header intact, pixels truncated
    with pytest.raises(UnprocessableRequest):
        ocr_service.read_sync(image)


def test_rows_are_assembled_left_to_right() -> None:
    boxes = [OcrBox("world", (120, 10, 200, 30), 0.9), OcrBox("hello", (10, 12, 100, 31), 0.9),
             OcrBox("next", (10, 50, 80, 70), 0.9)]  # fmt: skip
    lines = assemble_lines(boxes)
    assert [ln.text for ln in lines] == ["hello world", "next"]


def test_noisy_scenes_are_the_same_whatever_drew_random_numbers_first() -> None:
    """Their noise is seeded: Pillow's own noise (the C library's rand()) made the degraded
    passport differ between full test runs, and its OCR with it; the photos are also the int8
    detector's calibration inputs, which must not depend on what ran before the quantize tool."""
    from PIL import Image

    from extproc.testing.ocr_scenes import car_photo, degrade, landscape_photo, passport_page, scanned_form
    from extproc.testing.quantize_ocr import calibration_inputs

    def scenes() -> tuple[bytes, ...]:
        return (degrade(passport_page()), scanned_form(), landscape_photo().tobytes(), car_photo().tobytes())

    before, calibration = scenes(), calibration_inputs()
    Image.effect_noise((64, 64), 20)  # draws from the process-wide generator
    assert scenes() == before
    assert all((a == b).all() for a, b in zip(calibration_inputs(), calibration, strict=True))
    assert degrade(passport_page(), seed=8) != before[0]
    assert landscape_photo(seed=4).tobytes() != before[2]
