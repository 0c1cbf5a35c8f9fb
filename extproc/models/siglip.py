"""The SigLIP / SigLIP2 vision encoder: one loading place, our preprocessing, selectable precision.

A checkpoint is a local directory (`save_pretrained` layout: config.json, safetensors
weights, the image processor config, the tokenizer). It is checked before loading and
refused loudly when incomplete: above all when the attention-probe pooling head's weights
are missing, because `from_pretrained` would otherwise initialise them at random and the
encoder would be confidently wrong, the exact failure this project is built against.

Image embeddings are the vision tower's attention-probe pooled output (SigLIP's own head),
L2-normalised. Label probabilities use the checkpoint's own calibration,
`sigmoid(exp(logit_scale) * cos + logit_bias)`.

Precision: "fp32" is the reference; "bf16" casts the vision tower's weights to bfloat16
(the fast path; the parity harness holds it to cosine >= 0.999). The text tower always
runs in fp32: it only runs at policy load, and its outputs are cached per prompt.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from extproc.models.lru import LruCache, rows_through_cache
from extproc.models.preprocess import PixelInputs, PreprocessConfig, PreprocessConfigError, Preprocessor, stack

if TYPE_CHECKING:
    from PIL import Image

    from extproc.images import DecodedImage
    from extproc.models.executor import HeavyExecutor
    from extproc.models.registry import ModelRegistry
    from extproc.settings import VisionSettings

log = logging.getLogger(__name__)

Precision = Literal["fp32", "bf16"]
Pooling = Literal["head", "mean"]  # "mean" exists only to inject the historical drift in tests
Embeddings = npt.NDArray[np.float32]

SUPPORTED_MODEL_TYPES = ("siglip", "siglip2")
# Tensors the attention-probe pooling head must have, relative to the vision tower.
POOLING_HEAD_TENSORS = (
    "head.probe",
    "head.attention.in_proj_weight",
    "head.attention.out_proj.weight",
    "head.layernorm.weight",
    "head.mlp.fc1.weight",
    "head.mlp.fc2.weight",
)
TOKENIZER_FILES = ("tokenizer.json", "spiece.model", "tokenizer.model")
# Label prompts embedded (the policy's image labels, a few each): far more than a policy holds,
# so a reload's new prompts never push out the ones in use.
TEXT_CACHE_SIZE = 4096


class CheckpointError(RuntimeError):
    """The model directory is missing, incomplete or not a SigLIP-family checkpoint."""


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    path: Path
    model_type: str
    weight_files: tuple[Path, ...]
    tensor_count: int
    preprocess: PreprocessConfig

    def describe(self) -> str:
        size = sum(f.stat().st_size for f in self.weight_files)
        shape = (
            f"{self.preprocess.height}x{self.preprocess.width}"
            if self.preprocess.mode == "fixed"
            else f"naflex {self.preprocess.max_num_patches} patches of {self.preprocess.patch_size}px"
        )
        return f"{self.model_type} from {self.path} ({self.tensor_count} tensors, {size / 1e6:.1f} MB, {shape})"


def _weight_files(model_dir: Path) -> tuple[Path, ...]:
    single = model_dir / "model.safetensors"
    if single.is_file():
        return (single,)
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        shards = sorted({model_dir / name for name in weight_map.values()})
        missing = [s.name for s in shards if not s.is_file()]
        if missing:
            raise CheckpointError(f"{model_dir}: weight shards missing: {', '.join(missing)}")
        if not shards:
            raise CheckpointError(f"{index}: empty weight map")
        return tuple(shards)
    if (model_dir / "pytorch_model.bin").is_file():
        raise CheckpointError(f"{model_dir}: only pickle weights (pytorch_model.bin); convert to safetensors")
    raise CheckpointError(f"{model_dir}: no weights (model.safetensors or model.safetensors.index.json)")


def inspect_checkpoint(model_dir: Path | str) -> CheckpointInfo:
    """Check that `model_dir` holds a complete SigLIP-family checkpoint, without loading it."""
    from safetensors import safe_open

    path = Path(model_dir).expanduser()
    if not path.is_dir():
        raise CheckpointError(f"vision model directory {path} does not exist")
    config_path = path / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{path}: no config.json")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    model_type = str(config.get("model_type", ""))
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(f"{path}: model_type {model_type!r} is not one of {', '.join(SUPPORTED_MODEL_TYPES)}")
    if (config.get("vision_config") or {}).get("vision_use_head") is False:
        raise CheckpointError(f"{path}: vision_use_head is false; SigLIP embeddings need the attention-probe head")
    files = _weight_files(path)
    names: set[str] = set()
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            names.update(handle.keys())
    missing_head = [t for t in POOLING_HEAD_TENSORS if not any(n.endswith(f"vision_model.{t}") for n in names)]
    if missing_head:
        raise CheckpointError(
            f"{path}: the vision pooling head's weights are missing ({', '.join(missing_head)}); refusing to load: "
            "a randomly initialised or mean-pooling head gives confidently wrong labels"
        )
    for required in ("logit_scale", "logit_bias"):
        if required not in names:
            raise CheckpointError(f"{path}: {required} is missing; label probabilities would be uncalibrated")
    if not any(n.startswith("text_model.") for n in names):
        raise CheckpointError(f"{path}: no text tower weights; label prompts cannot be embedded")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise CheckpointError(f"{path}: no tokenizer ({' or '.join(TOKENIZER_FILES)})")
    try:
        preprocess = PreprocessConfig.from_dir(path)
    except PreprocessConfigError as exc:
        raise CheckpointError(str(exc)) from exc
    if (preprocess.mode == "naflex") != (model_type == "siglip2"):
        raise CheckpointError(f"{path}: a {model_type} model with a {preprocess.mode} image processor config")
    return CheckpointInfo(path, model_type, files, len(names), preprocess)


def _normalise(x: npt.NDArray[Any]) -> Embeddings:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    out: Embeddings = (x / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


class VisionEncoder:
    """A loaded SigLIP-family model with our preprocessing and the embedding caches."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        info: CheckpointInfo,
        *,
        precision: Precision = "fp32",
        pooling: Pooling = "head",
        cache_size: int = 1024,
        preprocess: PreprocessConfig | None = None,
    ) -> None:
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.info = info
        self.model_type = info.model_type
        self.precision: Precision = precision
        self.pooling: Pooling = pooling
        self.preprocessor = Preprocessor(preprocess or info.preprocess)
        self.model_id = f"{info.path.resolve()}#{info.model_type}"
        self.vision_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        if precision == "bf16":
            model.vision_model.to(torch.bfloat16)
        self.text_length = int(model.config.text_config.max_position_embeddings)
        self.logit_scale = float(model.logit_scale.detach().float().exp().item())
        self.logit_bias = float(model.logit_bias.detach().float().item())
        self.embed_dim = int(model.text_model.head.out_features)
        self.image_cache: LruCache[Embeddings] = LruCache(cache_size)
        self.text_cache: LruCache[Embeddings] = LruCache(TEXT_CACHE_SIZE)  # one encoder: one model's prompts
        self._infer_lock = threading.Lock()

    @classmethod
    def load(
        cls,
        model_dir: Path | str,
        *,
        precision: Precision = "bf16",
        pooling: Pooling = "head",
        cache_size: int = 1024,
        threads: int | None = None,
        preprocess: PreprocessConfig | None = None,
    ) -> VisionEncoder:
        """Load from a local checkpoint directory; raises `CheckpointError` when it is incomplete."""
        info = inspect_checkpoint(model_dir)
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # tqdm would break JSON log lines

        if threads is not None:
            torch.set_num_threads(threads)
        model, loading = AutoModel.from_pretrained(
            str(info.path), local_files_only=True, dtype=torch.float32, output_loading_info=True
        )
        missing = sorted(loading.get("missing_keys") or ())
        if missing:
            raise CheckpointError(f"{info.path}: weights missing from the checkpoint: {', '.join(missing[:8])}")
        if not hasattr(model, "vision_model") or not hasattr(model, "text_model"):
            raise CheckpointError(f"{info.path}: loaded {type(model).__name__}, not a SigLIP dual encoder")
        model.eval()
        tokenizer = AutoTokenizer.from_pretrained(str(info.path), local_files_only=True)
        encoder = cls(
            model, tokenizer, info, precision=precision, pooling=pooling, cache_size=cache_size, preprocess=preprocess
        )
        log.info("vision encoder loaded: %s, precision %s", info.describe(), precision)
        return encoder

    def describe(self) -> str:
        return f"{self.info.describe()}, {self.precision}"

    # -- images -----------------------------------------------------------------------------

    def preprocess(self, image: Image.Image) -> PixelInputs:
        return self.preprocessor(image)

    def embed_pixels(self, inputs: Sequence[PixelInputs]) -> Embeddings:
        """L2-normalised image embeddings, (N, D) float32."""
        import torch

        if not inputs:
            return np.zeros((0, self.embed_dim), dtype=np.float32)
        batch = stack(inputs)
        batch["pixel_values"] = batch["pixel_values"].to(self.vision_dtype)
        with self._infer_lock, torch.inference_mode():
            out = self.model.vision_model(**batch)
            if self.pooling == "head":
                pooled = out.pooler_output
            else:  # the drift: mean over (real) tokens instead of the attention probe
                hidden = out.last_hidden_state.float()
                mask = batch.get("pixel_attention_mask")
                if mask is None:
                    pooled = hidden.mean(dim=1)
                else:
                    weights = mask.to(hidden.dtype).unsqueeze(-1)
                    pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
            return _normalise(pooled.float().numpy())

    def embed_images(self, images: Sequence[Image.Image]) -> Embeddings:
        return self.embed_pixels([self.preprocess(image) for image in images])

    def cached_embeddings(self, images: Sequence[DecodedImage]) -> list[Embeddings | None]:
        """Cache lookups only: no decoding, no inference (cheap enough for the event loop)."""
        return [self.image_cache.get(image.sha256) for image in images]

    def embed_decoded(self, images: Sequence[DecodedImage]) -> Embeddings:
        """Embeddings of request images, through the content-hash cache; decodes only on a miss.

        Runs on the heavy executor. Request errors from decoding (`UnprocessableRequest`,
        `PayloadTooLarge`) propagate unchanged.
        """
        found: dict[int, Embeddings] = {}
        missing: list[int] = []
        for index, image in enumerate(images):
            cached = self.image_cache.get(image.sha256)
            if cached is None:
                missing.append(index)
            else:
                found[index] = cached
        if missing:
            # Equal images in one request are embedded once.
            unique: dict[str, int] = {}
            for index in missing:
                unique.setdefault(images[index].sha256, index)
            inputs = [self.preprocess(images[i].pixels()) for i in unique.values()]
            vectors = self.embed_pixels(inputs)
            by_hash = dict(zip(unique, vectors, strict=True))
            for key, vector in by_hash.items():
                self.image_cache.put(key, vector)
            for index in missing:
                found[index] = by_hash[images[index].sha256]
        if not images:
            return np.zeros((0, self.embed_dim), dtype=np.float32)
        return np.stack([found[i] for i in range(len(images))])

    # -- text -------------------------------------------------------------------------------

    def embed_texts(self, texts: Iterable[str], *, batch_size: int = 32) -> Embeddings:
        """L2-normalised text embeddings; each prompt is computed once (while the cache holds it)."""
        return rows_through_cache(
            self.text_cache, list(texts), self.embed_dim, lambda todo: self._encode_texts(todo, batch_size)
        )

    def _encode_texts(self, texts: list[str], batch_size: int) -> Embeddings:
        import torch

        chunks: list[Embeddings] = []
        for start in range(0, len(texts), batch_size):
            encoded = self.tokenizer(
                texts[start : start + batch_size],
                padding="max_length",
                max_length=self.text_length,
                truncation=True,
                return_tensors="pt",
            )
            inputs = {k: v for k, v in encoded.items() if k in ("input_ids", "attention_mask")}
            with self._infer_lock, torch.inference_mode():
                pooled = self.model.text_model(**inputs).pooler_output
            chunks.append(_normalise(pooled.float().numpy()))
        return np.concatenate(chunks)

    def caches(self) -> dict[str, LruCache[Embeddings]]:
        return {"embeddings": self.image_cache}

    @property
    def text_cache_size(self) -> int:
        return len(self.text_cache)

    # -- scores -----------------------------------------------------------------------------

    def probabilities(self, image_embeddings: Embeddings, label_embeddings: Embeddings) -> npt.NDArray[np.float64]:
        """(images, labels) calibrated probabilities: sigmoid(exp(logit_scale) * cos + logit_bias)."""
        return sigmoid_scores(image_embeddings, label_embeddings, self.logit_scale, self.logit_bias)


