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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from PIL import Image

from extproc.models.lru import LruCache
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

OcrPipeline = Literal["fast", "rapidocr"]
OcrRuntime = Literal["auto", "onnxruntime", "openvino"]
DetLimitType = Literal["min", "max"]
OvPrecision = Literal["auto", "f32", "bf16"]

GATE_SCALE = 0.4  # the cheap first look's size, when `ocr.text_gate` turns it on
_REC_HEIGHT = 48  # PP-OCR recognition models take 48-pixel-high text lines


@dataclass(frozen=True, slots=True)
class OcrTuning:
    """How the rapidocr models run. `OcrTuning()` is the fast default; `OcrTuning.legacy()`
    is the first wave's settings (kept for comparison and as a fallback).

    - `pipeline`: "fast" drives the PP-OCR models itself (below); "rapidocr" goes through the
      `RapidOCR` object as the first wave did.
    - `runtime`: "auto" takes OpenVINO when it is importable (and loads), else onnxruntime.
      OpenVINO runs in bf16 on CPUs that have it (`ov_precision` "auto"; AVX512-BF16/AMX),
      ~1.5x faster than its own fp32 or onnxruntime's; in fp32 the two are about even.
    - `det_limit_type`/`det_limit_side_len`: the detector's input size, as rapidocr's
      `Det.limit_type`/`limit_side_len`: "min"/736 scales the short side up to 736.
    - `det_max_upscale`: but by at most this factor (None: no cap, rapidocr's behaviour).
      Uncapped, a 640x120 strip is detected at 3923x736 and a 300x200 photo at 1104x736,
      at 6-36x the cost; the box geometry of images near 736 stays exactly as before.
    - `rec_batch`: text lines recognised per model call. The fast pipeline sorts lines by
      aspect ratio (a batch is padded to its widest line) and checks the deadline between
      calls. 1 is fastest on CPU: no padding at all; 8 cost ~15% more, 32 ~60% more.
    - `rec_min_width`: the narrowest recognition input (rapidocr pads every line to 320,
      so "12" costs as much as a 7-word line; 96 reads the same text on the corpus).
    - `rec_width_step`: recognition inputs are padded to a multiple of this width, so a
      long-running process meets few distinct input shapes (OpenVINO prepares each new
      shape once, ~5 ms); `warm_up` runs every width up to `rec_warm_width` once.
    - `mem_arena`: onnxruntime's CPU memory arena (rapidocr turns it off; every run then
      allocates and page-faults its buffers afresh: 2-2.5x slower detection).
    - `gate_scale`, `gate_min_side`: the cheap first look (`gate_scale` 0: off). An image is
      first looked at with the same detector at `gate_scale` of its size (its long side at
      least `gate_min_side`), when that is under half the full detection input's pixels; an
      area-averaged downscale, so small text blurs rather than aliases, looked at as it is and
      with local contrast equalised (pale text), with lower thresholds than the full pass, so
      faint and small text still leaves a box. No
      candidate box: no text, full detection and recognition are skipped. Candidates are
      read from the full-resolution pixels, largest first; the first that reads as text
      (two or more letters or digits at `min_score`) sends the image to the full pass, as
      do more than `gate_probe_lines` candidates. Photos, X-rays and fundus images cost
      one small detection (and a few line reads where edges look like text).
      Off by default: on photos with pale text (ink at 30-60% contrast, 12-28 px) the small
      looks miss text that full OCR reads (7-14 of 16 such captions, at scales 0.4-0.6,
      `tests/models/test_ocr_text_gate.py`); black text, small or rotated, is not missed.
    """

    pipeline: OcrPipeline = "fast"
    runtime: OcrRuntime = "auto"
    det_limit_type: DetLimitType = "min"
    det_limit_side_len: int = 736
    det_max_upscale: float | None = 1.25
    rec_batch: int = 1
    rec_min_width: int = 96
    rec_width_step: int = 64
    rec_warm_width: int = 1600
    mem_arena: bool = True
    ov_precision: OvPrecision = "auto"
    gate_scale: float = 0.0
    gate_min_side: int = 320
    gate_probe_lines: int = 8

    def __post_init__(self) -> None:
        errors = []
        if self.pipeline not in ("fast", "rapidocr"):
            errors.append(f"pipeline must be 'fast' or 'rapidocr', got {self.pipeline!r}")
        if self.runtime not in ("auto", "onnxruntime", "openvino"):
            errors.append(f"runtime must be 'auto', 'onnxruntime' or 'openvino', got {self.runtime!r}")
        if self.det_limit_type not in ("min", "max"):
            errors.append(f"det_limit_type must be 'min' or 'max', got {self.det_limit_type!r}")
        if not _is_int(self.det_limit_side_len) or not 32 <= self.det_limit_side_len <= 4096:
            errors.append(f"det_limit_side_len must be an integer in [32, 4096], got {self.det_limit_side_len!r}")
        if self.det_max_upscale is not None and (
            isinstance(self.det_max_upscale, bool)
            or not isinstance(self.det_max_upscale, int | float)
            or not 1.0 <= self.det_max_upscale <= 8.0
        ):
            errors.append(f"det_max_upscale must be None or a number in [1, 8], got {self.det_max_upscale!r}")
        if self.pipeline == "rapidocr" and self.det_max_upscale is not None:
            errors.append("det_max_upscale needs pipeline 'fast' (rapidocr's own resize has no cap)")
        if not _is_int(self.rec_batch) or not 1 <= self.rec_batch <= 64:
            errors.append(f"rec_batch must be an integer in [1, 64], got {self.rec_batch!r}")
        if not _is_int(self.rec_min_width) or not _REC_HEIGHT <= self.rec_min_width <= 2048:
            errors.append(f"rec_min_width must be an integer in [{_REC_HEIGHT}, 2048], got {self.rec_min_width!r}")
        if not _is_int(self.rec_width_step) or not 1 <= self.rec_width_step <= 256:
            errors.append(f"rec_width_step must be an integer in [1, 256], got {self.rec_width_step!r}")
        if not _is_int(self.rec_warm_width) or not 0 <= self.rec_warm_width <= 4096:
            errors.append(f"rec_warm_width must be an integer in [0, 4096], got {self.rec_warm_width!r}")
        if not isinstance(self.mem_arena, bool):
            errors.append(f"mem_arena must be a bool, got {self.mem_arena!r}")
        if self.ov_precision not in ("auto", "f32", "bf16"):
            errors.append(f"ov_precision must be 'auto', 'f32' or 'bf16', got {self.ov_precision!r}")
        if (
            isinstance(self.gate_scale, bool)
            or not isinstance(self.gate_scale, int | float)
            or not (self.gate_scale == 0 or 0.1 <= self.gate_scale <= 0.7)
        ):
            errors.append(f"gate_scale must be 0 (off) or a number in [0.1, 0.7], got {self.gate_scale!r}")
        if not _is_int(self.gate_min_side) or not 64 <= self.gate_min_side <= 2048:
            errors.append(f"gate_min_side must be an integer in [64, 2048], got {self.gate_min_side!r}")
        if not _is_int(self.gate_probe_lines) or not 0 <= self.gate_probe_lines <= 64:
            errors.append(f"gate_probe_lines must be an integer in [0, 64], got {self.gate_probe_lines!r}")
        if self.pipeline == "rapidocr" and self.gate_scale:
            errors.append("gate_scale needs pipeline 'fast' (set it to 0 with the rapidocr pipeline)")
        if self.pipeline == "rapidocr" and self.runtime == "openvino":
            errors.append("runtime 'openvino' needs pipeline 'fast' (the rapidocr pipeline runs onnxruntime)")
        if errors:
            raise ValueError("invalid OCR tuning: " + "; ".join(errors))

    @classmethod
    def legacy(cls) -> OcrTuning:
        """The first wave's settings: rapidocr defaults, angle classifier off, batches of 6 in detection order."""
        return cls(
            pipeline="rapidocr", runtime="onnxruntime", det_limit_type="min", det_limit_side_len=736,
            det_max_upscale=None, rec_batch=6, rec_min_width=320, rec_width_step=1, rec_warm_width=0, mem_arena=False,
            gate_scale=0,
        )  # fmt: skip

    @classmethod
    def gated(cls, **changes: Any) -> OcrTuning:
        """The defaults with the cheap first look on (`ocr.text_gate: true`; off by default: see below)."""
        return cls(**({"gate_scale": GATE_SCALE} | changes))

    def describe(self) -> str:
        if self.pipeline == "rapidocr":
            return f"rapidocr pipeline, det {self.det_limit_type}/{self.det_limit_side_len}, rec batch {self.rec_batch}"
        cap = "" if self.det_max_upscale is None else f" upscale<={self.det_max_upscale:g}"
        return (
            f"fast pipeline ({self.runtime}), det {self.det_limit_type}/{self.det_limit_side_len}{cap}, "
            f"rec batch {self.rec_batch} sorted, width >= {self.rec_min_width} step {self.rec_width_step}, "
            f"warmed to {self.rec_warm_width}, arena={self.mem_arena}"
            + ("" if self.ov_precision == "auto" else f", openvino {self.ov_precision}")
            + (
                f", text gate x{self.gate_scale:g} (>= {self.gate_min_side}px), {self.gate_probe_lines} probes"
                if self.gate_scale
                else ", no text gate"
            )
        )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def openvino_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("openvino") is not None


