"""language: which language the request is written in (lingua, whose models ship in its wheel).

Matches when the most likely language is one of `languages` with at least
`min_confidence`; the label is the ISO 639-1 code of the detected language (so a rule can
name `label: de` on one language signal). Detection is cheap (about a millisecond on a
short text) and runs inline; the text is capped at `max_chars`. The detector knows the
languages in settings (`language.languages`, a common set by default) plus those the spec
names, loaded once at policy load.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from extproc.models.registry import ModelRegistry, ModelUnavailable
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import BuildContext, Evaluation, Signal, SignalUnavailable, TextSignalSpec

DEFAULT_LANGUAGES: tuple[str, ...] = ("en", "es", "fr", "de", "it", "pt", "nl", "ru", "zh", "ja", "ko", "ar")


class LanguageDetector:
    """lingua over a fixed set of ISO 639-1 languages, models preloaded."""

    def __init__(self, codes: list[str], *, low_accuracy: bool = False) -> None:
        from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

        langs = []
        for code in codes:
            iso = getattr(IsoCode639_1, code.upper(), None)
            if iso is None:
                raise ModelUnavailable(f"lingua does not know the language {code!r}")
            langs.append(Language.from_iso_code_639_1(iso))
        builder = LanguageDetectorBuilder.from_languages(*langs).with_preloaded_language_models()
        if low_accuracy:
            builder = builder.with_low_accuracy_mode()
        self._detector: Any = builder.build()
        self.codes = frozenset(codes)
        self._lock = threading.Lock()

    def detect(self, text: str) -> tuple[str, float] | None:
        """(ISO 639-1 code, confidence 0..1) of the most likely language, or None for no text."""
        if sum(c.isalpha() for c in text) < 3:
            return None
        values = self._detector.compute_language_confidence_values(text)
        if not values:
            return None
        top = values[0]
        return str(top.language.iso_code_639_1.name).lower(), float(top.value)


def get_language_detector(models: ModelRegistry, codes: list[str], *, low_accuracy: bool) -> LanguageDetector:
    key = "language:" + ",".join(sorted(codes)) + (":low" if low_accuracy else "")
    return models.get(
        key,
        lambda: LanguageDetector(codes, low_accuracy=low_accuracy),
        detail=f"lingua ({len(codes)} languages{', low accuracy' if low_accuracy else ''})",
    )


class LanguageSpec(TextSignalSpec):
    type: Literal["language"]
    languages: list[str] = Field(min_length=1)  # ISO 639-1
    min_confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    max_chars: int = Field(default=1000, ge=16)

    @field_validator("languages")
    @classmethod
    def _iso(cls, v: list[str]) -> list[str]:
        out = [code.strip().lower() for code in v]
        bad = [code for code in out if len(code) != 2 or not code.isalpha()]
        if bad:
            raise ValueError(f"languages must be ISO 639-1 codes (two letters): {', '.join(bad)}")
        return out


class LanguageSignal(Signal):
    inline: ClassVar[bool] = True

    def __init__(self, spec: LanguageSpec, detector: LanguageDetector | None = None, reason: str | None = None):
        super().__init__(spec)
        self.spec: LanguageSpec = spec
        self._detector = detector
        self._reason = reason

    @classmethod
    def build(cls, spec: LanguageSpec, ctx: BuildContext) -> LanguageSignal:
        configured = ctx.settings.language.languages or list(DEFAULT_LANGUAGES)
        codes = sorted(set(configured) | set(spec.languages))
        try:
            detector = get_language_detector(ctx.models, codes, low_accuracy=ctx.settings.language.low_accuracy)
        except ModelUnavailable as exc:
            return cls(spec, None, str(exc))
        return cls(spec, detector)

    def unavailable_reason(self) -> str | None:
        return self._reason if self._detector is None else None

    def known_labels(self) -> frozenset[str] | None:
        return self._detector.codes if self._detector is not None else None

    def compute(self, request: RoutingRequest) -> Evaluation:
        if self._detector is None:
            raise SignalUnavailable(self._reason or "no language detector")
        text = request.joined_text(self.spec.roles)[: self.spec.max_chars]
        found = self._detector.detect(text)
        if found is None:
            return Evaluation(matched=False)
        code, confidence = found
        confident = confidence >= self.spec.min_confidence
        return Evaluation(
            matched=confident and code in self.spec.languages,
            score=confidence if code in self.spec.languages else 0.0,
            labels={code: confidence} if confident else {},
            evidence=(f"language={code} confidence={confidence:.2f}",),
        )
