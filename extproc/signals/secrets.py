"""Secrets signal: credentials (cloud keys, tokens, private keys, JWTs, high-entropy assignments) in text."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from extproc.detectors.common import join_bounded, truncation_note
from extproc.detectors.secrets import SECRET_KINDS, find_secrets
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, TextSignalSpec
from extproc.signals.pii import summarize


class SecretsSpec(TextSignalSpec):
    type: Literal["secrets"]
    kinds: list[str] | None = Field(default=None, min_length=1)  # None: every kind in SECRET_KINDS
    min_score: float = Field(default=0.5, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_kinds(self) -> SecretsSpec:
        if self.kinds is not None:
            unknown = [k for k in self.kinds if k not in SECRET_KINDS]
            if unknown:
                raise ValueError(
                    f"kinds: unknown secret kind(s) {', '.join(map(repr, unknown))}; known: {', '.join(SECRET_KINDS)}"
                )
        return self


class SecretsSignal(Signal):
    inline = True
    safety: ClassVar[bool] = True

    def __init__(self, spec: SecretsSpec) -> None:
        super().__init__(spec)
        self.sspec = spec
        self._kinds = tuple(spec.kinds) if spec.kinds is not None else SECRET_KINDS

    def known_labels(self) -> frozenset[str]:
        return frozenset(self._kinds)

    def compute(self, request: RoutingRequest) -> Evaluation:
        text, total = join_bounded(s.text for s in request.iter_text(self.sspec.roles))
        findings = find_secrets(text, self._kinds) if text else []
        ev = summarize(findings, self.sspec.min_score)
        note = truncation_note(len(text), total)
        return Evaluation(ev.matched, ev.score, ev.labels, ev.evidence + note) if note else ev
