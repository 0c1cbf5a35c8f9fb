"""Experiment (issue 26): detect text on large images at a capped input side, read lines at full resolution.

Today a large image (up to `ocr.max_side`, 1600 px) is detected at its own size: on a 2 MP fundus
photo the detector alone costs 190-250 ms on two cores, which keeps large medical images above the
issue's 150 ms. This study caps the detector's input side (boxes still map back to the image, and
lines are still read from full-resolution crops) and compares every image's routing labels and
text with today's full OCR: the OCR corpus (rendered scenes and tests/corpus/images), captions on
photos (small, rotated, pale), small keys on near-white pages, and code screenshots at common
screen sizes and font sizes, where a cap shrinks text the most.

    .venv/bin/python bench/experiments/ocr_det_cap.py 960 1024 1152 1280

Figures and conclusions: ocr_det_cap.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from PIL import Image, ImageDraw

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.models.ocr import OcrService, OcrTuning, RapidOcrEngine  # noqa: E402
from extproc.testing.ocr_routing import corpus_images, routing_view  # noqa: E402
from extproc.testing.ocr_scenes import (  # noqa: E402
    AWS_KEY,
    CODE_LINES,
    as_image,
    captioned_photo,
    font,
    speckled_injection,
    text_on_white,
)

# (font px, ink contrast, angle) on a 1600 x 1200 photo: the size a cap shrinks.
CAPTIONS = [(12, 1.0, 0), (14, 1.0, 0), (18, 1.0, 0), (18, 1.0, 20), (24, 1.0, 45), (14, 0.6, 0), (16, 0.5, 0),
            (24, 0.4, 0), (28, 0.4, 0), (20, 0.3, 0)]  # fmt: skip
MEDICAL = ("retina.jpg", "retina_2400.jpg", "cell.png", "ihc.jpg")  # bench_ocr's large-medical class
# (width, height, font px): screenshots at 1x and 2x scale.
SCREENSHOTS = [(1440, 900, 12), (1440, 900, 14), (1600, 1000, 12), (1920, 1080, 13), (1920, 1080, 15),
               (2560, 1440, 18), (2880, 1800, 26)]  # fmt: skip


def capped_service(cap: int | None) -> OcrService:
    """Today's engine, its detector input scaled down so that its long side is at most `cap`."""
    engine = RapidOcrEngine(threads=2, tuning=OcrTuning())
    engine.warm_up()
    if cap:
        own_size = engine._det_size

        def det_size(h: int, w: int) -> tuple[int, int]:
            dh, dw = own_size(h, w)
            if max(dh, dw) <= cap:
                return dh, dw
            ratio = cap / max(dh, dw)
            return max(32, round(dh * ratio / 32) * 32), max(32, round(dw * ratio / 32) * 32)

        object.__setattr__(engine, "_det_size", det_size)
    return OcrService(engine, budget_ms=120_000)


def code_screenshot(width: int, height: int, px: int) -> Image.Image:
    img = Image.new("RGB", (width, height), (30, 30, 30))
    draw = ImageDraw.Draw(img)
    mono = font(px, mono=True)
    y = 40
    for n, (line, colour) in enumerate(CODE_LINES * 2, start=1):
        draw.text((10, y), f"{n:>2}", font=mono, fill=(110, 110, 110))
        if line:
            draw.text((10 + 4 * px, y), line, font=mono, fill=colour or (212, 212, 212))
        y += int(px * 1.6)
    return img


def scenes() -> dict[str, Image.Image]:
    found = {name: as_image(data).pixels() for name, data in corpus_images().items()}
    for px, contrast, angle in CAPTIONS:
        found[f"caption {px}px ink {contrast} {angle} deg"] = captioned_photo(px, contrast=contrast, angle=angle)
    for px in (12, 14, 16):
        lines = ["deploy settings", f"aws_access_key_id = {AWS_KEY}"]
        found[f"key on white {px}px 1400"] = text_on_white(lines, px)
        found[f"key on white {px}px 1600"] = text_on_white(lines, px, size=(1600, 1200))
    for width, height, px in SCREENSHOTS:
        found[f"code {width}x{height} {px}px"] = code_screenshot(width, height, px)
    found["speckled injection"] = speckled_injection()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("caps", nargs="+", type=int)
    args = parser.parse_args()
    images = scenes()
    full = capped_service(None)
    reference, full_ms = {}, {}
    for name, img in images.items():
        started = time.perf_counter()
        result = full.read_pixels(img)
        full_ms[name] = (time.perf_counter() - started) * 1000
        reference[name] = (routing_view(result), result.text.replace(" ", ""))
    print(f"{len(images)} images; full OCR {sum(full_ms.values()):,.0f} ms in all")
    print("  " + ", ".join(f"{n} {full_ms[n]:.0f} ms" for n in MEDICAL))
    for cap in args.caps:
        service = capped_service(cap)
        labels, texts, took = [], [], {}
        for name, img in images.items():
            started = time.perf_counter()
            result = service.read_pixels(img)
            took[name] = (time.perf_counter() - started) * 1000
            view = routing_view(result)
            if view != reference[name][0]:
                labels.append(f"{name}: {reference[name][0].describe()} -> {view.describe()}")
            elif result.text.replace(" ", "") != reference[name][1]:
                texts.append(name)
        medical = ", ".join(f"{n} {took[n]:.0f} ms" for n in MEDICAL)
        print(f"cap {cap}: {len(labels)} images' routing labels changed, {len(texts)} more read other text;"
              f" {sum(took.values()):,.0f} ms in all; {medical}")  # fmt: skip
        for change in labels:
            print(f"  labels: {change}")
        print(f"  text only: {', '.join(texts)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
