"""domain: which subject a request is about (biology, law, math, ... 14 subjects by default).

    - {name: subject, type: domain, threshold: 0.5, fallback: other}
    leaf: {signal: subject, label: math}

Only the user's own words count: the user turns (never system prompts, tool results or
assistant text), each with its fenced code blocks removed (a turn that is only code says
nothing of its subject and is skipped). The newest user turn weighs 1, the one before
`earlier_weight`, the one before that `earlier_weight`^2, ...; the turns' probability
vectors are averaged with those weights, so a follow-up ("and the second part?") keeps the
subject of the conversation while a clear new question wins.

The result's `labels` holds one label: the top subject with its probability when that
reaches `threshold`, else `fallback` (with the top probability as its score). The evidence
names the top label, its probability and the runner-up, and the stage that decided.

Two backends:
- the shipped cascade (`extproc.models.domain_classifier`, default): stage 1 (a logistic
  regression over hashed n-grams and distilled static MiniLM token vectors, ~0.1 ms) decides
  every text it is confident about without a thread hop (`answer_now`); only texts it is
  unsure of are embedded with MiniLM, in the heavy executor's coalesced encoder batches
  (`signals.cascade`: one embedding per text, shared with `semantic`, `complexity`, the
  answer cache and concurrent requests).
  `confident` overrides stage 1's threshold (1.0: every text is embedded; 0.0: stage 1
  always decides).
- `model_dir`: any local Hugging Face sequence-classification checkpoint (e.g. a
  ModernBERT / mmBERT subject classifier). Label names come from a `category_mapping.json`
  beside the weights (`idx_to_category`, VSR's format) when there is one, else from the
  checkpoint's `config.id2label`; never from an assumed order.

`labels_map` renames the model's labels to the policy's (`{computer_science: computer science}`
or several to one: their probabilities add up); labels it does not name keep their names.
A routing signal: without its model it is unknown (`on_error: no_match` by default).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator, model_validator

from extproc.models.hf_classifier import HfTextClassifier, check_label_mapping, get_hf_classifier
from extproc.models.registry import ModelRegistry, ModelUnavailable
from extproc.models.text_embedder import TextEmbedder
from extproc.protocol.request import Role, RoutingRequest
from extproc.signals.base import (
    COST_EMBEDDING,
    BuildContext,
    Evaluation,
    ModelSignal,
    SignalContext,
    SignalUnavailable,
    TextSignalSpec,
)
from extproc.signals.cascade import TwoStageCascade

log = logging.getLogger(__name__)

DOMAIN_MODEL_NAME = "domain_classifier"  # the shipped cascade's name in the model registry
CATEGORY_MAPPING_FILE = "category_mapping.json"
LABEL_PATTERN = re.compile(r"^[A-Za-z0-9_.\- ]+$")
_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)

FloatArray = npt.NDArray[np.float32]


class DomainSpec(TextSignalSpec):
    type: Literal["domain"]
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    fallback: str = Field(default="other", min_length=1)
    model_dir: str | None = Field(default=None, min_length=1)  # None: the shipped cascade
    labels_map: dict[str, str] = Field(default_factory=dict)  # model label -> policy label
    confident: float | None = Field(default=None, ge=0.0, le=1.0)  # shipped cascade: stage 1's threshold
    earlier_weight: float = Field(default=0.5, ge=0.0, le=1.0)  # each older user turn's weight factor
    max_turns: int = Field(default=4, ge=1)  # the newest N user turns
    max_chars: int = Field(default=2000, ge=16)  # per turn, head + tail

    @field_validator("roles")
    @classmethod
    def _user_only(cls, roles: list[Role]) -> list[Role]:
        if roles != [Role.USER]:
            raise ValueError("domain reads the user's own turns only; roles cannot be changed")
        return roles

    @field_validator("labels_map")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = sorted(v for v in value.values() if not LABEL_PATTERN.match(v))
        if bad:
            raise ValueError(f"policy label names must match {LABEL_PATTERN.pattern}: {', '.join(map(repr, bad))}")
        return value

    @model_validator(mode="after")
    def _check(self) -> DomainSpec:
        if not LABEL_PATTERN.match(self.fallback):
            raise ValueError(f"fallback must match {LABEL_PATTERN.pattern}")
        if self.model_dir is not None and "confident" in self.model_fields_set:
            raise ValueError("confident applies to the shipped cascade, not to a model_dir checkpoint")
        if self.model_dir is None and self.labels_map:
            from extproc.models.domain_classifier import SUBJECTS

            check_label_mapping(self.labels_map, SUBJECTS, "labels_map (the shipped classifier's subjects)")
        return self


@dataclass(frozen=True, slots=True)
class Turn:
    where: str  # "message[3]"
    text: str
    weight: float


def strip_code(text: str) -> str:
    """The text without its fenced code blocks (``` or ~~~, an unclosed fence runs to the end)."""
    if "```" not in text and "~~~" not in text:
        return text
    return _FENCED_CODE.sub(" ", text)


def select_turns(request: RoutingRequest, spec: DomainSpec) -> list[Turn]:
    """The newest `max_turns` user turns with words left once code is removed, newest first,
    weighted 1, earlier_weight, earlier_weight^2, ... (a turn's text parts are joined)."""
    by_message: dict[int, list[str]] = {}
    for segment in request.iter_text((Role.USER,)):
        by_message.setdefault(segment.message_index, []).append(segment.text)
    turns: list[Turn] = []
    for index in sorted(by_message, reverse=True):
        text = " ".join(strip_code("\n".join(by_message[index])).split())
        if not any(ch.isalpha() for ch in text):
            continue
        if len(text) > spec.max_chars:
            head = spec.max_chars * 3 // 4
            text = text[:head] + " ... " + text[len(text) - (spec.max_chars - head) :]
        turns.append(Turn(f"message[{index}]", text, spec.earlier_weight ** len(turns)))
        if len(turns) >= spec.max_turns:
            break
    return [t for t in turns if t.weight > 0.0] or turns[:1]


def combine(turns: Sequence[Turn], probs: Sequence[FloatArray]) -> FloatArray:
    if len(probs) == 1:
        return np.asarray(probs[0], dtype=np.float32)
    weights = np.array([t.weight for t in turns], dtype=np.float32)
    stacked = np.stack([np.asarray(p, dtype=np.float32) for p in probs])
    return np.asarray((weights[:, None] * stacked).sum(axis=0) / float(weights.sum()), dtype=np.float32)


# Below an embedding's cost class: the shipped cascade answers most texts inline, so lazy dispatch
# runs it before the embedding signals of the same rule (`complexity`), which a non-matching
# subject then makes unnecessary.
COST_DOMAIN = COST_EMBEDDING // 2


class DomainSignal(ModelSignal[Any]):
    """The `domain` type; `build` returns the backend's subclass."""

    cost: ClassVar[int] = COST_DOMAIN
    spec: DomainSpec

    def __init__(self, spec: DomainSpec, model: Any = None, reason: str | None = None) -> None:
        super().__init__(spec, model, reason)
        self.spec = spec
        self.model_labels: tuple[str, ...] = ()
        self.columns: dict[str, list[int]] = {}
        self.identity_columns = False  # every model column is its own policy label, in order

    @classmethod
    def build(cls, spec: DomainSpec, ctx: BuildContext) -> DomainSignal:
        if spec.model_dir is None:
            return ShippedDomainSignal.build_shipped(spec, ctx)
        return CheckpointDomainSignal.build_checkpoint(spec, ctx)

    def set_labels(self, model_labels: Sequence[str]) -> None:
        """The policy labels by the model's columns (labels_map applied; several may add up)."""
        self.model_labels = tuple(model_labels)
        self.columns = {}
        for i, label in enumerate(self.model_labels):
            self.columns.setdefault(self.spec.labels_map.get(label, label), []).append(i)
        self.identity_columns = all(cols == [i] for i, cols in enumerate(self.columns.values()))

    def known_labels(self) -> frozenset[str] | None:
        if not self.columns:
            return None  # not loaded: any label may be right (checked when it loads)
        return frozenset([*self.columns, self.spec.fallback])

    def policy_probs(self, probs: FloatArray) -> dict[str, float]:
        if self.identity_columns:  # no labels merged: the row as it is (the common, per-request case)
            return dict(zip(self.columns, np.asarray(probs, dtype=np.float64).tolist(), strict=True))
        return {name: float(probs[cols].sum()) for name, cols in self.columns.items()}

    def result(self, turns: Sequence[Turn], probs: Sequence[FloatArray], notes: Sequence[str]) -> Evaluation:
        combined = self.policy_probs(combine(turns, probs))
        ranked = sorted(combined.items(), key=lambda kv: (-kv[1], kv[0]))
        (top, p_top), (second, p_second) = ranked[0], ranked[1] if len(ranked) > 1 else ("none", 0.0)
        evidence = [f"top {top}={p_top:.3f}, runner-up {second}={p_second:.3f}"]
        if p_top >= self.spec.threshold:
            label = top
        else:
            label = self.spec.fallback
            evidence.append(f"below threshold {self.spec.threshold:g}: {self.spec.fallback}")
        evidence.append(f"{len(turns)} user turn(s), newest {turns[0].where}")
        evidence.extend(notes)
        return Evaluation(matched=True, score=p_top, labels={label: max(p_top, 1e-6)}, evidence=tuple(evidence))


# -- the shipped cascade -------------------------------------------------------------------------


class ShippedDomainModel(TwoStageCascade[FloatArray]):
    """The shipped classifier as a `TwoStageCascade`: stage 1's probabilities and stage 2's (for
    a text stage 1 was unsure of) cached by text on the model, not on a signal: every `domain`
    signal on the shipped weights (the default policy has `subject` and `subject_area`) reads the
    same probabilities, so a text is classified once whichever asks."""

    def __init__(self, inner: Any, cache_size: int = 4096) -> None:
        super().__init__(inner.first_stage_probs, inner.embedding_probs, cache_size=cache_size)
        self.inner = inner
        self.labels: tuple[str, ...] = tuple(inner.labels)
        self.confident = float(inner.confident)


def load_shipped_domain(directory: Path | None = None) -> ShippedDomainModel:
    from extproc.models.domain_classifier import DomainClassifier

    return ShippedDomainModel(DomainClassifier.load(directory))


def get_shipped_domain(models: ModelRegistry) -> ShippedDomainModel:
    model: ShippedDomainModel = models.get(
        DOMAIN_MODEL_NAME, load_shipped_domain, detail="shipped 14-subject domain classifier"
    )
    return model


class ShippedDomainSignal(DomainSignal):
    def __init__(
        self,
        spec: DomainSpec,
        model: ShippedDomainModel | None = None,
        reason: str | None = None,
        embedder: TextEmbedder | None = None,
        embedder_reason: str | None = None,
    ) -> None:
        super().__init__(spec, model, reason)
        self.embedder = embedder
        self.embedder_reason = embedder_reason
        if model is not None:
            self.set_labels(model.labels)

    @classmethod
    def build_shipped(cls, spec: DomainSpec, ctx: BuildContext) -> ShippedDomainSignal:
        try:
            model = get_shipped_domain(ctx.models)
        except ModelUnavailable as exc:
            reason = f"shipped domain classifier unavailable: {exc}"
            log.warning("signal %s is unavailable: %s", spec.name, reason)
            return cls(spec, None, reason)
        embedder: TextEmbedder | None = None
        embedder_reason: str | None = None
        if spec.confident is None or spec.confident > 0.0:
            embedder, embedder_reason = ctx.embedding_stage(spec.name)
        return cls(spec, model, None, embedder, embedder_reason)

    def shipped(self) -> ShippedDomainModel:
        model: ShippedDomainModel = self.require_model()
        return model

    def confident(self, model: ShippedDomainModel) -> float:
        return self.spec.confident if self.spec.confident is not None else model.confident

    def first_stage(self, turns: Sequence[Turn]) -> tuple[list[FloatArray], list[int]]:
        """Stage-1 probabilities of every turn, and the turns it is unsure of (not cached in stage 2)."""
        model = self.shipped()
        confident = self.confident(model)
        probs: list[FloatArray] = []
        unsure: list[int] = []
        for i, turn in enumerate(turns):
            p = model.first(turn.text)
            if float(p.max()) < confident:  # a text stage 2 answered before needs no executor hop
                cached = model.known_second(turn.text)
                if cached is None:
                    unsure.append(i)
                else:
                    p = cached
            probs.append(p)
        return probs, unsure

    def answer_now(self, request: RoutingRequest) -> Evaluation | None:
        """Stage 1 decides (or stage 2 is cached) for every turn: the answer, with no task or hop."""
        if self.model is None:
            return None
        turns = select_turns(request, self.spec)
        if not turns:
            return Evaluation(matched=False, evidence=("no user text",))
        probs, unsure = self.first_stage(turns)
        if unsure:
            return None
        return self.result(turns, probs, ["stage: first"])

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        turns = select_turns(request, self.spec)
        if not turns:
            return Evaluation(matched=False, evidence=("no user text",))
        probs, unsure = self.first_stage(turns)
        if not unsure:
            return self.result(turns, probs, ["stage: first"])
        if self.embedder is None:
            raise SignalUnavailable(
                f"{len(unsure)} turn(s) need the embedding stage: {self.embedder_reason or 'no text embedder'}"
            )
        texts = [turns[i].text for i in unsure]
        fresh = await self.shipped().second(
            ctx.executor, self.embedder, texts, [probs[i] for i in unsure], looked_up=True
        )
        for i, p in zip(unsure, fresh, strict=True):
            probs[i] = p
        return self.result(turns, probs, [f"stage: embedding for {len(unsure)} of {len(turns)} turn(s)"])


# -- any local checkpoint ------------------------------------------------------------------------


def checkpoint_label_names(model_dir: Path, model: HfTextClassifier) -> tuple[str, ...]:
    """The checkpoint's label names: `category_mapping.json`'s idx_to_category when present
    (it must number every output 0..n-1), else config.id2label (as the classifier read it)."""
    mapping_file = Path(model_dir) / CATEGORY_MAPPING_FILE
    if not mapping_file.is_file():
        return model.labels
    try:
        data = json.loads(mapping_file.read_text(encoding="utf-8"))
        raw = data["idx_to_category"]
        by_id = {int(k): str(v) for k, v in dict(raw).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelUnavailable(f"{mapping_file}: cannot read idx_to_category: {exc}") from exc
    n = len(model.labels)
    if sorted(by_id) != list(range(n)):
        raise ModelUnavailable(
            f"{mapping_file}: idx_to_category must number the checkpoint's {n} outputs 0..{n - 1}, got {sorted(by_id)}"
        )
    return tuple(by_id[i] for i in range(n))


class CheckpointDomainSignal(DomainSignal):
    """A sequence-classification checkpoint directory (on the heavy executor)."""

    cost: ClassVar[int] = COST_EMBEDDING  # a transformer pass on every text

    @classmethod
    def build_checkpoint(cls, spec: DomainSpec, ctx: BuildContext) -> CheckpointDomainSignal:
        assert spec.model_dir is not None
        try:
            ctx.executor.apply_thread_budget()
            model = get_hf_classifier(
                ctx.models, Path(spec.model_dir), torch_threads=ctx.settings.dispatch.torch_threads
            )
            labels = checkpoint_label_names(Path(spec.model_dir), model)
        except ModelUnavailable as exc:
            reason = f"domain checkpoint {spec.model_dir} unavailable: {exc}"
            log.warning("signal %s is unavailable: %s", spec.name, reason)
            return cls(spec, None, reason)
        # A labels_map naming labels the checkpoint does not have is a policy error, not an outage.
        check_label_mapping(spec.labels_map, labels, "labels_map")
        signal = cls(spec, model)
        signal.set_labels(labels)
        return signal

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        model: HfTextClassifier = self.require_model()
        turns = select_turns(request, self.spec)
        if not turns:
            return Evaluation(matched=False, evidence=("no user text",))
        rows = await ctx.executor.run(model.predict, [t.text for t in turns])
        probs = [np.asarray(rows[i], dtype=np.float32) for i in range(len(turns))]
        if model.multi_label:  # independent sigmoids: normalise so the turns' mixture is a distribution
            probs = [p / max(float(p.sum()), 1e-9) for p in probs]
        return self.result(turns, probs, [f"checkpoint {Path(self.spec.model_dir or '').name}"])


def subject_probabilities(signal: DomainSignal, probs: FloatArray) -> Mapping[str, float]:
    """Public view of a probability row as policy labels (bench and eval tools)."""
    return signal.policy_probs(probs)
