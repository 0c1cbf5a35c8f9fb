"""Our image preprocessing for SigLIP-family encoders: PIL + numpy, driven by the checkpoint.

Every number comes from the checkpoint's processor config (size, resample filter, rescale
factor, mean, std, NaFlex patch size and patch budget); nothing is hard-coded. The steps
follow the reference processor exactly, because each past drift was one of them:

1. EXIF orientation applied (a no-op for images from `DecodedImage.pixels()`, which did it);
2. colour to RGB, with any transparency composited onto white (a naive `.convert("RGB")`
   of an RGBA image keeps the colour under transparent pixels, usually black);
3. resize with PIL at the checkpoint's filter (bicubic for SigLIP; PIL antialiases when it
   shrinks) to the checkpoint's size, or, for SigLIP2 NaFlex, to the largest patch grid
   that keeps the aspect ratio within the patch budget;
4. rescale and normalise, `(x * rescale - mean) / std` (SigLIP: `(x / 255 - 0.5) / 0.5`),
   through a 256-entry lookup table computed with the reference's own float arithmetic,
   so the result is bit-identical and costs one gather per channel.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageOps

FloatArray = npt.NDArray[np.float32]

_ORIENTATION = 0x0112  # EXIF Orientation tag
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")


class PreprocessConfigError(ValueError):
    """The checkpoint's processor config is missing or says something we cannot follow."""


@dataclass(frozen=True, slots=True)
class PreprocessConfig:
    """What the checkpoint's image processor asks for."""

    mode: Literal["fixed", "naflex"]
    height: int = 0  # fixed mode: output size
    width: int = 0
    patch_size: int = 0  # naflex mode: patch side and the patch budget per image
    max_num_patches: int = 0
    resample: int = int(Image.Resampling.BICUBIC)
    do_resize: bool = True
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    # Conversion to RGB (transparency onto white) always happens: the towers take 3 channels.

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str = "processor config") -> PreprocessConfig:
        ptype = str(raw.get("image_processor_type", ""))
        naflex = "max_num_patches" in raw or ptype.startswith("Siglip2")
        common: dict[str, Any] = {
            "resample": int(raw.get("resample", Image.Resampling.BICUBIC if not naflex else Image.Resampling.BILINEAR)),
            "do_resize": bool(raw.get("do_resize", True)),
            "do_rescale": bool(raw.get("do_rescale", True)),
            "rescale_factor": float(raw.get("rescale_factor", 1 / 255)),
            "do_normalize": bool(raw.get("do_normalize", True)),
            "mean": _triple(raw.get("image_mean", 0.5), "image_mean", source),
            "std": _triple(raw.get("image_std", 0.5), "image_std", source),
        }
        if naflex:
            patch = int(raw.get("patch_size", 16))
            budget = int(raw.get("max_num_patches", 256))
            if patch <= 0 or budget <= 0:
                raise PreprocessConfigError(f"{source}: patch_size and max_num_patches must be positive")
            return cls(mode="naflex", patch_size=patch, max_num_patches=budget, **common)
        size = raw.get("size")
        if not isinstance(size, Mapping) or "height" not in size or "width" not in size:
            raise PreprocessConfigError(f"{source}: size must give height and width, got {size!r}")
        if raw.get("do_center_crop"):
            raise PreprocessConfigError(f"{source}: center cropping is not part of the SigLIP pipeline")
        return cls(mode="fixed", height=int(size["height"]), width=int(size["width"]), **common)

    @classmethod
    def from_dir(cls, model_dir: Path) -> PreprocessConfig:
        for name in PROCESSOR_FILES:
            path = model_dir / name
            if not path.is_file():
                continue
            raw = json.loads(path.read_text(encoding="utf-8"))
            if name == "processor_config.json":
                raw = raw.get("image_processor", raw)
            if not isinstance(raw, dict):
                raise PreprocessConfigError(f"{path}: not a JSON object")
            return cls.from_dict(raw, source=str(path))
        raise PreprocessConfigError(
            f"{model_dir}: no image processor config ({' or '.join(PROCESSOR_FILES)}); "
            "refusing to guess the input size and normalisation"
        )

    def with_drift(self, *, normalize: bool | None = None, resample: int | None = None) -> PreprocessConfig:
        """A deliberately altered copy, for the parity harness's drift injection."""
        return replace(
            self,
            do_normalize=self.do_normalize if normalize is None else normalize,
            resample=self.resample if resample is None else resample,
        )


def _triple(value: Any, name: str, source: str) -> tuple[float, float, float]:
    if isinstance(value, int | float):
        return (float(value), float(value), float(value))
    if isinstance(value, Sequence) and len(value) == 3:
        return (float(value[0]), float(value[1]), float(value[2]))
    raise PreprocessConfigError(f"{source}: {name} must be a number or three numbers, got {value!r}")


