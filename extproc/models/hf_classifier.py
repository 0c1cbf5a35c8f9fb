"""Any local Hugging Face sequence-classification checkpoint as a text classifier.

A checkpoint directory (config.json, weights, tokenizer files; `save_pretrained` output or a
downloaded snapshot) is loaded with `AutoTokenizer` + `AutoModelForSequenceClassification`,
`local_files_only=True`. Its label names are `config.id2label`, in index order.
Probabilities are a softmax over the logits, or an independent sigmoid per label when
`config.problem_type == "multi_label_classification"`.

Two paths, one checked against the other (the project's rule for every fast path):
- the **reference** path: fp32 weights, one text per forward pass (no padding);
- the **fast** path: `precision="bf16"` weights and/or several texts in one padded batch.
`check_parity(model_dir, texts)` returns the largest absolute probability difference
between them; the tests prove it catches a drifted preprocessing and a swapped label order.

Inputs are truncated at `max_length` tokens (the checkpoint's own limit, at most 512);
repeated texts (a system prompt sent with every request) come from a small cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from extproc.models.local_checkpoint import checkpoint_dir, load_local
from extproc.models.lru import LruCache, rows_through_cache
from extproc.models.registry import ModelRegistry, ModelUnavailable

Precision = Literal["fp32", "bf16"]
FloatArray = npt.NDArray[np.float32]

MAX_TOKENS = 512
# Largest allowed |fast - reference| probability difference, by the fast path's precision.
PARITY_TOLERANCE: Mapping[str, float] = {"fp32": 1e-4, "bf16": 0.05}


class HfCheckpointError(ModelUnavailable):
    """The directory is missing or is not a loadable sequence-classification checkpoint."""


def checkpoint_labels(config: Any) -> tuple[str, ...]:
    """`config.id2label` as a tuple in index order; raises ValueError when the ids are not 0..n-1."""
    raw = dict(getattr(config, "id2label", None) or {})
    ids = sorted(int(k) for k in raw)
    if not ids or ids != list(range(len(ids))):
        raise ValueError(f"config.id2label must number its labels 0..n-1, got ids {ids}")
    by_id = {int(k): str(v) for k, v in raw.items()}
    return tuple(by_id[i] for i in ids)


def check_label_mapping(mapping: Mapping[str, str], labels: Sequence[str], where: str = "labels") -> None:
    """Every key of a policy's `labels` mapping must be one of the checkpoint's label names."""
    unknown = sorted(set(mapping) - set(labels))
    if unknown:
        raise ValueError(
            f"{where}: the checkpoint has no label(s) {', '.join(map(repr, unknown))}; "
            f"its labels (config.id2label) are {', '.join(map(repr, labels))}"
        )


def _token_limit(tokenizer: Any, config: Any, requested: int | None) -> int:
    limits = [MAX_TOKENS]
    model_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max, int) and 0 < model_max < 1_000_000:
        limits.append(model_max)
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        limits.append(positions)
    if requested is not None:
        limits.append(requested)
    return max(2, min(limits))


def _check_dir(model_dir: Path) -> Path:
    return checkpoint_dir(model_dir, "classifier checkpoint", HfCheckpointError)


class HfTextClassifier:
    """A sequence-classification checkpoint: `predict(texts)` gives (n, labels) probabilities."""

    def __init__(
        self,
        model_dir: Path,
        *,
        precision: Precision = "fp32",
        max_length: int | None = None,
        batch_size: int = 16,
        cache_size: int = 1024,
        torch_threads: int | None = None,
    ) -> None:
        import torch

        self.model_dir = _check_dir(model_dir)
        self.precision: Precision = precision
        self.tokenizer, model = load_local(
            self.model_dir, "AutoModelForSequenceClassification", torch_threads=torch_threads
        )
        if precision == "bf16":
            model = model.to(torch.bfloat16)
        self.model: Any = model
        try:
            self.labels: tuple[str, ...] = checkpoint_labels(model.config)
        except ValueError as exc:
            raise HfCheckpointError(f"classifier checkpoint {self.model_dir}: {exc}") from exc
        self.multi_label = getattr(model.config, "problem_type", None) == "multi_label_classification"
        self.max_length = _token_limit(self.tokenizer, model.config, max_length)
        self.batch_size = max(1, batch_size)
        self.cache: LruCache[FloatArray] = LruCache(cache_size)

    def describe(self) -> str:
        kind = "multi-label sigmoid" if self.multi_label else "softmax"
        return f"{self.model_dir} ({self.precision}, {kind}, labels {list(self.labels)}, {self.max_length} tokens)"

    def _forward(self, texts: Sequence[str]) -> FloatArray:
        """Probabilities for `texts` in one forward pass (padded when there are several)."""
        import torch

        enc = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        with torch.inference_mode():
            logits = self.model(**enc).logits.float()
            probs = torch.sigmoid(logits) if self.multi_label else torch.softmax(logits, dim=-1)
        result: FloatArray = probs.numpy().astype(np.float32, copy=False)
        return result

    def predict_uncached(self, texts: Sequence[str], *, batch: bool = True) -> FloatArray:
        """(len(texts), len(labels)) probabilities; `batch=False` is one text per pass (the reference)."""
        out = np.zeros((len(texts), len(self.labels)), dtype=np.float32)
        if not texts:
            return out
        if not batch:
            for i, text in enumerate(texts):
                out[i] = self._forward([text])[0]
            return out
        # Sort by length so each padded batch wastes little.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            probs = self._forward([texts[i] for i in chunk])
            for row, i in enumerate(chunk):
                out[i] = probs[row]
        return out

    def predict(self, texts: Sequence[str], *, batch: bool = True) -> FloatArray:
        """Like `predict_uncached`, with repeated texts served from the cache."""
        return rows_through_cache(
            self.cache, texts, len(self.labels), lambda fresh: self.predict_uncached(fresh, batch=batch)
        )


def load_hf_classifier(
    model_dir: Path | str,
    *,
    precision: Precision = "fp32",
    max_length: int | None = None,
    torch_threads: int | None = None,
) -> HfTextClassifier:
    """Load a checkpoint directory; a missing or unreadable one raises `HfCheckpointError`."""
    path = _check_dir(Path(model_dir))
    try:
        return HfTextClassifier(path, precision=precision, max_length=max_length, torch_threads=torch_threads)
    except HfCheckpointError:
        raise
    except Exception as exc:  # transformers raises OSError / ValueError / KeyError for broken folders
        raise HfCheckpointError(f"cannot load classifier checkpoint {path}: {exc}") from exc


def registry_name(model_dir: Path | str, precision: Precision) -> str:
    return f"hf_classifier:{Path(model_dir).expanduser().resolve()}:{precision}"


def get_hf_classifier(
    models: ModelRegistry,
    model_dir: Path | str,
    *,
    precision: Precision = "fp32",
    torch_threads: int | None = None,
) -> HfTextClassifier:
    """The process's classifier for (`model_dir`, `precision`), loaded once via the model registry."""
    return models.get(
        registry_name(model_dir, precision),
        lambda: load_hf_classifier(model_dir, precision=precision, torch_threads=torch_threads),
        detail=f"sequence classifier from {model_dir} ({precision})",
    )


def check_parity(
    model_dir: Path | str,
    texts: Sequence[str],
    *,
    precision: Precision = "bf16",
    batch: bool = True,
    fast: HfTextClassifier | None = None,
) -> float:
    """The largest |fast - reference| probability over `texts` and labels.

    The reference is fp32, one text per pass; the fast path is `fast` when given (a test's
    deliberately drifted one), else this checkpoint at `precision`, batched when `batch`.
    Columns are matched by label name, so a fast path that reorders its labels is caught too.
    """
    if not texts:
        raise ValueError("check_parity needs at least one text")
    reference = load_hf_classifier(model_dir, precision="fp32")
    fast = fast or load_hf_classifier(model_dir, precision=precision)
    missing = sorted(set(reference.labels) - set(fast.labels))
    if missing:
        raise ValueError(f"the fast path lacks label(s) {missing}")
    ref = reference.predict_uncached(list(texts), batch=False)
    got = fast.predict_uncached(list(texts), batch=batch)
    columns = [fast.labels.index(label) for label in reference.labels]
    return float(np.abs(got[:, columns] - ref).max())
