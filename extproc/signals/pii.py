"""PII signal: personal data (emails, phones, cards, SSNs, IBANs, passport numbers) in text."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from extproc.detectors.common import Finding, join_bounded, truncation_note
from extproc.detectors.pii import PII_KINDS, find_pii
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, TextSignalSpec

_MAX_EVIDENCE = 10


def _check_subset(values: list[str] | None, field: str) -> None:
    if values is None:
        return
    unknown = [v for v in values if v not in PII_KINDS]
    if unknown:
        raise ValueError(f"{field}: unknown PII kind(s) {', '.join(map(repr, unknown))}; known: {', '.join(PII_KINDS)}")


class PiiSpec(TextSignalSpec):
    type: Literal["pii"]
    entities: list[str] | None = Field(default=None, min_length=1)  # None: every kind in PII_KINDS
    allow: list[str] = Field(default_factory=list)  # detected and reported, but they do not make the signal match
    min_score: float = Field(default=0.5, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_kinds(self) -> PiiSpec:
        _check_subset(self.entities, "entities")
        _check_subset(self.allow, "allow")
        watched = set(self.entities if self.entities is not None else PII_KINDS)
        if watched <= set(self.allow):
            raise ValueError("every detected entity is in `allow`: this signal could never match")
        return self


def summarize(findings: list[Finding], min_score: float, allow: frozenset[str] = frozenset()) -> Evaluation:
    """The evaluation of a detector's findings: labels are the best score per kind, the match
    (and score) come from findings at or above `min_score` whose kind is not allowed."""
    labels: dict[str, float] = {}
    blocking = 0.0
    evidence: list[str] = []
    kept = [f for f in findings if f.score >= min_score]
    for f in kept:
        labels[f.kind] = max(labels.get(f.kind, 0.0), f.score)
        if f.kind not in allow:
            blocking = max(blocking, f.score)
    for f in kept[:_MAX_EVIDENCE]:
        evidence.append(f.redacted + (" (allowed)" if f.kind in allow else ""))
    if len(kept) > _MAX_EVIDENCE:
        evidence.append(f"... and {len(kept) - _MAX_EVIDENCE} more")
    return Evaluation(matched=blocking > 0.0, score=blocking, labels=labels, evidence=tuple(evidence))


class PiiSignal(Signal):
    inline = True
    safety: ClassVar[bool] = True

    def __init__(self, spec: PiiSpec) -> None:
        super().__init__(spec)
        self.pspec = spec
        self._kinds = tuple(spec.entities) if spec.entities is not None else PII_KINDS
        self._allow = frozenset(spec.allow)

    def known_labels(self) -> frozenset[str]:
        return frozenset(self._kinds)

    def compute(self, request: RoutingRequest) -> Evaluation:
        text, total = join_bounded(s.text for s in request.iter_text(self.pspec.roles))
        findings = find_pii(text, self._kinds) if text else []
        ev = summarize(findings, self.pspec.min_score, self._allow)
        note = truncation_note(len(text), total)
        return Evaluation(ev.matched, ev.score, ev.labels, ev.evidence + note) if note else ev
