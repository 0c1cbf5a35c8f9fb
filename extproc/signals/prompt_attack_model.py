"""The shipped prompt-attack cascade as the classifier signal sees it: the outputs of
`extproc.models.attack_classifier` (`attack`, `harmful`) behind `PromptAttackModel`, both stages'
scores cached by text on one `PromptAttackCascade` per process (`signals.prompt_attack` reads it)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from extproc.models.lru import LruCache
from extproc.models.registry import ModelRegistry, ModelUnavailable
from extproc.signals.cascade import TwoStageCascade

log = logging.getLogger(__name__)

BUILTIN_PROMPT_ATTACK = "builtin:prompt-attack"
PROMPT_ATTACK_MODEL_NAME = "prompt_attack_classifier"  # its name in the model registry

FloatArray = npt.NDArray[np.float32]


class OutputThresholds(Protocol):
    """One output's calibrated thresholds (`attack_classifier.Thresholds`)."""

    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...
    @property
    def decision(self) -> float: ...
    # `latin`: the text's `mostly_latin`, counted once by the caller for every output (None: count it).
    def sure_for(self, text: str, override: float | None = None, latin: bool | None = None) -> float: ...
    def head_reads(self, text: str, latin: bool | None = None) -> bool: ...


class PromptAttackModel(Protocol):
    """What the signal needs of the shipped cascade (the one coupling point to its module): its
    outputs (`attack`, `harmful`), their thresholds, and both stages' scores, one per output."""

    @property
    def labels(self) -> tuple[str, ...]: ...
    def thresholds(self, label: str) -> OutputThresholds: ...
    def lexical_scores(self, text: str) -> Sequence[float]: ...
    def embedding_scores(self, embedding: FloatArray, lexical: Sequence[float]) -> Sequence[float]: ...
    # Is `text` mostly in Latin letters (what `head_reads` / `sure_for` take as `latin`)? Counted once
    # a text for the lexical scores and every output's checks of it.
    def latin(self, text: str) -> bool: ...


class AttackClassifierAdapter:
    """The outputs of `extproc.models.attack_classifier` (one `AttackClassifier` each, sharing a
    feature config) seen as a `PromptAttackModel` (uncached: `PromptAttackCascade` caches)."""

    def __init__(self, outputs: Mapping[str, Any], cache_size: int = 4096) -> None:
        if not outputs:
            raise ModelUnavailable(f"{BUILTIN_PROMPT_ATTACK}: the weights hold no output")
        self.outputs = dict(outputs)
        self.labels: tuple[str, ...] = tuple(self.outputs)
        self._classifiers = list(self.outputs.values())
        self._reads_script = any(c.reads_script for c in self._classifiers)
        # Each non-ASCII text's script, by text, as long as the cascade keeps its scores: the
        # lexical scores and the signal's checks (every output's sure threshold and head) of one
        # text count its letters once, however the texts and views of requests interleave.
        self._scripts: LruCache[bool] = LruCache(cache_size)

    def thresholds(self, label: str) -> OutputThresholds:
        thresholds: OutputThresholds = self.outputs[label].thresholds
        return thresholds

    def latin(self, text: str) -> bool:
        if not self._reads_script or text.isascii():
            return True
        known = self._scripts.get(text)
        if known is None:
            from extproc.models.attack_classifier import mostly_latin

            known = mostly_latin(text)
            self._scripts.put(text, known)
        return known

    def lexical_scores(self, text: str) -> tuple[float, ...]:
        from extproc.models.attack_classifier import lexical_scores

        return tuple(lexical_scores(self._classifiers, text, self.latin(text)))

    def embedding_scores(self, embedding: FloatArray, lexical: Sequence[float]) -> tuple[float, ...]:
        return tuple(float(c.embedding_score(embedding, p)) for c, p in zip(self._classifiers, lexical, strict=True))


class PromptAttackCascade(TwoStageCascade[tuple[float, ...]]):
    """A `PromptAttackModel` as the shared `TwoStageCascade`: both stages' scores (one per output)
    cached by text on the model, for every builtin signal on these weights. A chat re-sends its
    earlier turns (and agents their tool results) with every request: each text is scored once,
    keyed by the text itself (at most max_chars, head + tail). It is itself a `PromptAttackModel`
    (its lexical scores are the cached ones), which is what `classifier_views` reads."""

    def __init__(self, scorer: PromptAttackModel, cache_size: int = 4096) -> None:
        super().__init__(
            lambda text: tuple(scorer.lexical_scores(text)),
            lambda embedding, lexical: tuple(scorer.embedding_scores(embedding, lexical)),
            cache_size=cache_size,
            cache_names=("lexical", "second_stage"),
        )
        self.scorer = scorer
        self.labels: tuple[str, ...] = tuple(scorer.labels)

    def thresholds(self, label: str) -> OutputThresholds:
        return self.scorer.thresholds(label)

    def lexical_scores(self, text: str) -> tuple[float, ...]:
        return self.first(text)

    def embedding_scores(self, embedding: FloatArray, lexical: Sequence[float]) -> tuple[float, ...]:
        return tuple(self.scorer.embedding_scores(embedding, lexical))

    def latin(self, text: str) -> bool:
        return self.scorer.latin(text)


def load_prompt_attack(directory: Path | None = None) -> PromptAttackCascade:
    """The shipped weights (or those in `directory`); ModelUnavailable when they are not there."""
    try:
        from extproc.models.attack_classifier import load_outputs
    except ImportError as exc:
        raise ModelUnavailable(f"{BUILTIN_PROMPT_ATTACK}: the classifier module is not installed: {exc}") from exc
    outputs = load_outputs(directory)
    if any(c.backend != "c" for c in outputs.values()):
        log.warning(
            "%s: the C lexical kernel is not built in this install (no C compiler at install time?); "
            "the lexical stage runs on numpy, ~20 us a text instead of ~3",
            BUILTIN_PROMPT_ATTACK,
        )
    return PromptAttackCascade(AttackClassifierAdapter(outputs))


def get_prompt_attack(models: ModelRegistry) -> PromptAttackCascade:
    """The process's prompt-attack cascade, loaded once (tests `put` their own under the same name)."""
    model: PromptAttackCascade = models.get(
        PROMPT_ATTACK_MODEL_NAME, load_prompt_attack, detail=f"{BUILTIN_PROMPT_ATTACK} (shipped weights)"
    )
    return model
