"""semantic: similarity of the request's text to exemplar sets, with a sentence embedder.

Each label has a list of exemplar texts. At policy load the exemplars are embedded once
(all-MiniLM-L6-v2, see extproc.models.text_embedder); per request the selected texts are
embedded in one batch and compared by cosine. `method` picks how a label scores a text:
`max` (its nearest exemplar: good for paraphrases of known attacks), `centroid` (the
normalised mean of its exemplars: a domain such as "medical"), or `both` (the larger).
With `sources: [text, image_text]` the OCR text of the request's images is embedded too.

`views: [reader]` embeds, beside each text, the text as a reader sees it where it differs
(`extproc.detectors.reader_view`: zero-width characters dropped, look-alike letters mapped,
leetspeak and spaced-out letters read): a label scores the better of the two, and the evidence
names the view. `view_labels` limits that to some labels (a safety label such as `jailbreak`),
so the routing labels of the same signal score the text as sent, as without views. Only a text
with something to undo (rare) costs an embedding more.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from extproc.detectors.reader_view import reader_view
from extproc.models.ocr import OcrService
from extproc.models.registry import ModelUnavailable
from extproc.models.text_embedder import FloatArray, TextEmbedder
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import (
    COST_EMBEDDING,
    COST_OCR,
    BuildContext,
    Evaluation,
    Signal,
    SignalContext,
    SignalUnavailable,
    TextSignalSpec,
)
from extproc.signals.ocr_support import load_ocr, read_images

Source = Literal["text", "image_text"]


class SemanticSpec(TextSignalSpec):
    type: Literal["semantic"]
    exemplars: dict[str, list[str]] = Field(min_length=1)
    threshold: float = Field(default=0.5, ge=-1.0, le=1.0)
    thresholds: dict[str, float] = Field(default_factory=dict)  # per-label overrides
    method: Literal["max", "centroid", "both"] = "max"
    sources: list[Source] = Field(default_factory=lambda: list[Source](["text"]), min_length=1)
    max_chars: int = Field(default=2000, ge=16)  # per text; MiniLM reads 256 tokens anyway
    max_texts: int = Field(default=16, ge=1)  # the last N segments (the newest turns matter most)
    views: list[Literal["reader"]] = Field(default_factory=list)  # also embed the text as a reader sees it
    view_labels: list[str] | None = Field(default=None, min_length=1)  # labels a view may score (None: all)

    @field_validator("exemplars")
    @classmethod
    def _non_empty(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for label, texts in v.items():
            if not texts or not all(t.strip() for t in texts):
                raise ValueError(f"label {label!r} needs at least one non-empty exemplar")
        return v

    @model_validator(mode="after")
    def _check_view_labels(self) -> SemanticSpec:
        if self.view_labels is not None:
            if not self.views:
                raise ValueError("view_labels needs views (e.g. views: [reader])")
            unknown = sorted(set(self.view_labels) - set(self.exemplars))
            if unknown:
                raise ValueError(f"view_labels names labels with no exemplars: {', '.join(map(repr, unknown))}")
        return self


class SemanticSignal(Signal):
    cost: ClassVar[int] = COST_EMBEDDING

    def __init__(
        self,
        spec: SemanticSpec,
        embedder: TextEmbedder | None = None,
        reason: str | None = None,
        ocr: OcrService | None = None,
        ocr_reason: str | None = None,
    ) -> None:
        super().__init__(spec)
        self.spec: SemanticSpec = spec
        self._embedder = embedder
        self._reason = reason
        self._ocr = ocr
        self._ocr_reason = ocr_reason
        self._labels = list(spec.exemplars)
        self._exemplars: dict[str, FloatArray] = {}
        self._centroids: FloatArray | None = None

    @classmethod
    def build(cls, spec: SemanticSpec, ctx: BuildContext) -> SemanticSignal:
        embedder: TextEmbedder | None = None
        reason: str | None = None
        try:
            embedder = ctx.text_embedder()
        except ModelUnavailable as exc:
            reason = str(exc)
        ocr: OcrService | None = None
        ocr_reason: str | None = None
        kind: type[SemanticSignal] = cls
        if "image_text" in spec.sources:
            ocr, ocr_reason = load_ocr(ctx)
            kind = SemanticImageSignal
        signal = kind(spec, embedder, reason, ocr, ocr_reason)
        if embedder is not None:
            ctx.executor.submit_sync(signal.prepare)
        return signal

    def prepare(self) -> None:
        """Embed the exemplars (once per policy load) and their per-label centroids."""
        if self._embedder is None:
            return
        flat = [(label, text) for label, texts in self.spec.exemplars.items() for text in texts]
        vecs = self._embedder.embed([t for _, t in flat])
        centroids = []
        for label in self._labels:
            rows = vecs[[i for i, (lab, _) in enumerate(flat) if lab == label]]
            self._exemplars[label] = rows
            mean = rows.mean(axis=0)
            centroids.append(mean / max(float(np.linalg.norm(mean)), 1e-9))
        self._centroids = np.stack(centroids).astype(np.float32)

    def unavailable_reason(self) -> str | None:
        return self._reason if self._embedder is None else None

    def known_labels(self) -> frozenset[str]:
        return frozenset(self._labels)

    def label_scores(self, vecs: FloatArray) -> dict[str, float]:
        """Each label's best score over the rows of `vecs` (unit vectors)."""
        if self._centroids is None:
            self.prepare()
        assert self._centroids is not None
        out: dict[str, float] = {}
        for j, label in enumerate(self._labels):
            best = -1.0
            if self.spec.method in ("max", "both"):
                best = max(best, float((vecs @ self._exemplars[label].T).max()))
            if self.spec.method in ("centroid", "both"):
                best = max(best, float((vecs @ self._centroids[j]).max()))
            out[label] = best
        return out

    async def _texts(self, request: RoutingRequest, ctx: SignalContext) -> list[tuple[str, str]]:
        texts: list[tuple[str, str]] = []
        if "text" in self.spec.sources:
            segments = [s for s in request.iter_text(self.spec.roles) if s.text.strip()][-self.spec.max_texts :]
            texts += [(f"message[{s.message_index}]", s.text[: self.spec.max_chars]) for s in segments]
        if "image_text" in self.spec.sources and request.images:
            read = await read_images(self._ocr, self._ocr_reason, request, ctx)
            cap = self.spec.max_chars
            texts += [(f"image[{r.index}]", r.result.text[:cap]) for r in read if r.result.text.strip()]
        return texts

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        if self._embedder is None:
            raise SignalUnavailable(self._reason or "no text embedder")
        texts = await self._texts(request, ctx)
        if not texts:
            return Evaluation(matched=False)
        as_sent = len(texts)
        if "reader" in self.spec.views:
            for where, text in texts[:as_sent]:
                reading = reader_view(text)
                if reading is not None:
                    texts.append((f"{where} (as read: {reading.how})", reading.text))
        vecs = await ctx.executor.run(self._embedder.embed, [t for _, t in texts])
        per_text = [self.label_scores(vecs[i : i + 1]) for i in range(len(texts))]
        labels: dict[str, float] = {}
        evidence: list[str] = []
        nearest: tuple[float, str, float] = (-2.0, "", 0.0)  # the closest label, even below its threshold
        viewed = self.spec.view_labels
        for label in self._labels:
            rows = len(texts) if viewed is None or label in viewed else as_sent
            i_best = max(range(rows), key=lambda i: per_text[i][label])
            score = per_text[i_best][label]
            threshold = self.spec.thresholds.get(label, self.spec.threshold)
            nearest = max(nearest, (score, label, threshold))
            if score >= threshold:
                labels[label] = score
                evidence.append(f"{label}={score:.3f} >= {threshold:g} ({texts[i_best][0]})")
        if not labels:
            # No match: say how close it came, so a policy author can see what the threshold cut.
            score, label, threshold = nearest
            evidence.append(f"nearest {label}={score:.3f} < threshold {threshold:g}")
            return Evaluation(matched=False, score=max(score, 0.0), evidence=tuple(evidence))
        return Evaluation(matched=True, score=max(labels.values()), labels=labels, evidence=tuple(evidence))


class SemanticImageSignal(SemanticSignal):
    """A semantic signal that also reads the text in the request's images (OCR)."""

    reads: ClassVar[frozenset[str]] = frozenset({"text", "image"})
    cost: ClassVar[int] = COST_OCR  # reads OCR text of the images
