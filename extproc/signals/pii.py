"""PII signal: personal data (emails, phones, cards, SSNs, IBANs, passport numbers) in text.

With `ner: {model: DIR, labels: {PER: person_name, LOC: location}, min_score: 0.6}` a local
token-classification checkpoint (`extproc.models.ner`) adds entity kinds the patterns cannot
see (names, places, dates). That variant (`PiiNerSignal`, chosen at build time) runs the model
on the heavy executor; the pattern-only signal stays inline and untouched.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from extproc.detectors.common import Finding, drop_overlaps, join_bounded, truncation_note
from extproc.detectors.pii import PII_KINDS, find_pii
from extproc.models.registry import ModelUnavailable
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import (
    COST_EMBEDDING,
    BuildContext,
    Evaluation,
    Signal,
    SignalContext,
    SignalUnavailable,
    TextSignalSpec,
)
from extproc.signals.detector import DetectorSignal, selected_kinds, summarize

if TYPE_CHECKING:
    from extproc.models.ner import NerModel

log = logging.getLogger(__name__)
_KIND = re.compile(r"^[a-z][a-z0-9_]*$")


class PiiNerSpec(BaseModel):
    """A token-classification checkpoint whose entity types (`PER`, `LOC`...) map to PII kinds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)  # a checkpoint directory
    labels: dict[str, str] = Field(min_length=1)  # entity type (no B-/I- prefix) -> PII kind
    min_score: float = Field(default=0.6, ge=0.0, le=1.0)  # an entity's mean word probability
    max_chars: int = Field(default=8000, ge=16)  # NER reads at most this much of the text (windows of <=512 tokens)

    @field_validator("labels")
    @classmethod
    def _kinds(cls, value: dict[str, str]) -> dict[str, str]:
        bad = sorted(kind for kind in value.values() if not _KIND.match(kind))
        if bad:
            raise ValueError(f"PII kinds must be lower_snake_case: {', '.join(map(repr, bad))}")
        return value

    def kinds(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.labels.values()))


class PiiSpec(TextSignalSpec):
    type: Literal["pii"]
    entities: list[str] | None = Field(default=None, min_length=1)  # None: every kind in PII_KINDS
    allow: list[str] = Field(default_factory=list)  # detected and reported, but they do not make the signal match
    min_score: float = Field(default=0.5, ge=0.0, le=1.0)
    ner: PiiNerSpec | None = None  # optional NER model: names, places, dates...

    def known_kinds(self) -> tuple[str, ...]:
        """Pattern kinds, then the kinds the NER mapping adds."""
        extra = self.ner.kinds() if self.ner is not None else ()
        return PII_KINDS + tuple(k for k in extra if k not in PII_KINDS)

    @model_validator(mode="after")
    def _check_kinds(self) -> PiiSpec:
        known = self.known_kinds()
        selected_kinds(self.entities, known, "entities", "PII kind(s)")
        selected_kinds(self.allow, known, "allow", "PII kind(s)")
        watched = set(self.entities if self.entities is not None else known)
        if watched <= set(self.allow):
            raise ValueError("every detected entity is in `allow`: this signal could never match")
        if self.ner is not None and self.entities is not None and watched.isdisjoint(self.ner.kinds()):
            raise ValueError("ner: none of its kinds is in `entities`; the model would never be used")
        return self


class PiiSignal(DetectorSignal):
    known_kinds = PII_KINDS
    spec: PiiSpec

    @classmethod
    def build(cls, spec: PiiSpec, ctx: BuildContext) -> Signal:
        if spec.ner is not None:
            return PiiNerSignal.build_ner(spec, ctx)
        return cls(spec)

    def chosen_kinds(self) -> list[str] | None:
        return self.spec.entities

    def find(self, text: str) -> list[Finding]:
        return find_pii(text, self.kinds)

    def summarize(self, findings: list[Finding]) -> Evaluation:
        return summarize(findings, self.spec.min_score, frozenset(self.spec.allow))


def redact_entity(kind: str, value: str) -> str:
    """Evidence for an NER finding: the kind and the span's length, none of its characters."""
    return f"{kind} {'*' * min(len(value), 8)} ({len(value)} chars)"


class PiiNerSignal(PiiSignal):
    """PII patterns plus a token-classification model, merged; heavy (the model runs on the executor).

    Pattern findings win where they overlap an entity. Without its model the signal is
    unavailable (unknown, failing closed by default), never "no".
    """

    inline: ClassVar[bool] = False
    cost: ClassVar[int] = COST_EMBEDDING

    def __init__(self, spec: PiiSpec, ner: NerModel | None = None, reason: str | None = None) -> None:
        super().__init__(spec)
        assert spec.ner is not None
        self.ner_spec = spec.ner
        self.ner = ner
        self.reason = reason
        self.kinds = tuple(spec.entities) if spec.entities is not None else spec.known_kinds()
        self.pattern_kinds = [k for k in self.kinds if k in PII_KINDS]
        self._priority = {k: 0 for k in PII_KINDS} | {k: 1 for k in self.ner_spec.kinds() if k not in PII_KINDS}

    @classmethod
    def build_ner(cls, spec: PiiSpec, ctx: BuildContext) -> PiiNerSignal:
        from extproc.models.ner import get_ner

        assert spec.ner is not None
        try:
            ctx.executor.apply_thread_budget()
            ner = get_ner(ctx.models, spec.ner.model, torch_threads=ctx.settings.dispatch.torch_threads)
        except ModelUnavailable as exc:
            reason = f"NER model {spec.ner.model} unavailable: {exc}"
            log.warning("signal %s is unavailable: %s", spec.name, reason)
            return cls(spec, None, reason)
        unknown = sorted(set(spec.ner.labels) - ner.types)
        if unknown:
            raise ValueError(
                f"ner.labels: the model has no entity type(s) {', '.join(map(repr, unknown))}; "
                f"its types are {sorted(ner.types)}"
            )
        return cls(spec, ner)

    def unavailable_reason(self) -> str | None:
        return self.reason if self.ner is None else None

    def find(self, text: str) -> list[Finding]:
        return find_pii(text, self.pattern_kinds)

    def compute(self, request: RoutingRequest) -> Evaluation:
        raise NotImplementedError("PiiNerSignal runs a model: use evaluate (it is not inline)")

    def entities(self, ner: NerModel, text: str) -> list[Finding]:
        """The model's entities in `text` as findings of their mapped kinds (on the executor)."""
        out: list[Finding] = []
        wanted = set(self.kinds)
        for entity in ner.find(text):
            kind = self.ner_spec.labels.get(entity.type)
            if kind is None or kind not in wanted or entity.score < self.ner_spec.min_score:
                continue
            redacted = redact_entity(kind, text[entity.start : entity.end])
            out.append(Finding(kind, entity.start, entity.end, entity.score, redacted))
        return out

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        ner = self.ner
        if ner is None:
            raise SignalUnavailable(self.reason or "NER model not loaded")
        text, total = join_bounded(s.text for s in request.iter_text(self.spec.roles))
        if not text:
            return self.summarize([])
        found = self.find(text)
        cap = self.ner_spec.max_chars
        found += await ctx.executor.run(self.entities, ner, text[:cap])
        evaluation = self.summarize(drop_overlaps(found, self._priority))
        notes = truncation_note(len(text), total)
        if len(text) > cap:
            notes += (f"ner: read the first {cap} of {len(text)} characters",)
        if not notes:
            return evaluation
        return Evaluation(evaluation.matched, evaluation.score, evaluation.labels, evaluation.evidence + notes)
