"""kb: a knowledge base of labelled exemplars, grouped, matched by sentence similarity.

Each label has exemplar texts; `groups` name sets of labels (a tier such as "privacy_policy"
over "pii", "internal_document", ...). A request's text is embedded once by the shared text
embedder (the same pass every semantic signal reads) and compared with every label's
exemplars; a group scores its best label. `match: best` reports the nearest label and the
groups holding it; `match: threshold` reports every label and group at or above `threshold`.
The signal matches when its `target` (a label or a group) is reported, or, without a target,
when anything is. Its score is the target's raw similarity (or the best one): a score input
with `value: score` reads it even below the threshold.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from extproc.protocol.request import RoutingRequest
from extproc.signals.base import BuildContext, Evaluation, SignalContext, SignalUnavailable, TextSignalSpec
from extproc.signals.semantic import SemanticSignal, SemanticSpec


class KbTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["label", "group"]
    value: str = Field(min_length=1)


class KbSpec(TextSignalSpec):
    type: Literal["kb"]
    labels: dict[str, list[str]] = Field(min_length=1)
    groups: dict[str, list[str]] = Field(default_factory=dict)
    target: KbTarget | None = None
    match: Literal["best", "threshold"] = "best"
    threshold: float = Field(default=0.5, ge=-1.0, le=1.0)
    method: Literal["max", "centroid", "both"] = "max"
    max_chars: int = Field(default=2000, ge=16)
    max_texts: int = Field(default=4, ge=1)

    @model_validator(mode="after")
    def _check(self) -> KbSpec:
        for label, texts in self.labels.items():
            if not texts or not all(t.strip() for t in texts):
                raise ValueError(f"label {label!r} needs at least one non-empty exemplar")
        for group, members in self.groups.items():
            unknown = [m for m in members if m not in self.labels]
            if unknown or not members:
                raise ValueError(f"group {group!r} names labels the knowledge base lacks: {unknown or 'none given'}")
            if group in self.labels:
                raise ValueError(f"group {group!r} has the name of a label")
        if self.target is not None:
            known = self.labels if self.target.kind == "label" else self.groups
            if self.target.value not in known:
                raise ValueError(f"target {self.target.kind} {self.target.value!r} is not in the knowledge base")
        return self

    def as_semantic(self) -> SemanticSpec:
        return SemanticSpec(
            type="semantic",
            name=self.name,
            roles=self.roles,
            exemplars=self.labels,
            threshold=self.threshold,
            method=self.method,
            max_chars=self.max_chars,
            max_texts=self.max_texts,
            on_error=self.on_error,
            timeout_ms=self.timeout_ms,
        )


class KbSignal(SemanticSignal):
    def __init__(self, spec: KbSpec, *args: object, **kwargs: object) -> None:
        super().__init__(spec.as_semantic(), *args, **kwargs)  # type: ignore[arg-type]
        self.kb = spec
        self.type = "kb"

    @classmethod
    def build(cls, spec: KbSpec, ctx: BuildContext) -> KbSignal:  # type: ignore[override]
        try:
            embedder, reason = ctx.text_embedder(), None
        except Exception as exc:  # ModelUnavailable: the signal is unknown, never "no"
            embedder, reason = None, str(exc)
        signal = cls(spec, embedder, reason)
        if embedder is not None:
            ctx.executor.submit_sync(signal.prepare)
        return signal

    def known_labels(self) -> frozenset[str]:
        return frozenset(self.kb.labels) | frozenset(self.kb.groups)

    def scores(self, label_scores: dict[str, float]) -> dict[str, float]:
        """Every label's and every group's similarity."""
        out = dict(label_scores)
        for group, members in self.kb.groups.items():
            out[group] = max(label_scores[m] for m in members)
        return out

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        if self._embedder is None:
            raise SignalUnavailable(self._reason or "no text embedder")
        texts = await self._texts(request, ctx)
        if not texts:
            return Evaluation(matched=False, evidence=("no text",))
        vecs = await ctx.executor.run(self._embedder.embed, [t for _, t in texts])
        return self.decide(self.label_scores(vecs))

    def decide(self, label_scores: dict[str, float]) -> Evaluation:
        kb = self.kb
        every = self.scores(label_scores)
        best = max(label_scores, key=lambda k: label_scores[k])
        if kb.match == "best":
            reported = {best: label_scores[best]}
            reported |= {g: every[g] for g, members in kb.groups.items() if best in members}
        else:
            reported = {k: v for k, v in every.items() if v >= kb.threshold}
        if kb.target is not None:
            matched = kb.target.value in reported
            score = every[kb.target.value]
            what = f"target {kb.target.kind} {kb.target.value} {score:.3f}"
        else:
            matched, score, what = bool(reported), label_scores[best], "any"
        ranked = sorted(every.items(), key=lambda kv: -kv[1])[:4]
        evidence = (
            f"{what}; match {kb.match}" + (f" (threshold {kb.threshold:g})" if kb.match == "threshold" else ""),
            "nearest: " + ", ".join(f"{k}={v:.3f}" for k, v in ranked),
        )
        return Evaluation(matched=matched, score=score, labels=reported, evidence=evidence)
