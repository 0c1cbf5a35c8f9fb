"""Jailbreak signal: instruction overrides, system-prompt exfiltration and role-play escapes.

Reads the user's text by default (`roles` can add others). Per category the score is the
strongest finding's; the signal matches when any category reaches `threshold`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from extproc.detectors.common import join_bounded, truncation_note
from extproc.detectors.jailbreak import JAILBREAK_CATEGORIES, find_jailbreak
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, TextSignalSpec

_MAX_EVIDENCE = 10


class JailbreakSpec(TextSignalSpec):
    type: Literal["jailbreak"]
    categories: list[str] | None = Field(default=None, min_length=1)  # None: every category
    threshold: float = Field(default=0.5, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_categories(self) -> JailbreakSpec:
        if self.categories is not None:
            unknown = [c for c in self.categories if c not in JAILBREAK_CATEGORIES]
            if unknown:
                raise ValueError(
                    f"categories: unknown jailbreak categor(y/ies) {', '.join(map(repr, unknown))}; "
                    f"known: {', '.join(JAILBREAK_CATEGORIES)}"
                )
        return self


class JailbreakSignal(Signal):
    inline = True
    safety: ClassVar[bool] = True

    def __init__(self, spec: JailbreakSpec) -> None:
        super().__init__(spec)
        self.jspec = spec
        self._categories = tuple(spec.categories) if spec.categories is not None else JAILBREAK_CATEGORIES

    def known_labels(self) -> frozenset[str]:
        return frozenset(self._categories)

    def compute(self, request: RoutingRequest) -> Evaluation:
        text, total = join_bounded(s.text for s in request.iter_text(self.jspec.roles))
        findings = find_jailbreak(text, self._categories) if text else []
        labels: dict[str, float] = {}
        for f in findings:
            labels[f.kind] = max(labels.get(f.kind, 0.0), f.score)
        score = max(labels.values(), default=0.0)
        evidence = [f"{f.redacted} score={f.score:.2f}" for f in findings[:_MAX_EVIDENCE]]
        if len(findings) > _MAX_EVIDENCE:
            evidence.append(f"... and {len(findings) - _MAX_EVIDENCE} more")
        return Evaluation(
            matched=score >= self.jspec.threshold,
            score=score,
            labels=labels,
            evidence=tuple(evidence) + truncation_note(len(text), total),
        )
