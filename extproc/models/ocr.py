"""OCR: one small engine interface, the rapidocr engine behind it, and a cached, budgeted service.

- `OcrEngine` is what a signal needs from an OCR engine: RGB pixels in, text boxes out,
  honouring a deadline. Tests and other engines plug in here.
- `RapidOcrEngine` runs rapidocr's PP-OCR ONNX models (shipped inside the wheel, so no
  download) with the angle classifier off (it garbles code lines), recognising text lines
  and stopping at the deadline with a `truncated` result. `OcrTuning` says how: by default
  a lean pipeline around the same models (OpenVINO when installed, else onnxruntime with
  its memory arena; no 6x upscaling of small images; lines read one by one, unpadded),
  about 1/4 of the first wave's cost on the OCR corpus with the same routing labels;
  `OcrTuning.legacy()` keeps the first wave's settings selectable.
- `OcrService` is what the signals share (one per process, from the model registry): it
  downscales huge images, runs the engine on the heavy executor, and caches results by the
  image's sha256, so several OCR signals on one request, or the same image again, cost one
  OCR pass.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from PIL import Image

from extproc.models.lru import LruCache
from extproc.models.ocr_det import db_post, det_tensor, quad_area, text_boxes

# How the models run (tuning, runtimes) is in `ocr_runtime`; OcrTuning stays importable from here.
from extproc.models.ocr_runtime import (
    GATE_SCALE,
    MAX_TEXT_CANDIDATES,
    REC_HEIGHT,
    OcrEngineStats,
    int8_detector,
    is_int,
    ort_model,
    ov_model,
    rapidocr_model_files,
)
from extproc.models.ocr_runtime import OcrTuning as OcrTuning
from extproc.models.ocr_runtime import openvino_available as openvino_available
from extproc.models.registry import ModelRegistry

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

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
    """OCR stopped before reading anything: its budget ran out, or the image held more candidate
    text regions than it examines (`MAX_TEXT_CANDIDATES`)."""


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
        lines.append(OcrLine(" ".join(b.text for b in row), (x0, y0, x1, y1), min(b.score for b in row), tuple(row)))
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
    """PP-OCR (the det and rec ONNX models the rapidocr wheel ships), angle classifier off.

    `tuning` picks how: by default the fast pipeline (rapidocr's own pre/post-processing
    around sessions it builds itself); `OcrTuning.legacy()` is the first wave's `RapidOCR`
    object with its defaults. `rec_batch`, when given, overrides `tuning.rec_batch`.
    """

    def __init__(
        self,
        *,
        threads: int | None = None,
        min_score: float = 0.5,
        rec_batch: int | None = None,
        tuning: OcrTuning | None = None,
    ) -> None:
        tuning = tuning or OcrTuning()
        if rec_batch is not None:
            tuning = replace(tuning, rec_batch=rec_batch)
        if not 0.0 <= min_score <= 1.0:
            raise ValueError(f"min_score must be within [0, 1], got {min_score}")
        if threads is not None and (not is_int(threads) or threads < 1):
            raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
        self.tuning = tuning
        self.runtime = "onnxruntime"
        self.det_precision = "fp32"  # what detection runs in (the int8 copy only on onnxruntime, when it loads)
        self._min_score = min_score
        self._lock = threading.Lock()  # one inference at a time: sessions/requests keep per-call state
        self.stats = OcrEngineStats()
        self._ocr: Any = None
        if tuning.pipeline == "rapidocr":
            self._init_rapidocr(threads, min_score)
        else:
            self._init_fast(threads)
        self.name = "rapidocr" if tuning == OcrTuning.legacy() else f"rapidocr-{tuning.pipeline}/{self.runtime}"

    # ---------------------------------------------------------------- set-up

    def _init_rapidocr(self, threads: int | None, min_score: float) -> None:
        from rapidocr import RapidOCR

        t = self.tuning
        params: dict[str, Any] = {
            "Global.use_cls": False,
            "Global.log_level": "warning",
            "Global.text_score": min_score,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            "EngineConfig.onnxruntime.enable_cpu_mem_arena": t.mem_arena,
            "Det.limit_type": t.det_limit_type,
            "Det.limit_side_len": t.det_limit_side_len,
        }
        if threads is not None:
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = threads
        self._ocr = RapidOCR(params=params)

    def _init_fast(self, threads: int | None) -> None:
        from rapidocr.ch_ppocr_rec.utils import CTCLabelDecode

        t = self.tuning
        runtime = t.runtime
        chars: list[str] | None = None
        det_path, rec_path = rapidocr_model_files()
        if runtime == "auto":
            runtime = "onnxruntime"
            if openvino_available():
                try:
                    self._det, _ = ov_model(det_path, threads, t.ov_precision)
                    self._rec, chars = ov_model(rec_path, threads, t.ov_precision)
                    runtime = "openvino"
                except Exception as exc:  # a broken install must not take OCR down: onnxruntime reads the same
                    log.warning("OpenVINO could not load the OCR models (%s); using onnxruntime", exc)
        elif runtime == "openvino":
            self._det, _ = ov_model(det_path, threads, t.ov_precision)
            self._rec, chars = ov_model(rec_path, threads, t.ov_precision)
        if runtime == "onnxruntime":
            # Detection on more than `det_arena_keep_px` pixels (3 channels) gives its arena back;
            # recognition's buffers are small.
            int8 = int8_detector(det_path) if t.det_precision == "int8" else None
            keep_values = 3 * t.det_arena_keep_px
            self._det, _ = ort_model(int8 or det_path, threads, t.mem_arena, shrink_above=keep_values)
            self.det_precision = "int8" if int8 else "fp32"
            self._rec, chars = ort_model(rec_path, threads, t.mem_arena)
        if not chars:
            raise ValueError(f"{rec_path.name} carries no character list")
        self.runtime = runtime
        # rapidocr's config.yaml values for the DB post-processing, but every candidate region is
        # considered (see `ocr_det.text_boxes`): rapidocr keeps the first 1,000 contours and drops the rest
        # unseen, so speckle noise below a line of text hid the line from OCR altogether.
        self._det_post = db_post(thresh=0.3, box_thresh=0.5)
        self._decode = CTCLabelDecode(character=chars)
        # The first look's post-processing: lower thresholds than the full pass, so that small
        # or faint text downscaled to the look's size still leaves a candidate box.
        self._gate_post = db_post(thresh=0.15, box_thresh=0.25)
        self._gate_post.min_size = 2
        import cv2

        self._clahe = cv2.createCLAHE(clipLimit=2.0, tileGridSize=(8, 8))

    def warm_up(self) -> None:
        """Load and run both models now (at policy load, not on a request)."""
        from PIL import ImageDraw, ImageFont

        img = Image.new("RGB", (320, 64), "white")
        ImageDraw.Draw(img).text((10, 12), "OCR 123", fill="black", font=ImageFont.load_default(size=32))
        self.recognize(img)
        if self._ocr is None and self.tuning.rec_warm_width:
            import numpy as np

            step = self.tuning.rec_width_step
            first = -(-self.tuning.rec_min_width // step) * step
            for width in range(first, self.tuning.rec_warm_width + 1, step):
                self._rec(np.zeros((1, 3, REC_HEIGHT, width), dtype=np.float32))
        self.stats = OcrEngineStats()

    # ---------------------------------------------------------------- recognition

    def recognize(self, image: Image.Image, deadline: float | None = None) -> tuple[list[OcrBox], bool]:
        import cv2
        import numpy as np

        # OpenCV's channel swap, not a reversed numpy view copied: 1 ms against 15 on a 1411 px photo.
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        bgr: NDArray[np.uint8] = np.asarray(cv2.cvtColor(np.asarray(rgb), cv2.COLOR_RGB2BGR), dtype=np.uint8)
        with self._lock:
            if self._ocr is not None:
                quads, texts, scores, truncated = self._run_rapidocr(bgr, deadline)
            else:
                quads, texts, scores, truncated = self._run_fast(bgr, deadline)
        out = []
        for quad, text, score in zip(quads, texts, scores, strict=False):
            if text is None or not text.strip() or score < self._min_score:
                continue
            xs = [float(p[0]) for p in quad]
            ys = [float(p[1]) for p in quad]
            out.append(OcrBox(text.strip(), (min(xs), min(ys), max(xs), max(ys)), score))
        return out, truncated

    def _run_rapidocr(self, bgr: NDArray[np.uint8], deadline: float | None) -> _Read:
        """The first wave's path, unchanged: RapidOCR's steps, batches in detection order."""
        from rapidocr.utils.process_img import map_boxes_to_original

        h, w = bgr.shape[:2]
        ocr = self._ocr
        self.stats.images += 1
        pre, op_record = ocr.preprocess_img(bgr)
        try:
            crops, det = ocr.detect_and_crop(pre, op_record)
        except Exception as exc:  # rapidocr raises its own error for "no text found"
            if type(exc).__name__ == "RapidOCRError":
                self.stats.det_empty += 1
                return [], [], [], False
            raise
        if det.boxes is None or len(crops) == 0:
            self.stats.det_empty += 1
            return [], [], [], False
        boxes = map_boxes_to_original(det.boxes.astype("float32"), op_record, h, w)
        texts: list[str | None] = []
        scores: list[float] = []
        truncated = False
        batch = self.tuning.rec_batch
        for start in range(0, len(crops), batch):
            if deadline is not None and time.monotonic() >= deadline:
                truncated = True
                self.stats.lines_skipped += len(crops) - start
                break
            self.stats.rec_calls += 1
            try:
                rec = ocr.recognize_txt(crops[start : start + batch])
            except Exception as exc:
                if type(exc).__name__ == "RapidOCRError":
                    n = len(crops[start : start + batch])
                    texts += [""] * n
                    scores += [0.0] * n
                    continue
                raise
            texts += list(rec.txts or ())
            scores += [float(s) for s in rec.scores]
            self.stats.lines_read += len(rec.txts or ())
        return list(boxes), texts, scores, truncated

    def _run_fast(self, bgr: NDArray[np.uint8], deadline: float | None) -> _Read:
        import numpy as np
        from rapidocr.ch_ppocr_det.main import TextDetector
        from rapidocr.utils.process_img import (
            apply_vertical_padding,
            get_rotate_crop_image,
            map_boxes_to_original,
            resize_image_within_bounds,
        )

        h, w = bgr.shape[:2]
        self.stats.images += 1
        # rapidocr's Global defaults: sides within [30, 2000], very wide strips padded vertically.
        img, ratio_h, ratio_w = resize_image_within_bounds(bgr, 30, 2000)
        op_record: dict[str, Any] = {"preprocess": {"ratio_h": ratio_h, "ratio_w": ratio_w}}
        img, op_record = apply_vertical_padding(img, op_record, 8, 30)
        if self._worth_a_first_look(img) and not self._may_hold_text(img, deadline):
            self.stats.gate_skipped += 1
            return [], [], [], False
        det_in = self._det_input(img)
        boxes = None
        overflow = False
        if det_in is not None:
            found, overflow = self._text_boxes(self._det_post, self._det(det_in), img.shape[:2])
            if len(found):
                boxes = TextDetector.sorted_boxes(np.asarray(found))
        if boxes is None:
            self.stats.det_empty += 1  # nothing to read: recognition is skipped
            return [], [], [], overflow
        crops = [get_rotate_crop_image(img, box.copy()) for box in boxes]
        texts, scores, truncated = self._recognize_lines(crops, deadline)
        quads = map_boxes_to_original(boxes.astype("float32"), op_record, h, w)
        return list(quads), texts, scores, truncated or overflow

    def _text_boxes(self, post: Any, pred: NDArray[np.float32], shape: tuple[int, int]) -> tuple[Any, bool]:
        """Boxes from one detector map (`post`: a DBPostProcess), and whether candidate regions were
        left unexamined (`ocr_det.text_boxes`). The full pass reports an overflow as a truncated
        read (what was read still counts; "no text" is never claimed); the first look sends such
        an image to the full pass."""
        found, overflow = text_boxes(post, pred, shape)
        if overflow:
            self.stats.det_overflow += 1
        return found, overflow

    def _worth_a_first_look(self, img: NDArray[np.uint8]) -> bool:
        """Whether the full detection input has over twice the pixels of the first look's."""
        if not self.tuning.gate_scale:
            return False
        h, w = self._det_size(img.shape[0], img.shape[1])
        gh, gw = self._gate_size(img.shape[0], img.shape[1])
        return h * w > 2 * gh * gw

    def _gate_size(self, h: int, w: int) -> tuple[int, int]:
        """The first look's input (height, width): `gate_scale` of the image, multiples of 32."""
        t = self.tuning
        side = max(t.gate_min_side, t.gate_scale * max(h, w))
        ratio = min(1.0, side / max(h, w))
        return max(32, round(h * ratio / 32) * 32), max(32, round(w * ratio / 32) * 32)

    def _may_hold_text(self, img: NDArray[np.uint8], deadline: float | None) -> bool:
        """The cheap first look: two small detection looks, then a read of their candidates, largest first.

        False only when neither look finds a candidate box, or when every candidate (at most
        `gate_probe_lines` of them) reads as nothing at full resolution.
        """
        import cv2
        import numpy as np
        from rapidocr.utils.process_img import get_rotate_crop_image

        self.stats.gate_looks += 1
        gh, gw = self._gate_size(img.shape[0], img.shape[1])
        small = cv2.resize(img, (gw, gh), interpolation=cv2.INTER_AREA)
        # Two looks in one batch: the pixels as they are, and with local contrast equalised
        # (CLAHE on lightness), which brings out pale text that the plain look loses once
        # downscaled; equalising alone loses some dark text on busy photos, so both count.
        lab = cv2.cvtColor(small, cv2.COLOR_BGR2LAB)
        lab[:, :, 0] = self._clahe.apply(lab[:, :, 0])
        looks = np.stack([small, cv2.cvtColor(lab, cv2.COLOR_LAB2BGR)]).astype(np.float32)
        x = np.ascontiguousarray((looks / 127.5 - 1.0).transpose((0, 3, 1, 2)))
        maps = self._det(x)
        found = []
        for i in range(len(maps)):
            boxes, overflow = self._text_boxes(self._gate_post, maps[i : i + 1], img.shape[:2])
            if overflow:
                return True  # too many candidates to rule out: the full pass decides
            found += list(boxes)
        if not len(found):
            return False
        if len(found) > self.tuning.gate_probe_lines:
            return True
        quads = sorted(np.asarray(found, dtype=np.float32), key=quad_area, reverse=True)
        for quad in quads:
            crop = get_rotate_crop_image(img, quad.copy())
            if crop.size == 0:
                continue
            self.stats.gate_probes += 1
            texts, scores, truncated = self._recognize_lines([crop], deadline)
            if truncated:
                return True  # no time to look closer: let the full pass (and its deadline) decide
            if scores[0] >= self._min_score and sum(ch.isalnum() for ch in texts[0] or "") >= 2:
                return True
        return False

    def _det_size(self, h: int, w: int) -> tuple[int, int]:
        """The full detection input's (height, width) for an image of h x w."""
        t = self.tuning
        ratio = 1.0
        if t.det_limit_type == "max" and max(h, w) > t.det_limit_side_len:
            ratio = t.det_limit_side_len / max(h, w)
        elif t.det_limit_type == "min" and min(h, w) < t.det_limit_side_len:
            ratio = t.det_limit_side_len / min(h, w)
        if t.det_max_upscale is not None:
            ratio = min(ratio, t.det_max_upscale)
        return round(int(h * ratio) / 32) * 32, round(int(w * ratio) / 32) * 32

    def _det_input(self, img: NDArray[np.uint8]) -> NDArray[np.float32] | None:
        """rapidocr's detector preprocessing (resize to a multiple of 32, mean/std 0.5, NCHW), with the upscale cap."""
        resize_h, resize_w = self._det_size(img.shape[0], img.shape[1])
        if resize_h <= 0 or resize_w <= 0:
            return None
        return det_tensor(img, resize_h, resize_w)

    def _recognize_lines(
        self, crops: Sequence[NDArray[np.uint8]], deadline: float | None
    ) -> tuple[list[str | None], list[float], bool]:
        """Read text lines in batches of similar aspect ratio; lines the deadline cuts off stay None."""
        import cv2
        import numpy as np

        texts: list[str | None] = [None] * len(crops)
        scores = [0.0] * len(crops)
        ratios = [c.shape[1] / max(1, c.shape[0]) for c in crops]
        order = sorted(range(len(crops)), key=lambda i: ratios[i])
        batch = self.tuning.rec_batch
        min_ratio = self.tuning.rec_min_width / REC_HEIGHT
        for start in range(0, len(order), batch):
            if deadline is not None and time.monotonic() >= deadline:
                self.stats.lines_skipped += len(order) - start
                return texts, scores, True
            idx = order[start : start + batch]
            max_ratio = max(min_ratio, max(ratios[i] for i in idx))
            width = int(REC_HEIGHT * max_ratio)
            width = -(-width // self.tuning.rec_width_step) * self.tuning.rec_width_step
            x = np.zeros((len(idx), 3, REC_HEIGHT, width), dtype=np.float32)
            for row, i in enumerate(idx):
                resized_w = min(width, math.ceil(REC_HEIGHT * ratios[i]))
                line = cv2.resize(crops[i], (max(1, resized_w), REC_HEIGHT)).astype(np.float32)
                x[row, :, :, :resized_w] = line.transpose((2, 0, 1)) / 127.5 - 1.0
            self.stats.rec_calls += 1
            preds = self._rec(x)
            lines, _ = self._decode(preds, False, wh_ratio_list=[ratios[i] for i in idx], max_wh_ratio=max_ratio)
            for i, (text, score) in zip(idx, lines, strict=True):
                texts[i] = str(text)
                scores[i] = float(score)
            self.stats.lines_read += len(idx)
        return texts, scores, False


_Read = tuple[list[Any], list[str | None], list[float], bool]


# --------------------------------------------------------------------------- service


class OcrService:
    """Cached, downscaling, time-budgeted OCR over an engine; shared by every OCR signal."""

    def __init__(self, engine: OcrEngine, *, max_side: int = 1600, budget_ms: float = 3000.0, cache_size: int = 256):
        self.engine = engine
        self.max_side = max_side
        self.budget_s = budget_ms / 1000.0
        self.cache: LruCache[OcrResult] = LruCache(cache_size)
        # Striped locks: two signals asking for the same image at once run OCR once.
        self._locks = [threading.Lock() for _ in range(16)]

    @property
    def hits(self) -> int:
        return self.cache.hits

    @property
    def misses(self) -> int:
        return self.cache.misses

    def caches(self) -> dict[str, LruCache[OcrResult]]:
        return {"": self.cache}

    def cached(self, sha256: str) -> OcrResult | None:
        return self.cache.peek(sha256)

    def read_sync(self, image: DecodedImage, deadline: float | None = None) -> OcrResult:
        """OCR `image` now, in this thread (the executor's job, or a CLI/bench call)."""
        hit = self.cache.get(image.sha256)  # one counted lookup per read
        return hit if hit is not None else self._read_locked(image, deadline)

    def _read_locked(self, image: DecodedImage, deadline: float | None) -> OcrResult:
        with self._locks[int(image.sha256[:8], 16) % len(self._locks)]:
            hit = self.cache.peek(image.sha256)  # another thread may have read it meanwhile
            if hit is not None:
                return hit
            result = self.read_pixels(image.pixels(), deadline=deadline)
            if not result.truncated:
                self.cache.put(image.sha256, result)
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
                OcrBox(b.text, (b.box[0] * inv, b.box[1] * inv, b.box[2] * inv, b.box[3] * inv), b.score) for b in boxes
            ]
        elapsed = (time.monotonic() - start) * 1000.0
        if truncated and not boxes:
            raise OcrTimeout(
                f"OCR stopped before reading any text: its {self.budget_s * 1000:.0f} ms budget ran out, or the"
                f" image held more than {MAX_TEXT_CANDIDATES:,} candidate text regions"
            )
        return OcrResult(
            assemble_lines(boxes), pixels.width, pixels.height, elapsed, truncated, getattr(self.engine, "name", "")
        )

    async def read(self, image: DecodedImage, executor: HeavyExecutor, deadline: float | None = None) -> OcrResult:
        """OCR on the heavy executor; a cached image returns at once, with no thread hop."""
        hit = self.cache.get(image.sha256)
        if hit is not None:
            return hit
        return await executor.run(self._read_locked, image, deadline)


