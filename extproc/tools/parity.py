"""Parity harness: our image path against the reference, image by image, by measurement.

Reference: transformers' own image processor (the PIL backend, no torchvision) and the
model in fp32, pooled output of `get_image_features`. Ours: the production path, bytes ->
`extproc.images` intake (EXIF transpose) -> our preprocessing -> the encoder at the chosen
precision. For every image it records the pixel tensors' max absolute difference and the
embeddings' cosine. It fails when the minimum cosine is under the threshold (fp32 0.9999,
fast path 0.999) or the pixel tensors differ beyond a tolerance: random test weights barely
react to the resize filter, so resize fidelity is held on the pixels, not only the embeddings.

`drift` injects one of the three historical drifts into our path (no normalisation,
bilinear resize, mean pooling instead of the attention head) to show the harness catches it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from extproc.images import ImageLimits, inspect_image
from extproc.models.preprocess import PixelInputs
from extproc.models.siglip import Precision, VisionEncoder, inspect_checkpoint

Drift = Literal["none", "no_normalize", "bilinear", "mean_pool"]
DRIFTS: tuple[Drift, ...] = ("none", "no_normalize", "bilinear", "mean_pool")
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})
MIN_COSINE: dict[str, float] = {"fp32": 0.9999, "bf16": 0.999}
COUNT_AT = 0.999  # the report counts images at or above this cosine
PIXEL_TOLERANCE = 1e-4
# Corpus images can be large; the harness checks fidelity, not request limits.
HARNESS_LIMITS = ImageLimits(max_bytes=64 * 1024 * 1024, max_pixels=100_000_000)


@dataclass(frozen=True, slots=True)
class ParityRow:
    name: str
    size: tuple[int, int]
    mode: str
    pixel_max_abs_diff: float
    cosine: float
    error: str | None = None


@dataclass(slots=True)
class ParityReport:
    precision: str
    drift: str
    min_cosine_required: float
    pixel_tolerance: float
    rows: list[ParityRow] = field(default_factory=list)

    @property
    def cosines(self) -> list[float]:
        return [r.cosine for r in self.rows if r.error is None]

    @property
    def min_cosine(self) -> float:
        return min(self.cosines, default=float("nan"))

    @property
    def mean_cosine(self) -> float:
        c = self.cosines
        return sum(c) / len(c) if c else float("nan")

    @property
    def count_at_threshold(self) -> int:
        return sum(1 for c in self.cosines if c >= COUNT_AT)

    @property
    def max_pixel_diff(self) -> float:
        return max((r.pixel_max_abs_diff for r in self.rows if r.error is None), default=float("nan"))

    def failures(self) -> list[str]:
        problems = [f"{r.name}: {r.error}" for r in self.rows if r.error is not None]
        if not self.rows:
            problems.append("no images")
        low = [r for r in self.rows if r.error is None and not r.cosine >= self.min_cosine_required]
        if low:
            problems.append(
                f"{len(low)} image(s) under cosine {self.min_cosine_required}: "
                + ", ".join(f"{r.name}={r.cosine:.5f}" for r in low[:5])
            )
        far = [r for r in self.rows if r.error is None and not r.pixel_max_abs_diff <= self.pixel_tolerance]
        if far:
            problems.append(
                f"{len(far)} image(s) with pixel tensors off by more than {self.pixel_tolerance:g}: "
                + ", ".join(f"{r.name}={r.pixel_max_abs_diff:.4g}" for r in far[:5])
            )
        return problems

    @property
    def passed(self) -> bool:
        return not self.failures()

    def format(self) -> str:
        lines = [
            f"parity: ours ({self.precision}, drift: {self.drift}) vs reference "
            f"(transformers PIL image processor + fp32 model), {len(self.rows)} images",
            f"{'image':34} {'size':>11} {'mode':>5} {'pixel max|d|':>13} {'cosine':>10}",
        ]
        for r in self.rows:
            size = f"{r.size[0]}x{r.size[1]}"
            if r.error is not None:
                lines.append(f"{r.name:34} {size:>11} {r.mode:>5}  ERROR {r.error}")
            else:
                lines.append(f"{r.name:34} {size:>11} {r.mode:>5} {r.pixel_max_abs_diff:13.3g} {r.cosine:10.6f}")
        lines.append(
            f"min cosine {self.min_cosine:.6f}  mean {self.mean_cosine:.6f}  "
            f">= {COUNT_AT}: {self.count_at_threshold}/{len(self.rows)}  max pixel diff {self.max_pixel_diff:.3g}"
        )
        verdict = "PASS" if self.passed else "FAIL: " + "; ".join(self.failures())
        lines.append(
            f"{verdict} (required: min cosine >= {self.min_cosine_required}, pixel diff <= {self.pixel_tolerance:g})"
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "drift": self.drift,
            "min_cosine": self.min_cosine,
            "mean_cosine": self.mean_cosine,
            "count_at_0999": self.count_at_threshold,
            "images": len(self.rows),
            "max_pixel_diff": self.max_pixel_diff,
            "passed": self.passed,
            "failures": self.failures(),
        }


class ReferencePath:
    """transformers' own image processor (PIL backend) and the fp32 model."""

    def __init__(self, model_dir: Path | str) -> None:
        import torch
        from transformers import AutoImageProcessor, AutoModel

        path = str(Path(model_dir).expanduser())
        auto_processor: Any = AutoImageProcessor  # untyped in transformers
        self.processor = auto_processor.from_pretrained(path, backend="pil", local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True, dtype=torch.float32).eval()

    @staticmethod
    def open(path: Path) -> Any:
        """The image as a transformers user would decode it: PIL, EXIF orientation applied, mode kept.

        (`transformers.image_utils.load_image` would also apply EXIF, but then converts with a
        plain `.convert("RGB")`, which turns transparent pixels black instead of letting the
        processor composite them onto white.)
        """
        from PIL import Image, ImageOps

        with Image.open(path) as img:
            img.load()
            return ImageOps.exif_transpose(img)

    def inputs(self, image: Any) -> dict[str, Any]:
        # SigLIP2's processor config leaves RGB conversion off (and then fails on L, LA, RGBA,
        # CMYK input); ask for transformers' own conversion, which composites onto white.
        return dict(self.processor(images=[image], do_convert_rgb=True, return_tensors="pt"))

    def embed(self, inputs: dict[str, Any]) -> np.ndarray[Any, np.dtype[np.float32]]:
        import torch

        with torch.inference_mode():
            out = self.model.get_image_features(**inputs)
        pooled = out.pooler_output if hasattr(out, "pooler_output") else out
        vector = pooled[0].float().numpy()
        result: np.ndarray[Any, np.dtype[np.float32]] = vector / max(float(np.linalg.norm(vector)), 1e-12)
        return result


