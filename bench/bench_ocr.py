"""OCR latency per image: cold (first read of an image) and cached (same bytes again).

Renders the OCR test scenes with Pillow (no stored images), loads rapidocr once through
the same loader the signals use, then reads each scene with a fresh cache (cold) and again
(cached). Run: .venv/bin/python bench/bench_ocr.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "ocr"))

from ocr_scenes import (
    as_image,
    car_photo,
    code_screenshot,
    degrade,
    injection_banner,
    jpeg_bytes,
    landscape_photo,
    passport_page,
    png_bytes,
    scanned_form,
)

from extproc.models.ocr import OcrService, load_ocr_service
from extproc.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="cold reads per scene (fresh cache each)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    settings = Settings.load(None, environ={"VSR_OCR__BUDGET_MS": "60000"})
    start = time.perf_counter()
    service = load_ocr_service(settings.ocr, default_threads=args.threads)
    load_s = time.perf_counter() - start
    engine = service.engine
    passport = passport_page()
    scenes = {
        "passport (1100x720 PNG)": png_bytes(passport),
        "passport degraded (JPEG, rotated)": degrade(passport),
        "code screenshot (1180x560)": png_bytes(code_screenshot()),
        "scanned form (JPEG)": scanned_form(),
        "injection banner": png_bytes(injection_banner()),
        "photo, no text": png_bytes(landscape_photo()),
        "photo of a car (JPEG)": jpeg_bytes(car_photo()),
    }
    print(f"rapidocr load + warm-up: {load_s * 1000:.0f} ms (threads={args.threads})")
    print(f"{'scene':38} {'cold p50 ms':>12} {'cold min':>9} {'cached us':>10} {'lines':>6}")
    colds: list[float] = []
    for name, data in scenes.items():
        times = []
        lines = 0
        for _ in range(args.repeat):
            fresh = OcrService(engine, max_side=service.max_side, budget_ms=60000)
            image = as_image(data)  # a new request's image: pixels not yet decoded
            t0 = time.perf_counter()
            result = fresh.read_sync(image)
            times.append((time.perf_counter() - t0) * 1000)
            lines = len(result.lines)
        cached_us = []
        for _ in range(200):
            image = as_image(data)
            t0 = time.perf_counter()
            fresh.read_sync(image)
            cached_us.append((time.perf_counter() - t0) * 1e6)
        cold = statistics.median(times)
        colds.append(cold)
        print(f"{name:38} {cold:12.0f} {min(times):9.0f} {statistics.median(cached_us):10.1f} {lines:6}")
    print(f"all scenes: cold p50 {statistics.median(colds):.0f} ms/image; cached reads are a dict lookup by sha256")


if __name__ == "__main__":
    main()