def tuning_from_settings(settings: OcrSettings) -> OcrTuning:
    """The OCR tuning the settings ask for: `ocr.preset` ("fast", or "legacy": the first wave's
    rapidocr settings), `ocr.runtime` (auto: OpenVINO when installed, else onnxruntime),
    `ocr.det_precision` (int8: the shipped int8 detector on onnxruntime), `ocr.text_gate`
    (the cheap first look; off: every image gets full OCR), `ocr.det_arena_keep_mp` (the
    largest detection, in units of 2**20 pixels, that keeps onnxruntime's arena) and
    `ocr.warm_width` (recognition widths run once at load; the legacy preset warms none)."""
    if settings.preset == "legacy":
        return OcrTuning.legacy()
    keep_px = round(settings.det_arena_keep_mp * 1024 * 1024)
    tuning = OcrTuning(
        runtime=settings.runtime,
        det_precision=settings.det_precision,
        det_arena_keep_px=keep_px,
        rec_warm_width=settings.warm_width,
    )
    return replace(tuning, gate_scale=GATE_SCALE) if settings.text_gate else tuning


def load_ocr_service(
    settings: OcrSettings, *, default_threads: int | None = None, tuning: OcrTuning | None = None
) -> OcrService:
    """Build the configured OCR engine (models loaded and warmed) wrapped in its service."""
    from extproc.models.registry import ModelUnavailable

    if not settings.enabled:
        raise ModelUnavailable("OCR is disabled in settings (ocr.enabled: false)")
    try:
        engine = RapidOcrEngine(
            threads=settings.threads if settings.threads is not None else default_threads,
            min_score=settings.min_text_score,
            tuning=tuning or tuning_from_settings(settings),
        )
    except ImportError as exc:
        raise ModelUnavailable(f"rapidocr or its runtime is not installed: {exc}") from exc
    engine.warm_up()
    return OcrService(engine, max_side=settings.max_side, budget_ms=settings.budget_ms, cache_size=settings.cache_size)


def get_ocr_service(models: ModelRegistry, settings: OcrSettings, *, default_threads: int | None = None) -> OcrService:
    """The process's one OCR service, from the model registry (loaded on first use)."""
    tuning = tuning_from_settings(settings)
    return models.get(
        OCR_MODEL_NAME,
        lambda: load_ocr_service(settings, default_threads=default_threads, tuning=tuning),
        detail=f"PP-OCR via rapidocr, use_cls=False, {tuning.describe()}, max_side={settings.max_side}, "
        f"budget={settings.budget_ms}ms",
    )
