"""Zero-shot image labels from a SigLIP-family encoder, as a typed signal.

Each label has one or more descriptions; each description is put into every template
("a photo of {}.") and the label's text embedding is the normalised mean of those prompt
embeddings, computed once at policy load (the encoder caches each prompt, so a reload
embeds only prompts it has not seen). Per request, each image's embedding (cached by
content hash) is scored against every label with SigLIP's own calibration,
`sigmoid(exp(logit_scale) * cos + logit_bias)`: an independent probability per label,
not a raw-cosine threshold.

A label *fires* when its probability (aggregated over the request's images by max or
mean) reaches its threshold and, with `top_k`, it is among the k most probable labels.
The signal matches when any label fires; `labels` in the result holds the fired labels
only (a rule leaf `label: passport` is true exactly when passport fired), and the evidence
shows the top probabilities either way.

With no vision model configured, or one that failed to load, the signal is unavailable
(unknown), never "no match"; its `on_error` decides what that means for a rule.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator, model_validator

from extproc.models.registry import ModelUnavailable
from extproc.models.siglip import Embeddings, VisionEncoder, get_vision_encoder
from extproc.signals.base import BuildContext, Evaluation, Signal, SignalContext, SignalSpecBase, SignalUnavailable

if TYPE_CHECKING:
    from extproc.models.executor import HeavyExecutor
    from extproc.protocol.request import RoutingRequest

log = logging.getLogger(__name__)

LABEL_PATTERN = r"^[A-Za-z0-9_.\-]+$"


class ImageLabelsSpec(SignalSpecBase):
    """Policy fields of an `image_labels` signal.

    `labels` maps a label name to its descriptions; an empty list means the label name
    itself, with underscores read as spaces. Descriptions are inserted into every template.
    """

    type: Literal["image_labels"] = "image_labels"
    labels: dict[str, list[str]] = Field(min_length=1)
    templates: list[str] = Field(default_factory=lambda: ["a photo of {}."], min_length=1)
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    thresholds: dict[str, float] = Field(default_factory=dict)  # per-label overrides
    top_k: int | None = Field(default=None, ge=1)  # only the k most probable labels may fire
    aggregate: Literal["max", "mean"] = "max"  # across the request's images

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        import re

        for label, descriptions in value.items():
            if not re.match(LABEL_PATTERN, label):
                raise ValueError(f"label {label!r} must match {LABEL_PATTERN}")
            if any(not d.strip() for d in descriptions):
                raise ValueError(f"label {label!r} has an empty description")
        return value

    @field_validator("templates")
    @classmethod
    def _check_templates(cls, value: list[str]) -> list[str]:
        for template in value:
            if template.count("{}") != 1:
                raise ValueError(f"template {template!r} must contain '{{}}' exactly once")
        return value

    @model_validator(mode="after")
    def _check_thresholds(self) -> ImageLabelsSpec:
        unknown = sorted(set(self.thresholds) - set(self.labels))
        if unknown:
            raise ValueError(f"thresholds name unknown label(s): {', '.join(unknown)}")
        for label, value in self.thresholds.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"threshold for {label!r} must be between 0 and 1")
        return self

    def prompts(self, label: str) -> list[str]:
        descriptions = self.labels[label] or [label.replace("_", " ")]
        return [template.format(d) for d in descriptions for template in self.templates]

    def threshold_for(self, label: str) -> float:
        return self.thresholds.get(label, self.threshold)


def label_embeddings(encoder: VisionEncoder, spec: ImageLabelsSpec) -> Embeddings:
    """(labels, D): each label's normalised mean prompt embedding, in `spec.labels` order."""
    rows = []
    for label in spec.labels:
        prompts = encoder.embed_texts(spec.prompts(label))
        mean = prompts.mean(axis=0)
        rows.append(mean / max(float(np.linalg.norm(mean)), 1e-12))
    return np.stack(rows).astype(np.float32)