def corpus_files(images_dir: Path | str) -> list[Path]:
    root = Path(images_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"image directory {root} does not exist")
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def drifted_encoder(
    model_dir: Path | str, precision: Precision, drift: Drift, *, threads: int | None = None
) -> VisionEncoder:
    """Our encoder, with one historical drift injected (or none)."""
    from PIL import Image

    info = inspect_checkpoint(model_dir)
    preprocess = info.preprocess
    if drift == "no_normalize":
        preprocess = preprocess.with_drift(normalize=False)
    elif drift == "bilinear":
        bilinear = int(Image.Resampling.BILINEAR)
        # A checkpoint that itself asks for bilinear drifts to bicubic instead.
        preprocess = preprocess.with_drift(
            resample=bilinear if preprocess.resample != bilinear else int(Image.Resampling.BICUBIC)
        )
    return VisionEncoder.load(
        model_dir,
        precision=precision,
        pooling="mean" if drift == "mean_pool" else "head",
        cache_size=0,
        threads=threads,
        preprocess=preprocess,
    )


def _pixel_diff(ours: PixelInputs, reference: dict[str, Any]) -> float:
    ref = reference["pixel_values"][0].numpy()
    if ours.spatial_shape is not None:
        ref_shape = tuple(int(v) for v in reference["spatial_shapes"][0])
        if ref_shape != ours.spatial_shape:
            return math.inf
    if ref.shape != ours.pixel_values.shape:
        return math.inf
    return float(np.abs(ours.pixel_values - ref).max())


def run_parity(
    model_dir: Path | str,
    images: Path | str | Iterable[Path],
    *,
    precision: Precision = "fp32",
    drift: Drift = "none",
    threads: int | None = None,
    min_cosine: float | None = None,
    pixel_tolerance: float = PIXEL_TOLERANCE,
    reference: ReferencePath | None = None,
) -> ParityReport:
    files: Sequence[Path] = corpus_files(images) if isinstance(images, Path | str) else list(images)
    ours = drifted_encoder(model_dir, precision, drift, threads=threads)
    ref = reference or ReferencePath(model_dir)
    report = ParityReport(
        precision=precision,
        drift=drift,
        min_cosine_required=MIN_COSINE[precision] if min_cosine is None else min_cosine,
        pixel_tolerance=pixel_tolerance,
    )
    for path in files:
        data = path.read_bytes()
        try:
            decoded = inspect_image(data, declared_mime="", limits=HARNESS_LIMITS, message_index=0)
            pixels = ours.preprocess(decoded.pixels())
            ours_vec = ours.embed_pixels([pixels])[0]
            ref_inputs = ref.inputs(ReferencePath.open(path))
            ref_vec = ref.embed(ref_inputs)
        except Exception as exc:  # a harness reports, per image, rather than stopping
            error = f"{type(exc).__name__}: {exc}"
            report.rows.append(ParityRow(path.name, (0, 0), "?", math.inf, float("nan"), error))
            continue
        report.rows.append(
            ParityRow(
                name=path.name,
                size=(decoded.width, decoded.height),
                mode=decoded.mode,
                pixel_max_abs_diff=_pixel_diff(pixels, ref_inputs),
                cosine=float(np.dot(ours_vec.astype(np.float64), ref_vec.astype(np.float64))),
            )
        )
    return report