@dataclass(frozen=True, slots=True)
class PixelInputs:
    """One image ready for the vision tower.

    fixed: `pixel_values` is (3, H, W). naflex: (max_num_patches, patch*patch*3) with
    `attention_mask` (max_num_patches,) marking real patches and `spatial_shape` the grid.
    """

    pixel_values: FloatArray
    attention_mask: npt.NDArray[np.int32] | None = None
    spatial_shape: tuple[int, int] | None = None


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB, with transparency (alpha band or palette/colour-key transparency) composited onto white."""
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image if image.mode == "RGB" else image.convert("RGB")


def naflex_size(height: int, width: int, patch_size: int, max_num_patches: int) -> tuple[int, int]:
    """The largest aspect-preserving size, in whole patches, whose patch count fits the budget.

    Bisection on the scale factor (to 1e-5), rounding each side up to a whole number of
    patches and never below one patch: the rule SigLIP2's NaFlex processor applies.
    """

    def side(scale: float, length: int) -> int:
        return max(patch_size, math.ceil(length * scale / patch_size) * patch_size)

    def fits(scale: float) -> bool:
        return (side(scale, height) // patch_size) * (side(scale, width) // patch_size) <= max_num_patches

    eps = 1e-5
    low, high = eps / 10, 100.0
    while high - low >= eps:
        middle = (low + high) / 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return side(low, height), side(low, width)


class Preprocessor:
    """Applies one `PreprocessConfig`; holds its lookup table."""

    def __init__(self, config: PreprocessConfig) -> None:
        self.config = config
        self._lut = self._build_lut(config)

    @staticmethod
    def _build_lut(config: PreprocessConfig) -> FloatArray:
        """(3, 256): the float value of each byte per channel, with the reference's arithmetic.

        The reference rescales in float64 then casts to float32, and normalises in float32.
        """
        levels = np.arange(256, dtype=np.float64)
        values = (levels * config.rescale_factor).astype(np.float32) if config.do_rescale else levels.astype(np.float32)
        rows = []
        for channel in range(3):
            row = values
            if config.do_normalize:
                mean = np.float32(config.mean[channel])
                std = np.float32(config.std[channel])
                row = (values - mean) / std
            rows.append(row.astype(np.float32))
        return np.stack(rows)

    def target_size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) after resizing."""
        cfg = self.config
        if not cfg.do_resize:
            return width, height
        if cfg.mode == "naflex":
            h, w = naflex_size(height, width, cfg.patch_size, cfg.max_num_patches)
            return w, h
        return cfg.width, cfg.height

    def resized_rgb(self, image: Image.Image) -> Image.Image:
        """Steps 1-3: orientation, RGB on white, resize. Returned as an 8-bit RGB image."""
        if image.getexif().get(_ORIENTATION, 1) != 1:
            image = ImageOps.exif_transpose(image) or image
        rgb = to_rgb(image)
        size = self.target_size(*rgb.size)
        if size != rgb.size:
            rgb = rgb.resize(size, resample=Image.Resampling(self.config.resample))
        return rgb

    def __call__(self, image: Image.Image) -> PixelInputs:
        rgb = self.resized_rgb(image)
        arr = np.asarray(rgb, dtype=np.uint8)
        height, width = arr.shape[:2]
        chw = np.empty((3, height, width), dtype=np.float32)
        for channel in range(3):
            np.take(self._lut[channel], arr[:, :, channel], out=chw[channel])
        if self.config.mode == "fixed":
            return PixelInputs(chw)
        return self._patchify(chw)

    def _patchify(self, chw: FloatArray) -> PixelInputs:
        p = self.config.patch_size
        budget = self.config.max_num_patches
        _, height, width = chw.shape
        rows, cols = height // p, width // p
        # (C, rows, p, cols, p) -> (rows, cols, p, p, C): patches in row order, pixels row-major, channels last.
        patches = chw.reshape(3, rows, p, cols, p).transpose(1, 3, 2, 4, 0).reshape(rows * cols, p * p * 3)
        count = patches.shape[0]
        padded = np.zeros((budget, p * p * 3), dtype=np.float32)
        padded[:count] = patches
        mask = np.zeros((budget,), dtype=np.int32)
        mask[:count] = 1
        return PixelInputs(padded, mask, (rows, cols))


def stack(inputs: Sequence[PixelInputs]) -> dict[str, Any]:
    """A batch as the vision tower's keyword arguments (torch tensors)."""
    import torch

    batch: dict[str, Any] = {"pixel_values": torch.from_numpy(np.stack([i.pixel_values for i in inputs]))}
    if inputs and inputs[0].attention_mask is not None:
        batch["pixel_attention_mask"] = torch.from_numpy(
            np.stack([i.attention_mask for i in inputs if i.attention_mask is not None])
        )
        batch["spatial_shapes"] = torch.tensor([i.spatial_shape for i in inputs], dtype=torch.long)
    return batch
