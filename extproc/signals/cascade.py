"""The shipped two-stage classifiers, one cascade for `domain` and `classifier: builtin:prompt-attack`.

Stage 1 reads the text itself (hashed n-grams, and for `domain` the distilled static MiniLM token
vectors): microseconds, inline on the event loop. Stage 2 reads the text's MiniLM sentence
embedding with a small head that also sees stage 1's scores; it runs only on the texts stage 1
is unsure of. Which texts those are is each signal's own rule (`domain`: the top probability
under `confident`; prompt-attack: per output, between `low` and the sure threshold), so the
cascade takes them as given.

Both stages' scores are a function of the text alone, so the cascade caches each by text. The
model registry holds one cascade per set of weights, shared by every signal on them (the default
policy's `subject` and `subject_area`; a lexical and an embedding prompt-attack signal): a text
is scored once whichever signal asks, and a chat's earlier turns, re-sent with every request,
cost nothing.

Stage 2's embeddings go through `executor.run(embedder.embed, texts)`, the path the heavy
executor coalesces (`HeavyExecutor.coalesce`, set up by `BuildContext.text_embedder`): the
cascade's texts join the same batched encoder pass as `semantic`, `complexity`, the answer cache
and other concurrent requests' texts, and a text another signal already has on its way is not
encoded again, so a text costs one encoder pass per request whatever number of signals read it.
The heads (a few small matrix products, 15-25 us each) then run on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from extproc.models.executor import HeavyExecutor
from extproc.models.lru import LruCache

FloatArray = npt.NDArray[np.float32]
Scores = TypeVar("Scores")


class Embedder(Protocol):
    """What stage 2 needs of the text embedder: texts in, one L2-normalised row per text out."""

    def embed(self, texts: Sequence[str]) -> FloatArray: ...


class TwoStageCascade(Generic[Scores]):
    """Stage 1 and stage 2 of one set of weights, each cached by text (see the module doc).

    `first_stage(text)` gives stage 1's scores; `second_stage(embedding, first)` stage 2's from the
    text's embedding and its stage-1 scores. `cache_names` name the two caches in metrics."""

    def __init__(
        self,
        first_stage: Callable[[str], Scores],
        second_stage: Callable[[FloatArray, Scores], Scores],
        *,
        cache_size: int = 4096,
        cache_names: tuple[str, str] = ("first_stage", "second_stage"),
    ) -> None:
        self._first_stage = first_stage
        self._second_stage = second_stage
        self.first_cache: LruCache[Scores] = LruCache(cache_size)
        self.second_cache: LruCache[Scores] = LruCache(cache_size)
        self.cache_names = cache_names

    def caches(self) -> dict[str, LruCache[Scores]]:
        return {self.cache_names[0]: self.first_cache, self.cache_names[1]: self.second_cache}

    def first(self, text: str) -> Scores:
        """Stage 1's scores of `text` (each text computed once while it stays in the cache)."""
        scores = self.first_cache.get(text)
        if scores is None:
            scores = self._first_stage(text)
            self.first_cache.put(text, scores)
        return scores

    def known_second(self, text: str) -> Scores | None:
        """Stage 2's scores of `text` when some signal has had them computed; None otherwise."""
        return self.second_cache.get(text)

    def all_known_second(self, texts: Sequence[str]) -> list[Scores] | None:
        """Stage 2's scores of every one of `texts` when all are cached (no executor hop); else None."""
        found: list[Scores] = []
        for text in texts:
            scores = self.second_cache.get(text)
            if scores is None:
                return None
            found.append(scores)
        return found

    async def second(
        self,
        executor: HeavyExecutor,
        embedder: Embedder,
        texts: Sequence[str],
        firsts: Sequence[Scores],
        *,
        looked_up: bool = False,
    ) -> list[Scores]:
        """Stage 2's scores of `texts` (with their stage-1 scores `firsts`): cached ones at once;
        the rest are embedded through `executor.run(embedder.embed, ...)`, which the executor
        coalesces with every other signal's and request's texts, then scored here and cached.
        `looked_up`: the caller has just found none of them cached (no second lookup)."""
        found: list[Scores | None] = [None] * len(texts) if looked_up else [self.known_second(t) for t in texts]
        todo = [i for i, scores in enumerate(found) if scores is None]
        if todo:
            vectors = await executor.run(embedder.embed, [texts[i] for i in todo])
            for row, i in enumerate(todo):
                # The head is a few small matrix products: cheaper here than another executor hop.
                scores = self._second_stage(vectors[row], firsts[i])
                found[i] = scores
                self.second_cache.put(texts[i], scores)
        return [scores for scores in found if scores is not None]