@dataclass(slots=True)
class OcrEngineStats:
    """Counters an engine keeps (read them in tests and benches; no locking beyond the engine's)."""

    images: int = 0  # images run through detection
    det_empty: int = 0  # images where detection found no text box: recognition skipped
    rec_calls: int = 0  # recognition model calls (batches)
    lines_read: int = 0  # text lines recognised
    lines_skipped: int = 0  # text lines left unread by the deadline
    gate_looks: int = 0  # images given the cheap first look
    gate_skipped: int = 0  # of those, judged free of text: full detection and recognition skipped
    gate_probes: int = 0  # candidate lines the first look read


ModelFn = Callable[["NDArray[np.float32]"], "NDArray[np.float32]"]


def _rapidocr_model_files() -> tuple[Path, Path]:
    """The detection and recognition ONNX files the rapidocr wheel ships (what its defaults load)."""
    import rapidocr

    folder = Path(rapidocr.__file__).resolve().parent / "models"
    found = []
    for task in ("det", "rec"):
        candidates = sorted(folder.glob(f"*_{task}_*.onnx"))
        if len(candidates) != 1:
            raise FileNotFoundError(f"expected one {task} model in {folder}, found {[c.name for c in candidates]}")
        found.append(candidates[0])
    return found[0], found[1]


