"""How the PP-OCR models run: `OcrTuning` (pipeline, runtime, input sizes, the text gate), the
engine's counters, and the model files the rapidocr wheel ships as onnxruntime or OpenVINO
functions. `ocr.RapidOcrEngine` drives them; `OcrTuning` stays importable from `ocr`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

OcrPipeline = Literal["fast", "rapidocr"]
OcrRuntime = Literal["auto", "onnxruntime", "openvino"]
DetLimitType = Literal["min", "max"]
OvPrecision = Literal["auto", "f32", "bf16"]
DetPrecision = Literal["fp32", "int8"]

# Detection inputs up to this many pixels keep onnxruntime's arena between runs (`det_arena_keep_px`).
DET_ARENA_KEEP_PX = 1024 * 1024
GATE_SCALE = 0.4  # the cheap first look's size, when `ocr.text_gate` turns it on
REC_HEIGHT = 48  # PP-OCR recognition models take 48-pixel-high text lines
# Candidate text regions the full pass examines in one image (rapidocr's own cap is 1,000, and it
# drops the rest unseen). Beyond this the read is reported truncated, never as "no text".
MAX_TEXT_CANDIDATES = 20_000


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
    - `det_precision`: "int8" runs detection (onnxruntime only) through the int8 copy of the
      wheel's detector shipped in `models/weights/ocr/` (static QDQ quantization, weights per
      channel; see its README): 2-3x faster than fp32 on CPUs with VNNI/AMX, and on the OCR
      corpus it changes no routing label (`tests/models/test_ocr_int8.py`). It is used only
      while its recorded source hash matches the wheel's detector; otherwise fp32, with a
      warning. OpenVINO runs the fp32 detector (in bf16 where it can).
    - `mem_arena`: onnxruntime's CPU memory arena (rapidocr turns it off; every run then
      allocates and page-faults its buffers afresh: 2-2.5x slower detection).
    - `det_arena_keep_px`: with the arena on, a detection input of more pixels than this gives
      the arena back after its run, so a large image's buffers (hundreds of MB) do not stay
      resident; the next such image then page-faults them afresh. Raise it on hosts with memory
      to spare to keep large detections fast; 0 gives every detection's arena back.
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
    det_arena_keep_px: int = DET_ARENA_KEEP_PX
    det_precision: DetPrecision = "int8"
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
        if not is_int(self.det_limit_side_len) or not 32 <= self.det_limit_side_len <= 4096:
            errors.append(f"det_limit_side_len must be an integer in [32, 4096], got {self.det_limit_side_len!r}")
        if self.det_max_upscale is not None and (
            isinstance(self.det_max_upscale, bool)
            or not isinstance(self.det_max_upscale, int | float)
            or not 1.0 <= self.det_max_upscale <= 8.0
        ):
            errors.append(f"det_max_upscale must be None or a number in [1, 8], got {self.det_max_upscale!r}")
        if self.pipeline == "rapidocr" and self.det_max_upscale is not None:
            errors.append("det_max_upscale needs pipeline 'fast' (rapidocr's own resize has no cap)")
        if not is_int(self.rec_batch) or not 1 <= self.rec_batch <= 64:
            errors.append(f"rec_batch must be an integer in [1, 64], got {self.rec_batch!r}")
        if not is_int(self.rec_min_width) or not REC_HEIGHT <= self.rec_min_width <= 2048:
            errors.append(f"rec_min_width must be an integer in [{REC_HEIGHT}, 2048], got {self.rec_min_width!r}")
        if not is_int(self.rec_width_step) or not 1 <= self.rec_width_step <= 256:
            errors.append(f"rec_width_step must be an integer in [1, 256], got {self.rec_width_step!r}")
        if not is_int(self.rec_warm_width) or not 0 <= self.rec_warm_width <= 4096:
            errors.append(f"rec_warm_width must be an integer in [0, 4096], got {self.rec_warm_width!r}")
        if not isinstance(self.mem_arena, bool):
            errors.append(f"mem_arena must be a bool, got {self.mem_arena!r}")
        if not is_int(self.det_arena_keep_px) or self.det_arena_keep_px < 0:
            errors.append(f"det_arena_keep_px must be an integer >= 0, got {self.det_arena_keep_px!r}")
        if self.det_precision not in ("fp32", "int8"):
            errors.append(f"det_precision must be 'fp32' or 'int8', got {self.det_precision!r}")
        if self.pipeline == "rapidocr" and self.det_precision == "int8":
            errors.append("det_precision 'int8' needs pipeline 'fast' (the rapidocr pipeline loads its fp32 models)")
        if self.ov_precision not in ("auto", "f32", "bf16"):
            errors.append(f"ov_precision must be 'auto', 'f32' or 'bf16', got {self.ov_precision!r}")
        if (
            isinstance(self.gate_scale, bool)
            or not isinstance(self.gate_scale, int | float)
            or not (self.gate_scale == 0 or 0.1 <= self.gate_scale <= 0.7)
        ):
            errors.append(f"gate_scale must be 0 (off) or a number in [0.1, 0.7], got {self.gate_scale!r}")
        if not is_int(self.gate_min_side) or not 64 <= self.gate_min_side <= 2048:
            errors.append(f"gate_min_side must be an integer in [64, 2048], got {self.gate_min_side!r}")
        if not is_int(self.gate_probe_lines) or not 0 <= self.gate_probe_lines <= 64:
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
            det_precision="fp32", gate_scale=0,
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
            f"warmed to {self.rec_warm_width}, arena={self.mem_arena}, det {self.det_precision}"
            + ("" if self.ov_precision == "auto" else f", openvino {self.ov_precision}")
            + (
                f", text gate x{self.gate_scale:g} (>= {self.gate_min_side}px), {self.gate_probe_lines} probes"
                if self.gate_scale
                else ", no text gate"
            )
        )


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def openvino_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("openvino") is not None


@dataclass(slots=True)
class OcrEngineStats:
    """Counters an engine keeps (read them in tests and benches; no locking beyond the engine's)."""

    images: int = 0  # images run through detection
    det_empty: int = 0  # images where detection found no text box: recognition skipped
    det_overflow: int = 0  # detector maps (full pass or first look) with more candidate regions than the bound
    rec_calls: int = 0  # recognition model calls (batches)
    lines_read: int = 0  # text lines recognised
    lines_skipped: int = 0  # text lines left unread by the deadline
    gate_looks: int = 0  # images given the cheap first look
    gate_skipped: int = 0  # of those, judged free of text: full detection and recognition skipped
    gate_probes: int = 0  # candidate lines the first look read


ModelFn = Callable[["NDArray[np.float32]"], "NDArray[np.float32]"]


def rapidocr_model_files() -> tuple[Path, Path]:
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


INT8_DETECTOR = Path(__file__).resolve().parent / "weights" / "ocr" / "PP-OCRv6_det_small.int8.onnx"


def int8_detector(source: Path) -> Path | None:
    """The shipped int8 copy of `source` (the wheel's fp32 detector), or None with a warning when
    it is missing or was made from another detector (a rapidocr upgrade that changed the model)."""
    import hashlib
    import json
    import logging

    meta_path = INT8_DETECTOR.with_suffix(".json")
    try:
        meta = json.loads(meta_path.read_text())
        recorded, shipped = meta["source_sha256"], meta["sha256"]
        model_hash = hashlib.sha256(INT8_DETECTOR.read_bytes()).hexdigest()
    except (OSError, ValueError, KeyError) as exc:
        logging.getLogger(__name__).warning("int8 OCR detector unavailable (%s); detection runs in fp32", exc)
        return None
    source_hash = hashlib.sha256(source.read_bytes()).hexdigest()
    if source_hash != recorded or model_hash != shipped:
        logging.getLogger(__name__).warning(
            "int8 OCR detector %s was made from another detector than %s (sha256 %s, recorded %s); "
            "detection runs in fp32 (re-run extproc/testing/quantize_ocr.py)",
            INT8_DETECTOR.name, source.name, source_hash[:12], recorded[:12],
        )  # fmt: skip
        return None
    return INT8_DETECTOR


def ort_model(
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


def ov_model(path: Path, threads: int | None, precision: OvPrecision) -> tuple[ModelFn, list[str] | None]:
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
