"""OCR: one small engine interface, the rapidocr engine behind it, and a cached, budgeted service.

- `OcrEngine` is what a signal needs from an OCR engine: RGB pixels in, text boxes out,
  honouring a deadline. Tests and other engines plug in here.
- `RapidOcrEngine` runs rapidocr's PP-OCR ONNX models (shipped inside the wheel, so no
  download) with the angle classifier off (it garbles code lines), recognising text boxes
  in small batches and stopping at the deadline with a `truncated` result.
- `OcrService` is what the signals share (one per process, from the model registry): it
  downscales huge images, runs the engine on the heavy executor, and caches results by the
  image's sha256, so several OCR signals on one request, or the same image again, cost one
  OCR pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from PIL import Image

from extproc.models.registry import ModelRegistry

if TYPE_CHECKING:
    from extproc.images import DecodedImage
    from extproc.models.executor import HeavyExecutor
    from extproc.settings import OcrSettings

log = logging.getLogger(__name__)

OCR_MODEL_NAME = "ocr"


@dataclass(frozen=True, slots=True)
class OcrBox:
    """One recognised text box; `box` is (x0, y0, x1, y1) in the original image's pixels."""

    text: str
    box: tuple[float, float, float, float]
    score: float


@dataclass(frozen=True, slots=True)
class OcrLine:
    """Boxes on one visual row, left to right."""

    text: str
    box: tuple[float, float, float, float]
    score: float  # the lowest box score on the row
    boxes: tuple[OcrBox, ...]