def decide(
    spec: ImageLabelsSpec, label_names: Sequence[str], probabilities: npt.NDArray[np.float64], remote: int = 0
) -> Evaluation:
    """The evaluation from (images, labels) probabilities: aggregate, top-k, thresholds."""
    per_label = probabilities.max(axis=0) if spec.aggregate == "max" else probabilities.mean(axis=0)
    order = sorted(range(len(label_names)), key=lambda i: (-float(per_label[i]), label_names[i]))
    eligible = order[: spec.top_k] if spec.top_k is not None else order
    fired = {
        label_names[i]: float(per_label[i])
        for i in eligible
        if float(per_label[i]) >= spec.threshold_for(label_names[i])
    }
    best = float(per_label[order[0]]) if order else 0.0
    evidence = [
        "top: " + ", ".join(f"{label_names[i]}={float(per_label[i]):.3f}" for i in order[:3]),
        f"images: {probabilities.shape[0]} ({spec.aggregate})",
    ]
    if remote:
        evidence.append(f"{remote} remote image(s) not inspected")
    return Evaluation(matched=bool(fired), score=best, labels=fired, evidence=tuple(evidence))


class ImageLabelsSignal(Signal):
    reads: ClassVar[frozenset[str]] = frozenset({"image"})
    implies_image: ClassVar[bool] = True

    spec: ImageLabelsSpec

    def __init__(self, spec: ImageLabelsSpec) -> None:
        super().__init__(spec)
        self.spec = spec
        self.label_names: list[str] = list(spec.labels)
        self.encoder: VisionEncoder | None = None
        self.label_matrix: Embeddings | None = None
        self._reason: str | None = "not built"

    @classmethod
    def build(cls, spec: ImageLabelsSpec, ctx: BuildContext) -> ImageLabelsSignal:
        """Get the shared vision encoder (loading it on first use) and embed this signal's labels."""
        signal = cls(spec)
        try:
            encoder = get_vision_encoder(ctx.models, ctx.settings.vision, ctx.executor)
        except ModelUnavailable as exc:
            signal._reason = f"vision model unavailable: {exc}"
            log.warning("signal %s is unavailable: %s", spec.name, signal._reason)
            return signal
        signal.attach(encoder, ctx.executor)
        return signal

    @classmethod
    def with_encoder(cls, spec: ImageLabelsSpec, encoder: VisionEncoder) -> ImageLabelsSignal:
        """A signal over an already-loaded encoder (tests, benchmarks)."""
        signal = cls(spec)
        signal.attach(encoder)
        return signal

    def attach(self, encoder: VisionEncoder, executor: HeavyExecutor | None = None) -> None:
        """Use `encoder`; embed the labels now (on `executor` when given)."""
        try:
            if executor is None:
                matrix = label_embeddings(encoder, self.spec)
            else:
                matrix = executor.submit_sync(label_embeddings, encoder, self.spec)
        except Exception as exc:  # a broken text tower or tokenizer: unknown, loudly
            self._reason = f"label embeddings failed: {exc}"
            log.error("signal %s: %s", self.spec.name, self._reason)
            return
        self.encoder = encoder
        self.label_matrix = matrix
        self._reason = None

    def unavailable_reason(self) -> str | None:
        return self._reason

    def known_labels(self) -> frozenset[str]:
        return frozenset(self.spec.labels)

    def probabilities(self, image_embeddings: Embeddings) -> npt.NDArray[np.float64]:
        if self.encoder is None or self.label_matrix is None:
            raise SignalUnavailable(self._reason or "vision model unavailable")
        return self.encoder.probabilities(image_embeddings, self.label_matrix)

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        images = request.images
        remote = len(request.remote_images)
        if not images and not remote:
            # Known without any model: a request with no image shows no passport.
            return Evaluation(matched=False, evidence=("no images",))
        encoder = self.encoder
        if encoder is None or self.label_matrix is None:
            raise SignalUnavailable(self._reason or "vision model unavailable")
        if not images:
            # We never fetch remote URLs, so we cannot say what they show: unknown, not "no".
            raise SignalUnavailable(f"{remote} remote image URL(s) not fetched; image content unknown")
        cached = encoder.cached_embeddings(images)
        if all(c is not None for c in cached):
            embeddings = np.stack([c for c in cached if c is not None])  # cache hit: no executor hop
        else:
            embeddings = await ctx.executor.run(encoder.embed_decoded, images)
        return decide(self.spec, self.label_names, self.probabilities(embeddings), remote)

    def scores(self, image_embeddings: Embeddings) -> Mapping[str, float]:
        """Aggregated probability of every label (for probes and traces)."""
        probs = self.probabilities(image_embeddings)
        agg = probs.max(axis=0) if self.spec.aggregate == "max" else probs.mean(axis=0)
        return {label: float(p) for label, p in zip(self.label_names, agg, strict=True)}
