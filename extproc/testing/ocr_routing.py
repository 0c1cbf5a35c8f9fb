"""What routing reads from one image's OCR, and the check that a faster OCR path changes none of it.

Used by the tests (tests/models/test_ocr_text_gate.py) and bench/bench_ocr.py: both compare
a candidate OCR path (the cheap first look, a new runtime, new settings) with full OCR on
every image of the OCR corpus, and fail on any difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from extproc.models.ocr import OcrResult, OcrService
from extproc.signals.document import DocumentSpec, classify
from extproc.signals.image_text import ImageTextSignal, ImageTextSpec
from extproc.testing.ocr_scenes import (
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
    tampered_mrz,
)

CORPUS_DIR = Path(__file__).resolve().parents[2] / "tests" / "corpus" / "images"

_IMAGE_TEXT = ImageTextSignal(ImageTextSpec(name="image_text", type="image_text"), None, "routing view")
_DOC_MIN = DocumentSpec(name="document", type="document").min_score


@dataclass(frozen=True, slots=True)
class RoutingView:
    """The routing-relevant reading of one image: the default image_text and document signals' labels."""

    image_text: frozenset[str]  # every image_text label (mrz, mrz_invalid, secrets:<kind>, pii:<kind>, code, ...)
    document: frozenset[str]  # document labels at or above the document signal's min_score

    @property
    def mrz(self) -> str:
        return "valid" if "mrz" in self.image_text else ("invalid" if "mrz_invalid" in self.image_text else "-")

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(k.split(":", 1)[1] for k in self.image_text if k.startswith("secrets:"))

    def describe(self) -> str:
        return ",".join(sorted(self.image_text)) + " | " + ",".join(sorted(self.document))


def routing_view(result: OcrResult) -> RoutingView:
    labels, _ = _IMAGE_TEXT.scan(result.text, result.layout_text())
    scores = classify(result)
    return RoutingView(frozenset(labels), frozenset(k for k, v in scores.items() if v >= _DOC_MIN))


def scene_images() -> dict[str, bytes]:
    """The rendered OCR scenes (extproc/testing/ocr_scenes.py), encoded as a client would send them."""
    passport = passport_page()
    return {
        "passport": png_bytes(passport),
        "passport_degraded": degrade(passport),
        "passport_tampered": png_bytes(passport_page(tampered_mrz())),
        "code": png_bytes(code_screenshot()),
        "form": scanned_form(),
        "injection": png_bytes(injection_banner()),
        "landscape": png_bytes(landscape_photo()),
        "car": jpeg_bytes(car_photo()),
    }


def corpus_images() -> dict[str, bytes]:
    """The OCR corpus: the rendered scenes and the 24 real images of tests/corpus/images."""
    images = scene_images()
    for path in sorted(CORPUS_DIR.iterdir()):
        images[path.name] = path.read_bytes()
    return images


@dataclass(frozen=True, slots=True)
class LabelChange:
    image: str
    reference: RoutingView
    candidate: RoutingView


def label_changes(candidate: OcrService, reference: OcrService, images: dict[str, bytes]) -> list[LabelChange]:
    """Every image whose routing view differs between `candidate` and `reference` (fresh reads, no cache)."""
    changes = []
    for name, data in images.items():
        want = routing_view(reference.read_pixels(as_image(data).pixels()))
        got = routing_view(candidate.read_pixels(as_image(data).pixels()))
        if got != want:
            changes.append(LabelChange(name, want, got))
    return changes
