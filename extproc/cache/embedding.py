"""The cheap candidate embedding: MiniLM's own token-embedding table, without the transformer.

A query's candidate vector is the weighted mean of its tokens' input embeddings (the table the
shipped all-MiniLM-L6-v2 starts from), centred on the table's mean and L2-normalised. It costs a
tokenizer call and a gather, about a hundredth of a MiniLM forward pass, and ranks paraphrases
well enough to pick the few candidates MiniLM then verifies. Frequent tokens weigh less
(log of the token id: WordPiece vocabularies list frequent pieces first), the Zipf weighting
static-embedding distillers use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from extproc.cache.backends import FloatArray
from extproc.cache.keys import FUNCTION_WORDS
from extproc.models.lru import LruCache

if TYPE_CHECKING:
    from extproc.models.text_embedder import TextEmbedder

MAX_TOKENS = 256


class StaticEmbedder:
    def __init__(self, embedder: TextEmbedder) -> None:
        weight = embedder.token_embeddings()  # read from the weights file: no torch
        self.table: FloatArray = (weight - weight.mean(axis=0, keepdims=True)).astype(np.float32)
        # A private Rust tokenizer without padding or truncation (transformers' is not loaded).
        self.fast = embedder.fast_tokenizer()
        self.special = embedder.special_ids()
        # Function words carry no topic: two unrelated questions of one template ("Tell me about
        # the ...") would otherwise look alike and each pay for a MiniLM verification.
        for word in FUNCTION_WORDS:
            pieces = self._ids(word)
            if len(pieces) == 1:
                self.special.add(pieces[0])
        self.dim = int(self.table.shape[1])
        self.cache: LruCache[FloatArray] = LruCache(4096)  # a lookup's query is stored moments later

    def _ids(self, text: str) -> list[int]:
        ids: list[int] = self.fast.encode(text, add_special_tokens=False).ids[:MAX_TOKENS]
        return ids

    def embed(self, text: str) -> FloatArray:
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        vector = self._embed(text)
        self.cache.put(text, vector)
        return vector

    def _embed(self, text: str) -> FloatArray:
        ids = [i for i in self._ids(text) if i not in self.special and 0 <= i < len(self.table)]
        if not ids:
            return np.zeros(self.dim, dtype=np.float32)
        index = np.asarray(ids)
        weights = np.log1p(index.astype(np.float32))
        vector = (self.table[index] * weights[:, None]).sum(axis=0)
        norm = float(np.linalg.norm(vector))
        result: FloatArray = (vector / norm if norm > 0 else vector).astype(np.float32)
        return result