def _ort_model(
    path: Path, threads: int | None, arena: bool, shrink_above: int | None = None
) -> tuple[ModelFn, list[str] | None]:
    """An onnxruntime session as a function, and the model's character list (if it carries one)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.enable_cpu_mem_arena = arena
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.inter_op_num_threads = 1
    if threads is not None:
        opts.intra_op_num_threads = threads
    # The arena grows by what a run asks for (as rapidocr configures it). The speed comes from
    # reusing buffers within a run (a 1600x1600 detection: 1.8 s without the arena, 0.7 s with
    # it); a run whose input has more than `shrink_above` values shrinks the arena afterwards,
    # so a large image's ~500 MB go back (shrinking after every run costs ~15% more CPU).
    provider = ("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"})
    session = ort.InferenceSession(str(path), sess_options=opts, providers=[provider])
    keep = ort.RunOptions()
    shrink = ort.RunOptions()
    shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    limit = shrink_above if arena and shrink_above is not None else None
    input_name = session.get_inputs()[0].name
    output_name = session.get_outputs()[0].name
    meta = session.get_modelmeta().custom_metadata_map
    chars = meta["character"].splitlines() if "character" in meta else None

    def run(x: NDArray[np.float32]) -> NDArray[np.float32]:
        options = shrink if limit is not None and x.size > limit else keep
        out: NDArray[np.float32] = session.run([output_name], {input_name: x}, options)[0]
        return out

    return run, chars


def _ov_model(path: Path, threads: int | None, precision: OvPrecision) -> tuple[ModelFn, list[str] | None]:
    """An OpenVINO CPU model as a function (one infer request: callers hold the engine lock)."""
    import importlib

    ov: Any = importlib.import_module("openvino")
    core = ov.Core()
    model = core.read_model(str(path))
    config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "ENABLE_CPU_PINNING": False}
    if threads is not None:
        config["INFERENCE_NUM_THREADS"] = threads
    if precision != "auto":
        config["INFERENCE_PRECISION_HINT"] = precision
    request = core.compile_model(model, "CPU", config).create_infer_request()
    chars: list[str] | None
    try:
        chars = str(model.get_rt_info(["framework", "character"]).astype(str)).splitlines()
    except Exception:  # no such entry (a detection model)
        chars = None

    def run(x: NDArray[np.float32]) -> NDArray[np.float32]:
        request.infer([x])
        out: NDArray[np.float32] = request.get_output_tensor(0).data.copy()
        return out

    return run, chars


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
        if threads is not None and (not _is_int(threads) or threads < 1):
            raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
        self.tuning = tuning
        self.runtime = "onnxruntime"
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
        from rapidocr.ch_ppocr_det.utils import DBPostProcess
        from rapidocr.ch_ppocr_rec.utils import CTCLabelDecode

        t = self.tuning
        runtime = t.runtime
        chars: list[str] | None = None
        det_path, rec_path = _rapidocr_model_files()
        if runtime == "auto":
            runtime = "onnxruntime"
            if openvino_available():
                try:
                    self._det, _ = _ov_model(det_path, threads, t.ov_precision)
                    self._rec, chars = _ov_model(rec_path, threads, t.ov_precision)
                    runtime = "openvino"
                except Exception as exc:  # a broken install must not take OCR down: onnxruntime reads the same
                    log.warning("OpenVINO could not load the OCR models (%s); using onnxruntime", exc)
        elif runtime == "openvino":
            self._det, _ = _ov_model(det_path, threads, t.ov_precision)
            self._rec, chars = _ov_model(rec_path, threads, t.ov_precision)
        if runtime == "onnxruntime":
            # Detection on more than ~1 megapixel gives its arena back; recognition's buffers are small.
            self._det, _ = _ort_model(det_path, threads, t.mem_arena, shrink_above=3 * 1024 * 1024)
            self._rec, chars = _ort_model(rec_path, threads, t.mem_arena)
        if not chars:
            raise ValueError(f"{rec_path.name} carries no character list")
        self.runtime = runtime
        # rapidocr's config.yaml values for the DB post-processing.
        self._det_post = DBPostProcess(
            thresh=0.3, box_thresh=0.5, max_candidates=1000, unclip_ratio=1.6, use_dilation=True, score_mode="fast"
        )
        self._decode = CTCLabelDecode(character=chars)
        # The first look's post-processing: lower thresholds than the full pass, so that small
        # or faint text downscaled to the look's size still leaves a candidate box.
        self._gate_post = DBPostProcess(
            thresh=0.15, box_thresh=0.25, max_candidates=1000, unclip_ratio=1.6, use_dilation=True, score_mode="fast"
        )
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
                self._rec(np.zeros((1, 3, _REC_HEIGHT, width), dtype=np.float32))
        self.stats = OcrEngineStats()

    # ---------------------------------------------------------------- recognition

    def recognize(self, image: Image.Image, deadline: float | None = None) -> tuple[list[OcrBox], bool]:
        import numpy as np

        bgr = np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])
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
        if det_in is not None:
            found, _ = self._det_post(self._det(det_in), img.shape[:2])
            if len(found):
                boxes = TextDetector.sorted_boxes(np.asarray(found))
        if boxes is None:
            self.stats.det_empty += 1  # nothing to read: recognition is skipped
            return [], [], [], False
        crops = [get_rotate_crop_image(img, box.copy()) for box in boxes]
        texts, scores, truncated = self._recognize_lines(crops, deadline)
        quads = map_boxes_to_original(boxes.astype("float32"), op_record, h, w)
        return list(quads), texts, scores, truncated

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
        found = [box for i in range(len(maps)) for box in self._gate_post(maps[i : i + 1], img.shape[:2])[0]]
        if not len(found):
            return False
        if len(found) > self.tuning.gate_probe_lines:
            return True
        quads = sorted(np.asarray(found, dtype=np.float32), key=_quad_area, reverse=True)
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
        import cv2
        import numpy as np

        resize_h, resize_w = self._det_size(img.shape[0], img.shape[1])
        if resize_h <= 0 or resize_w <= 0:
            return None
        resized = cv2.resize(img, (resize_w, resize_h)).astype(np.float32)
        x: NDArray[np.float32] = (resized / 127.5 - 1.0).transpose((2, 0, 1))[np.newaxis]
        return np.ascontiguousarray(x)

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
        min_ratio = self.tuning.rec_min_width / _REC_HEIGHT
        for start in range(0, len(order), batch):
            if deadline is not None and time.monotonic() >= deadline:
                self.stats.lines_skipped += len(order) - start
                return texts, scores, True
            idx = order[start : start + batch]
            max_ratio = max(min_ratio, max(ratios[i] for i in idx))
            width = int(_REC_HEIGHT * max_ratio)
            width = -(-width // self.tuning.rec_width_step) * self.tuning.rec_width_step
            x = np.zeros((len(idx), 3, _REC_HEIGHT, width), dtype=np.float32)
            for row, i in enumerate(idx):
                resized_w = min(width, math.ceil(_REC_HEIGHT * ratios[i]))
                line = cv2.resize(crops[i], (max(1, resized_w), _REC_HEIGHT)).astype(np.float32)
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


def _quad_area(quad: NDArray[np.float32]) -> float:
    import cv2

    return float(cv2.contourArea(quad))


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
            raise OcrTimeout(f"OCR ran out of its {self.budget_s * 1000:.0f} ms budget before reading any text")
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
    rapidocr settings), `ocr.runtime` (auto: OpenVINO when installed, else onnxruntime) and
    `ocr.text_gate` (the cheap first look; off: every image gets full OCR)."""
    if settings.preset == "legacy":
        return OcrTuning.legacy()
    tuning = OcrTuning(runtime=settings.runtime)
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