@dataclass(frozen=True, slots=True)
class OcrResult:
    lines: tuple[OcrLine, ...]  # reading order: top to bottom, rows merged
    width: int  # the original image's size
    height: int
    elapsed_ms: float = 0.0
    truncated: bool = False  # the time budget stopped recognition before every box was read
    engine: str = ""

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    @property
    def char_count(self) -> int:
        return sum(len(line.text.strip()) for line in self.lines)

    def layout_text(self, max_indent: int = 24) -> str:
        """The text with each row indented by its left offset in character widths (for code cues)."""
        if not self.lines:
            return ""
        rows = [list(line.boxes) for line in self.lines]
        # An editor's line-number gutter (a short number first on most rows) hides indentation.
        gutter = sum(1 for r in rows if len(r) > 1 and r[0].text.isdigit() and len(r[0].text) <= 4)
        if gutter >= max(3, len(rows) // 2):
            rows = [r[1:] if len(r) > 1 and r[0].text.isdigit() and len(r[0].text) <= 4 else r for r in rows]
            rows = [r for r in rows if not (len(r) == 1 and r[0].text.isdigit() and len(r[0].text) <= 4)]
        if not rows:
            return ""
        widths = [(b.box[2] - b.box[0]) / max(1, len(b.text)) for r in rows for b in r if b.text]
        char_w = max(sorted(widths)[len(widths) // 2] if widths else 10.0, 1.0)
        left = min(r[0].box[0] for r in rows)
        out = []
        for r in rows:
            indent = min(max_indent, round((r[0].box[0] - left) / char_w))
            out.append(" " * indent + " ".join(b.text for b in r))
        return "\n".join(out)


class OcrEngine(Protocol):
    """RGB pixels in, text boxes out; stop at `deadline` (a time.monotonic() value) if given."""

    name: str

    def recognize(self, image: Image.Image, deadline: float | None = None) -> tuple[list[OcrBox], bool]:
        """Boxes in any order, and whether the deadline cut recognition short."""
        ...


class OcrTimeout(TimeoutError):
    """OCR ran out of its budget before reading anything."""


# --------------------------------------------------------------------------- layout


def assemble_lines(boxes: Sequence[OcrBox]) -> tuple[OcrLine, ...]:
    """Group boxes into visual rows (vertical overlap), order rows top-down and boxes left-right."""
    rows: list[list[OcrBox]] = []
    for b in sorted(boxes, key=lambda b: (b.box[1] + b.box[3]) / 2):
        cy = (b.box[1] + b.box[3]) / 2
        h = b.box[3] - b.box[1]
        for row in rows:
            last = row[-1]
            rcy = (last.box[1] + last.box[3]) / 2
            rh = last.box[3] - last.box[1]
            if abs(cy - rcy) <= 0.5 * min(h, rh):
                row.append(b)
                break
        else:
            rows.append([b])
    lines = []
    for row in rows:
        row.sort(key=lambda b: b.box[0])
        x0 = min(b.box[0] for b in row)
        y0 = min(b.box[1] for b in row)
        x1 = max(b.box[2] for b in row)
        y1 = max(b.box[3] for b in row)
        lines.append(
            OcrLine(" ".join(b.text for b in row), (x0, y0, x1, y1), min(b.score for b in row), tuple(row))
        )
    lines.sort(key=lambda ln: (ln.box[1] + ln.box[3]) / 2)
    return tuple(lines)


def prepare_image(img: Image.Image, max_side: int) -> tuple[Image.Image, float]:
    """RGB pixels for OCR, at most `max_side` on the long side; returns (image, scale applied).

    Transparency is composited onto white (a naive RGBA->RGB makes transparent text black
    on black); palette and CMYK images are converted properly.
    """
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        bg = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        img = Image.alpha_composite(bg, rgba).convert("RGB")
    elif img.mode != "RGB":
        img = img.convert("RGB")
    scale = 1.0
    long_side = max(img.size)
    if long_side > max_side:
        scale = max_side / long_side
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        img = img.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    return img, scale


# --------------------------------------------------------------------------- rapidocr


class RapidOcrEngine:
    """rapidocr (PP-OCR ONNX models shipped in the wheel) on onnxruntime, angle classifier off."""

    name = "rapidocr"

    def __init__(self, *, threads: int | None = None, min_score: float = 0.5, rec_batch: int = 6) -> None:
        from rapidocr import RapidOCR

        params: dict[str, Any] = {
            "Global.use_cls": False,
            "Global.log_level": "warning",
            "Global.text_score": min_score,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
        if threads is not None:
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = threads
        self._ocr = RapidOCR(params=params)
        self._min_score = min_score
        self._rec_batch = max(1, rec_batch)
        self._lock = threading.Lock()  # the rapidocr object keeps per-call state

    def warm_up(self) -> None:
        """Load the detection and recognition sessions now (at policy load, not on a request)."""
        from PIL import ImageDraw, ImageFont

        img = Image.new("RGB", (320, 64), "white")
        ImageDraw.Draw(img).text((10, 12), "OCR 123", fill="black", font=ImageFont.load_default(size=32))
        self.recognize(img)

    def recognize(self, image: Image.Image, deadline: float | None = None) -> tuple[list[OcrBox], bool]:
        import numpy as np
        from rapidocr.utils.process_img import map_boxes_to_original

        bgr = np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])
        h, w = bgr.shape[:2]
        with self._lock:
            ocr = self._ocr
            pre, op_record = ocr.preprocess_img(bgr)
            try:
                crops, det = ocr.detect_and_crop(pre, op_record)
            except Exception as exc:  # rapidocr raises its own error for "no text found"
                if type(exc).__name__ == "RapidOCRError":
                    return [], False
                raise
            if det.boxes is None or len(crops) == 0:
                return [], False
            boxes = map_boxes_to_original(det.boxes.astype("float32"), op_record, h, w)
            texts: list[str] = []
            scores: list[float] = []
            truncated = False
            for start in range(0, len(crops), self._rec_batch):
                if deadline is not None and time.monotonic() >= deadline:
                    truncated = True
                    break
                try:
                    rec = ocr.recognize_txt(crops[start : start + self._rec_batch])
                except Exception as exc:
                    if type(exc).__name__ == "RapidOCRError":
                        n = len(crops[start : start + self._rec_batch])
                        texts += [""] * n
                        scores += [0.0] * n
                        continue
                    raise
                texts += list(rec.txts or ())
                scores += [float(s) for s in rec.scores]
        out = []
        for quad, text, score in zip(boxes, texts, scores, strict=False):
            if not text.strip() or score < self._min_score:
                continue
            xs = [float(p[0]) for p in quad]
            ys = [float(p[1]) for p in quad]
            out.append(OcrBox(text.strip(), (min(xs), min(ys), max(xs), max(ys)), score))
        return out, truncated


# --------------------------------------------------------------------------- service


class _LruCache:
    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[str, OcrResult] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> OcrResult | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: str, value: OcrResult) -> None:
        if self._size <= 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class OcrService:
    """Cached, downscaling, time-budgeted OCR over an engine; shared by every OCR signal."""

    def __init__(self, engine: OcrEngine, *, max_side: int = 1600, budget_ms: float = 3000.0, cache_size: int = 256):
        self.engine = engine
        self.max_side = max_side
        self.budget_s = budget_ms / 1000.0
        self._cache = _LruCache(cache_size)
        # Striped locks: two signals asking for the same image at once run OCR once.
        self._locks = [threading.Lock() for _ in range(16)]
        self.hits = 0
        self.misses = 0

    def cached(self, sha256: str) -> OcrResult | None:
        return self._cache.get(sha256)

    def read_sync(self, image: DecodedImage, deadline: float | None = None) -> OcrResult:
        """OCR `image` now, in this thread (the executor's job, or a CLI/bench call)."""
        hit = self._cache.get(image.sha256)
        if hit is not None:
            self.hits += 1
            return hit
        with self._locks[int(image.sha256[:8], 16) % len(self._locks)]:
            hit = self._cache.get(image.sha256)
            if hit is not None:
                self.hits += 1
                return hit
            self.misses += 1
            result = self.read_pixels(image.pixels(), deadline=deadline)
            if not result.truncated:
                self._cache.put(image.sha256, result)
            return result

    def read_pixels(self, pixels: Image.Image, deadline: float | None = None) -> OcrResult:
        """OCR decoded pixels without caching; the budget starts now."""
        start = time.monotonic()
        budget_deadline = start + self.budget_s
        deadline = budget_deadline if deadline is None else min(deadline, budget_deadline)
        prepared, scale = prepare_image(pixels, self.max_side)
        boxes, truncated = self.engine.recognize(prepared, deadline)
        if scale != 1.0:
            inv = 1.0 / scale
            boxes = [
                OcrBox(b.text, (b.box[0] * inv, b.box[1] * inv, b.box[2] * inv, b.box[3] * inv), b.score)
                for b in boxes
            ]
        elapsed = (time.monotonic() - start) * 1000.0
        if truncated and not boxes:
            raise OcrTimeout(f"OCR ran out of its {self.budget_s * 1000:.0f} ms budget before reading any text")
        return OcrResult(
            assemble_lines(boxes), pixels.width, pixels.height, elapsed, truncated, getattr(self.engine, "name", "")
        )

    async def read(self, image: DecodedImage, executor: HeavyExecutor, deadline: float | None = None) -> OcrResult:
        """OCR on the heavy executor; a cached image returns at once, with no thread hop."""
        hit = self._cache.get(image.sha256)
        if hit is not None:
            self.hits += 1
            return hit
        return await executor.run(self.read_sync, image, deadline)


def load_ocr_service(settings: OcrSettings, *, default_threads: int | None = None) -> OcrService:
    """Build the configured OCR engine (models loaded and warmed) wrapped in its service."""
    from extproc.models.registry import ModelUnavailable

    if not settings.enabled:
        raise ModelUnavailable("OCR is disabled in settings (ocr.enabled: false)")
    try:
        engine = RapidOcrEngine(
            threads=settings.threads if settings.threads is not None else default_threads,
            min_score=settings.min_text_score,
        )
    except ImportError as exc:
        raise ModelUnavailable(f"rapidocr is not installed: {exc}") from exc
    engine.warm_up()
    return OcrService(engine, max_side=settings.max_side, budget_ms=settings.budget_ms, cache_size=settings.cache_size)


def get_ocr_service(models: ModelRegistry, settings: OcrSettings, *, default_threads: int | None = None) -> OcrService:
    """The process's one OCR service, from the model registry (loaded on first use)."""
    return models.get(
        OCR_MODEL_NAME,
        lambda: load_ocr_service(settings, default_threads=default_threads),
        detail=f"rapidocr (PP-OCR ONNX, use_cls=False), max_side={settings.max_side}, budget={settings.budget_ms}ms",
    )
