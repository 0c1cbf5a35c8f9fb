"""language: which language the request is written in (lingua, whose models ship in its wheel).

Matches when the most likely language is one of `languages` with at least
`min_confidence`; the label is the ISO 639-1 code of the detected language (so a rule can
name `label: de` on one language signal). Detection is cheap (about a millisecond on a
short text) and runs inline; the text is capped at `max_chars`. The detector knows the
languages in settings (`language.languages`, a common set by default) plus those the spec
names, loaded once at policy load.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from extproc.models.language import DEFAULT_LANGUAGES, LanguageDetector, get_language_detector
from extproc.models.registry import ModelUnavailable
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import BuildContext, Evaluation, ModelSignal, TextSignalSpec


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


class LanguageSignal(ModelSignal[LanguageDetector]):
    inline: ClassVar[bool] = True

    def __init__(self, spec: LanguageSpec, detector: LanguageDetector | None = None, reason: str | None = None):
        super().__init__(spec, detector, reason)
        self.spec: LanguageSpec = spec

    @classmethod
    def build(cls, spec: LanguageSpec, ctx: BuildContext) -> LanguageSignal:
        configured = ctx.settings.language.languages or list(DEFAULT_LANGUAGES)
        codes = sorted(set(configured) | set(spec.languages))
        try:
            detector = get_language_detector(ctx.models, codes, low_accuracy=ctx.settings.language.low_accuracy)
        except ModelUnavailable as exc:
            return cls(spec, None, str(exc))
        return cls(spec, detector)

    def known_labels(self) -> frozenset[str] | None:
        return self.model.codes if self.model is not None else None

    def compute(self, request: RoutingRequest) -> Evaluation:
        detector = self.require_model()
        text = request.joined_text(self.spec.roles)[: self.spec.max_chars]
        found = detector.detect(text)
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
