"""Secrets signal: credentials (cloud keys, tokens, private keys, JWTs, high-entropy assignments) in text."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from extproc.detectors.common import Finding
from extproc.detectors.secrets import SECRET_KINDS, find_secrets
from extproc.signals.base import Evaluation, TextSignalSpec
from extproc.signals.detector import DetectorSignal, selected_kinds, summarize


class SecretsSpec(TextSignalSpec):
    type: Literal["secrets"]
    kinds: list[str] | None = Field(default=None, min_length=1)  # None: every kind in SECRET_KINDS
    min_score: float = Field(default=0.5, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_kinds(self) -> SecretsSpec:
        selected_kinds(self.kinds, SECRET_KINDS, "kinds", "secret kind(s)")
        return self


class SecretsSignal(DetectorSignal):
    known_kinds = SECRET_KINDS
    spec: SecretsSpec

    def chosen_kinds(self) -> list[str] | None:
        return self.spec.kinds

    def find(self, text: str) -> list[Finding]:
        return find_secrets(text, self.kinds)

    def summarize(self, findings: list[Finding]) -> Evaluation:
        return summarize(findings, self.spec.min_score)