def sigmoid_scores(
    image_embeddings: Embeddings, label_embeddings: Embeddings, scale: float, bias: float
) -> npt.NDArray[np.float64]:
    cos = image_embeddings.astype(np.float64) @ label_embeddings.astype(np.float64).T
    logits = scale * cos + bias
    return np.asarray(1.0 / (1.0 + np.exp(-logits)), dtype=np.float64)


def encoder_loader(
    model_dir: Path | None,
    *,
    precision: Precision,
    cache_size: int,
    on_executor: Callable[[Callable[[], VisionEncoder]], VisionEncoder] | None = None,
    before_load: Callable[[], None] | None = None,
) -> Callable[[], VisionEncoder]:
    """A loader for `ModelRegistry.get("vision", ...)`: unavailable when no directory is configured."""
    from extproc.models.registry import ModelUnavailable

    def load() -> VisionEncoder:
        if model_dir is None:
            raise ModelUnavailable("no vision model configured (set vision.model_dir / VSR_VISION__MODEL_DIR)")

        def work() -> VisionEncoder:
            if before_load is not None:
                before_load()
            return VisionEncoder.load(model_dir, precision=precision, cache_size=cache_size)

        return on_executor(work) if on_executor is not None else work()

    return load


VISION_MODEL = "vision"  # the ModelRegistry name every image-label signal shares


def get_vision_encoder(models: ModelRegistry, settings: VisionSettings, executor: HeavyExecutor) -> VisionEncoder:
    """The process's vision encoder, from the model registry (loaded once, on the heavy executor)."""
    loader = encoder_loader(
        settings.model_dir,
        precision=settings.precision,
        cache_size=settings.cache_size,
        on_executor=executor.submit_sync,
        before_load=executor.apply_thread_budget,
    )
    return models.get(VISION_MODEL, loader, detail=f"{settings.model_dir} ({settings.precision})")
