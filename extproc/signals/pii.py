"""PII signal: personal data (emails, phones, cards, SSNs, IBANs, passport numbers) in text."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from extproc.detectors.common import Finding
from extproc.detectors.pii import PII_KINDS, find_pii
from extproc.signals.base import Evaluation, TextSignalSpec
from extproc.signals.detector import DetectorSignal, selected_kinds, summarize


class PiiSpec(TextSignalSpec):
    type: Literal["pii"]
    entities: list[str] | None = Field(default=None, min_length=1)  # None: every kind in PII_KINDS
    allow: list[str] = Field(default_factory=list)  # detected and reported, but they do not make the signal match
    min_score: float = Field(default=0.5, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_kinds(self) -> PiiSpec:
        selected_kinds(self.entities, PII_KINDS, "entities", "PII kind(s)")
        selected_kinds(self.allow, PII_KINDS, "allow", "PII kind(s)")
        watched = set(self.entities if self.entities is not None else PII_KINDS)
        if watched <= set(self.allow):
            raise ValueError("every detected entity is in `allow`: this signal could never match")
        return self


class PiiSignal(DetectorSignal):
    known_kinds = PII_KINDS
    spec: PiiSpec

    def chosen_kinds(self) -> list[str] | None:
        return self.spec.entities

    def find(self, text: str) -> list[Finding]:
        return find_pii(text, self.kinds)

    def summarize(self, findings: list[Finding]) -> Evaluation:
        return summarize(findings, self.spec.min_score, frozenset(self.spec.allow))
