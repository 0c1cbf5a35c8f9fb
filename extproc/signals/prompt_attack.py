"""classifier: a learned text classifier as a signal, the shipped prompt-attack cascade or any
local Hugging Face sequence-classification checkpoint.

`model: builtin:prompt-attack` is the shipped cascade (`extproc.models.attack_classifier`):
a hashed character and shape n-gram logistic regression (inline: a few microseconds, in C)
and an MLP head over the all-MiniLM-L6-v2 sentence embedding. `stage` picks what runs:

- `lexical`: the n-gram stage alone, inline on the event loop. Default threshold: the
  model's `high` (where the lexical stage alone is confident).
- `embedding`: MiniLM on the heavy executor, then the head. Default threshold: the model's
  `decision`.
- `full` (default): the cascade in one signal. A text whose lexical probability is at or
  above `high` is an attack, below `low` benign, with no embedding; only texts in between
  are embedded and decided by the head against `decision` (or this spec's threshold). Its
  label's probability is that of the stage that decided.

Both stages' scores live on the shared cascade (`signals.cascade`), cached by text for every
builtin signal. The builtin's outputs are `attack` and `harmful` (rename them with `labels`).

`model: /path/to/checkpoint` is any sequence classifier saved with `save_pretrained`
(`extproc.models.hf_classifier`); its labels are `config.id2label`. `labels` maps them to
policy labels (`{INJECTION: attack, JAILBREAK: attack, BENIGN: benign}`): several mapped to
one policy label add up (softmax) or take the larger (multi-label sigmoid); unmapped ones are
dropped; no mapping keeps the checkpoint's names. A mapping that names a label the checkpoint
lacks fails the policy load. `precision: bf16` and `batch` pick the fast path (checked
against fp32 by `hf_classifier.check_parity`).

Each selected text (the newest `max_texts` segments of `roles`, each cut to `max_chars` as
head + tail) is classified on its own; a policy label's probability is its largest over the
texts. A label *fires* when that reaches its threshold (`thresholds[label]`, else
`threshold`, else the default above; 0.5 for checkpoints); only fired labels are in the
result, so `{signal: s, label: attack, min_score: 0.9}` reads naturally. The signal matches
when a label of `match_labels` fires (default: every label but `benign`, in any case).

A safety signal: unknown (model missing, timeout) fails closed by default (`on_error:
match`). Without its model the signal is unavailable, never "no". The `full` cascade without
MiniLM still answers texts the lexical stage is sure about and is unknown only when a text
needs the embedding stage.
"""

from __future__ import annotations

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
from extproc.models.lru import LruCache
from extproc.models.registry import ModelUnavailable
from extproc.models.text_embedder import TextEmbedder
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import (
    COST_EMBEDDING,
    BuildContext,
    Evaluation,
    ModelSignal,
    SignalContext,
    SignalUnavailable,
    TextSignalSpec,
)
from extproc.signals.classifier_views import text_views
from extproc.signals.prompt_attack_model import (
    BUILTIN_PROMPT_ATTACK,
    PromptAttackCascade,
    PromptAttackModel,
    get_prompt_attack,
)

log = logging.getLogger(__name__)

BUILTINS: tuple[str, ...] = (BUILTIN_PROMPT_ATTACK,)
ATTACK = "attack"  # the builtin's outputs: prompt attacks, and plain harmful requests
HARMFUL = "harmful"
BUILTIN_LABELS: tuple[str, ...] = (ATTACK, HARMFUL)
UNSURE_SUFFIX = "_unsure"  # the lexical stage's doubt: `attack_unsure`
BENIGN = "benign"
LABEL_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]+$")
CHECKPOINT_THRESHOLD = 0.5
MAX_EVIDENCE = 5

Stage = Literal["lexical", "embedding", "full"]
FloatArray = npt.NDArray[np.float32]


class ClassifierSpec(TextSignalSpec):
    type: Literal["classifier"]
    model: str = Field(min_length=1)  # builtin:prompt-attack, or a checkpoint directory
    stage: Stage = "full"  # builtin only
    labels: dict[str, str] = Field(default_factory=dict)  # checkpoint label -> policy label; {}: as named
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)  # None: the model's calibrated one / 0.5
    thresholds: dict[str, float] = Field(default_factory=dict)  # per policy label
    match_labels: list[str] | None = Field(default=None, min_length=1)  # None: all but `benign` (any case)
    max_chars: int = Field(default=2000, ge=16)  # per text, kept as head + tail
    max_texts: int = Field(default=8, ge=1)  # the newest segments of `roles`
    precision: Literal["fp32", "bf16"] = "fp32"  # checkpoints only
    batch: bool = True  # checkpoints only: several texts in one padded batch
    decode_payloads: bool = True  # builtin only: encoded payloads are judged by what they decode to
    strip_retractions: bool = True  # builtin only: "ignore my last message" is the user's own, not an override
    windows: bool = False  # builtin only: a long text's most suspicious sentences judged beside the whole

    @property
    def builtin(self) -> bool:
        return self.model.startswith("builtin:")

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = sorted(v for v in value.values() if not LABEL_PATTERN.match(v))
        if bad:
            raise ValueError(f"policy label names must match {LABEL_PATTERN.pattern}: {', '.join(map(repr, bad))}")
        return value

    @model_validator(mode="after")
    def _check(self) -> ClassifierSpec:
        for label, value in self.thresholds.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"thresholds[{label!r}] must be between 0 and 1")
        if self.builtin:
            if self.model not in BUILTINS:
                raise ValueError(f"unknown builtin model {self.model!r}; builtins: {', '.join(BUILTINS)}")
            check_label_mapping(
                self.labels, BUILTIN_LABELS, "labels (builtin:prompt-attack has the outputs 'attack' and 'harmful')"
            )
            fast = sorted({"precision", "batch"} & self.model_fields_set)
            if fast:
                raise ValueError(f"{', '.join(fast)} apply to checkpoint directories, not to {self.model}")
            outputs = self.policy_labels(BUILTIN_LABELS)
            names: list[str] | None = outputs
            if self.stage == "lexical":
                names = [*outputs, *(f"{n}{UNSURE_SUFFIX}" for n in outputs)]
        else:
            for field in ("stage", "decode_payloads", "strip_retractions", "windows"):
                if field in self.model_fields_set:
                    raise ValueError(f"{field} applies to {BUILTIN_PROMPT_ATTACK} only")
            names = list(dict.fromkeys(self.labels.values())) if self.labels else None
        if names is not None:
            check_policy_labels(self, names)
        return self

    def policy_labels(self, checkpoint: Sequence[str]) -> list[str]:
        """The policy labels for a checkpoint's labels, in checkpoint order."""
        if not self.labels:
            return list(dict.fromkeys(checkpoint))
        return list(dict.fromkeys(self.labels[c] for c in checkpoint if c in self.labels))

    def matching(self, names: Sequence[str]) -> list[str]:
        if self.match_labels is not None:
            return list(self.match_labels)
        return [n for n in names if n.lower() != BENIGN]


def check_policy_labels(spec: ClassifierSpec, names: Sequence[str]) -> None:
    """`thresholds` and `match_labels` may name only policy labels, and some label must be able to match."""
    known = set(names)
    for field, used in (("thresholds", list(spec.thresholds)), ("match_labels", spec.match_labels or [])):
        unknown = sorted(set(used) - known)
        if unknown:
            raise ValueError(f"{field} name unknown label(s) {', '.join(map(repr, unknown))}; labels: {sorted(known)}")
    if not spec.matching(names):
        raise ValueError(f"no label can make this signal match (labels {sorted(known)}); set match_labels")


# -- scoring shared by every backend ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Text:
    where: str  # "message[3]"
    text: str
    cut: bool  # longer than max_chars: head + tail kept


def select_texts(request: RoutingRequest, spec: ClassifierSpec) -> list[Text]:
    """The newest `max_texts` non-blank segments of `spec.roles`, each bounded to `max_chars`."""
    # Non-blank without strip()'s copy of every text.
    segments = [s for s in request.iter_text(spec.roles) if s.text and not s.text.isspace()][-spec.max_texts :]
    out: list[Text] = []
    for s in segments:
        text, cut = s.text, len(s.text) > spec.max_chars
        if cut:
            head = spec.max_chars * 3 // 4
            text = text[:head] + "\n...\n" + text[len(text) - (spec.max_chars - head) :]
        out.append(Text(f"message[{s.message_index}]", text, cut))
    return out


def summarize(
    spec: ClassifierSpec,
    names: Sequence[str],
    probs: Sequence[Mapping[str, float]],
    texts: Sequence[Text],
    threshold_of: Mapping[str, float | Sequence[float]],
    notes: Sequence[str] = (),
    eligible: Sequence[bool] | None = None,
    matching: Sequence[str] | None = None,
) -> Evaluation:
    """Labels fire at their thresholds on their best text; match when a `match_labels` label fires.

    A label's threshold is one number, or one per text (the shipped cascade: a short text needs
    more); `eligible` (per text) limits which texts may make a label fire (the cascade: only texts
    the head judged); the score is the best probability over every text either way. `matching`
    replaces the spec's match labels (labels that report doubt, not a finding)."""
    # Inline on every text request (the shipped cascade's lexical stage): one pass per label,
    # plain loops rather than generators and key lambdas.
    matching = spec.matching(names) if matching is None else matching
    fired: dict[str, float] = {}
    evidence: list[str] = []
    score = 0.0
    best_anywhere: list[tuple[float, str]] = []  # (best probability over every text, label)
    for name in names:
        given = threshold_of[name]
        limit, limits = (float(given), None) if isinstance(given, float | int) else (0.0, given)
        best, i_fire, p_fire = 0.0, -1, -1.0
        for i, row in enumerate(probs):
            p = float(row.get(name, 0.0))
            if p > best:
                best = p
            if eligible is not None and not eligible[i]:
                continue
            # The first text wins a tie.
            if p > p_fire and p >= (limits[i] if limits is not None else limit):
                i_fire, p_fire = i, p
        best_anywhere.append((best, name))
        if name in matching and best > score:
            score = best
        if i_fire >= 0:
            fired[name] = p_fire
            if len(evidence) < MAX_EVIDENCE:
                evidence.append(f"{name}={p_fire:.3f} ({texts[i_fire].where})")
    if not fired:
        top = sorted(best_anywhere, reverse=True)[:3]
        evidence.append("top: " + ", ".join(f"{n}={p:.3f}" for p, n in top))
    cut = sum(t.cut for t in texts)
    if cut:
        evidence.append(f"{cut} text(s) over {spec.max_chars} characters: head and tail classified")
    evidence.extend(notes)
    matched = any(name in matching for name in fired)
    return Evaluation(matched=matched, score=score, labels=fired, evidence=tuple(evidence))


class ClassifierSignal(ModelSignal[Any]):
    """The `classifier` type; `build` returns the backend's subclass."""

    safety: ClassVar[bool] = True
    cost: ClassVar[int] = COST_EMBEDDING
    spec: ClassifierSpec

    def __init__(self, spec: ClassifierSpec, model: Any = None, reason: str | None = None) -> None:
        super().__init__(spec, model, reason)
        self.spec = spec

    @classmethod
    def build(cls, spec: ClassifierSpec, ctx: BuildContext) -> ClassifierSignal:
        if spec.builtin:
            kind: type[PromptAttackSignal] = {
                "lexical": PromptAttackLexicalSignal,
                "embedding": PromptAttackEmbeddingSignal,
                "full": PromptAttackCascadeSignal,
            }[spec.stage]
            return kind.build_builtin(spec, ctx)
        return CheckpointClassifierSignal.build_checkpoint(spec, ctx)

    def label_names(self) -> list[str] | None:
        """The policy labels this signal can report; None while unknown (no model, no mapping)."""
        raise NotImplementedError

    def known_labels(self) -> frozenset[str] | None:
        names = self.label_names()
        return frozenset(names) if names is not None else None


class PromptAttackSignal(ClassifierSignal):
    """Common ground of the three builtin stages."""

    needs_embedder: ClassVar[bool] = False

    def __init__(
        self,
        spec: ClassifierSpec,
        model: PromptAttackCascade | None = None,
        reason: str | None = None,
        embedder: TextEmbedder | None = None,
        embedder_reason: str | None = None,
    ) -> None:
        super().__init__(spec, model, reason)
        self.embedder = embedder
        self.embedder_reason = embedder_reason
        # The model's outputs, or (no model) the builtin's, so that rules naming them still load.
        self.outputs: tuple[str, ...] = model.labels if model is not None else BUILTIN_LABELS
        self.names = [spec.labels.get(o, o) for o in self.outputs]  # policy label of each output
        # What each text is judged as (`judged_texts`), by text.
        self.views: LruCache[tuple[tuple[str, str], ...]] = LruCache(4096)

    @classmethod
    def build_builtin(cls, spec: ClassifierSpec, ctx: BuildContext) -> PromptAttackSignal:
        try:
            model = get_prompt_attack(ctx.models)
        except ModelUnavailable as exc:
            reason = f"{BUILTIN_PROMPT_ATTACK} unavailable: {exc}"
            log.warning("signal %s is unavailable: %s", spec.name, reason)
            return cls(spec, None, reason)
        unknown = sorted(set(spec.labels) - set(model.labels))
        if unknown:  # a policy naming outputs these weights lack is a policy error, not an outage
            raise ValueError(f"labels: the weights have no output(s) {', '.join(map(repr, unknown))}")
        embedder: TextEmbedder | None = None
        embedder_reason: str | None = None
        if cls.needs_embedder:
            embedder, embedder_reason = ctx.embedding_stage(spec.name)
        return cls(spec, model, None, embedder, embedder_reason)

    def label_names(self) -> list[str]:
        return list(dict.fromkeys(self.names))

    def judged_texts(self, request: RoutingRequest, model: PromptAttackModel) -> list[Text]:
        """`select_texts`, each text judged as what it means where its characters mislead the
        n-grams (encoded payloads, a user taking back their own message: `classifier_views`)."""
        texts = select_texts(request, self.spec)
        if not (self.spec.decode_payloads or self.spec.strip_retractions or self.spec.windows):
            return texts
        out: list[Text] = []
        for t in texts:
            views = self.views.get(t.text)
            if views is None:
                sp = self.spec
                views = text_views(
                    t.text, model, decode=sp.decode_payloads, retractions=sp.strip_retractions, windows=sp.windows
                )
                self.views.put(t.text, views)
            out.extend(Text(f"{t.where} {suffix}" if suffix else t.where, text, t.cut) for suffix, text in views)
        return out

    def attack_model(self) -> PromptAttackCascade:
        model: PromptAttackCascade = self.require_model()
        return model

    def override(self, name: str) -> float | None:
        """The spec's threshold for policy label `name`, if it sets one."""
        if name in self.spec.thresholds:
            return self.spec.thresholds[name]
        return self.spec.threshold

    def decision_thresholds(self, model: PromptAttackModel) -> dict[str, float]:
        """Each policy label's embedding-stage threshold (the weights' `decision` unless overridden)."""
        out: dict[str, float] = {}
        for output, name in zip(self.outputs, self.names, strict=True):
            override = self.override(name)
            out[name] = override if override is not None else model.thresholds(output).decision
        return out

    def sure_thresholds(
        self,
        model: PromptAttackModel,
        texts: Sequence[Text],
        *,
        overridable: bool,
        latin: Sequence[bool] | None = None,
    ) -> dict[str, list[float]]:
        """Each policy label's lexical sure threshold per text: the weights' `short_high` for a short
        text, which carries too little evidence for the lexical stage alone, `long_high` for a
        longer one (both at least `high`), or the spec's threshold where it is the deciding
        stage's (`overridable`: the lexical stage alone; not for texts decided at `script_high`).
        `latin`: `scripts_of(model, texts)` where the caller has it already."""
        out: dict[str, list[float]] = {}
        latin = scripts_of(model, texts) if latin is None else latin
        for output, name in zip(self.outputs, self.names, strict=True):
            override = self.override(name) if overridable else None
            thresholds = model.thresholds(output)
            out[name] = [thresholds.sure_for(t.text, override, read) for t, read in zip(texts, latin, strict=True)]
        return out

    def rows(self, scores: Sequence[Sequence[float]]) -> list[dict[str, float]]:
        """Per text, each policy label's probability."""
        return [dict(zip(self.names, row, strict=True)) for row in scores]

    async def scored_by_head(
        self, ctx: SignalContext, texts: Sequence[str], lexical: Sequence[Sequence[float]]
    ) -> list[tuple[float, ...]]:
        """Stage-2 scores of `texts`: cached ones at once, the rest through the coalesced encoder."""
        assert self.embedder is not None
        return await self.attack_model().second(ctx.executor, self.embedder, texts, [tuple(p) for p in lexical])

    def head_result(
        self,
        texts: Sequence[Text],
        scores: Sequence[Sequence[float]],
        model: PromptAttackModel,
        notes: Sequence[str],
        eligible: Sequence[bool] | None = None,
    ) -> Evaluation:
        names = self.label_names()
        return summarize(self.spec, names, self.rows(scores), texts, self.decision_thresholds(model), notes, eligible)


class PromptAttackLexicalSignal(PromptAttackSignal):
    """Stage 1 alone: inline (the C kernel, or numpy where it is not built). Each output's label
    fires where the lexical stage is sure (`short_high` or `long_high` by length); where it is
    unsure (from `low`), `<label>_unsure` fires instead, for a rule to send that text to the
    embedding stage. `_unsure` labels never make the signal match."""

    inline: ClassVar[bool] = True

    def label_names(self) -> list[str]:
        names = super().label_names()
        return names + [unsure_label(n) for n in names]

    def compute(self, request: RoutingRequest) -> Evaluation:
        model = self.attack_model()
        texts = self.judged_texts(request, model)
        if not texts:
            return Evaluation(matched=False)
        scores = [model.lexical_scores(t.text) for t in texts]
        names = super().label_names()
        probs = self.rows(scores)
        latin = scripts_of(model, texts)
        sure = self.sure_thresholds(model, texts, overridable=True, latin=latin)
        limits: dict[str, float | Sequence[float]] = dict(sure)
        for output, name in zip(self.outputs, self.names, strict=True):
            unsure = unsure_label(name)
            thresholds = model.thresholds(output)
            limits[unsure] = thresholds.low
            for i, row in enumerate(probs):
                p = row[name]
                # A text is unsure for this label between `low` and its sure threshold, where the
                # embedding stage may judge it (else the lexical stage's no stands).
                row[unsure] = p if p < sure[name][i] and thresholds.head_reads(texts[i].text, latin[i]) else 0.0
        evaluation = summarize(
            self.spec,
            [*names, *map(unsure_label, names)],
            probs,
            texts,
            limits,
            ["stage: lexical"],
            matching=self.spec.matching(names),
        )
        labels = dict(evaluation.labels)
        for name in names:  # doubt is reported only where nothing is sure
            if name in labels:
                labels.pop(unsure_label(name), None)
        return Evaluation(evaluation.matched, evaluation.score, labels, evaluation.evidence)


def scripts_of(model: PromptAttackModel, texts: Sequence[Text]) -> list[bool]:
    """Each text's script (`model.latin`), once for every output's checks of it."""
    return [model.latin(t.text) for t in texts]


def unsure_label(name: str) -> str:
    """The lexical stage's label for a text it is unsure about (`attack` -> `attack_unsure`)."""
    return f"{name}{UNSURE_SUFFIX}"


class PromptAttackEmbeddingSignal(PromptAttackSignal):
    """Stage 2 alone: every text is embedded (MiniLM on the heavy executor) and scored by each output's head."""

    needs_embedder: ClassVar[bool] = True

    def unavailable_reason(self) -> str | None:
        if self.model is None:
            return self.reason
        return self.embedder_reason if self.embedder is None else None

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        model = self.attack_model()
        if self.embedder is None:
            raise SignalUnavailable(self.embedder_reason or "no text embedder")
        texts = self.judged_texts(request, model)
        if not texts:
            return Evaluation(matched=False)
        lexical = [model.lexical_scores(t.text) for t in texts]
        scores = await self.scored_by_head(ctx, [t.text for t in texts], lexical)
        return self.head_result(texts, scores, model, ["stage: embedding"])

    def answer_now(self, request: RoutingRequest) -> Evaluation | None:
        # A chat re-sends its earlier turns and a prompt repeats: then every head score is cached.
        if self.embedder is None or self.model is None:
            return None
        texts = self.judged_texts(request, self.attack_model())
        if not texts:
            return Evaluation(matched=False)
        scores = self.attack_model().all_known_second([t.text for t in texts])
        if scores is None:
            return None
        return self.head_result(texts, scores, self.attack_model(), ["stage: embedding"])


class PromptAttackCascadeSignal(PromptAttackSignal):
    """Both stages: lexical on every text (on the event loop), MiniLM + heads only where it is unsure."""

    needs_embedder: ClassVar[bool] = True

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        model = self.attack_model()
        texts = self.judged_texts(request, model)
        if not texts:
            return Evaluation(matched=False)
        lexical = [model.lexical_scores(t.text) for t in texts]
        latin = scripts_of(model, texts)
        sure = self.sure_thresholds(model, texts, overridable=False, latin=latin)
        thresholds = [model.thresholds(o) for o in self.outputs]
        lows = [t.low for t in thresholds]
        # Per output and text: decided by the lexical stage (sure, cleared, or a text the embedding
        # stage may not judge), or unsure.
        unsure_of = [
            [
                lows[k] <= lexical[i][k] < sure[name][i] and thresholds[k].head_reads(texts[i].text, latin[i])
                for i in range(len(texts))
            ]
            for k, name in enumerate(self.names)
        ]
        for k, name in enumerate(self.names):
            if any(lexical[i][k] >= sure[name][i] for i in range(len(texts))):
                # A text the lexical stage is sure of decides this label; nothing else can undo it.
                unsure_of[k] = [False] * len(texts)
        needs = [i for i in range(len(texts)) if any(row[i] for row in unsure_of)]
        if needs and self.embedder is None:
            raise SignalUnavailable(
                f"{len(needs)} text(s) need the embedding stage: {self.embedder_reason or 'no text embedder'}"
            )
        head = []
        if needs:
            head = await self.scored_by_head(ctx, [texts[i].text for i in needs], [lexical[i] for i in needs])
        head_of = dict(zip(needs, head, strict=True))
        # A text's score for an output: its head's where it was unsure, else the lexical one; a
        # label fires on a sure lexical score, or on a head score at `decision`.
        scores: list[list[float]] = []
        fires_at: dict[str, list[float]] = {}
        decisions = self.decision_thresholds(model)
        for k, name in enumerate(self.names):
            fires_at[name] = [
                decisions[name] if unsure_of[k][i] else (sure[name][i] if lexical[i][k] >= lows[k] else 2.0)
                for i in range(len(texts))
            ]
        for i in range(len(texts)):
            scores.append([head_of[i][k] if unsure_of[k][i] else lexical[i][k] for k in range(len(self.names))])
        note = (
            f"stage: embedding for {len(needs)} of {len(texts)} text(s)"
            if needs
            else "stage: lexical (no text needed the embedding stage)"
        )
        names = self.label_names()
        limits: dict[str, float | Sequence[float]] = dict(fires_at)
        return summarize(self.spec, names, self.rows(scores), texts, limits, [note])


# -- any local Hugging Face checkpoint ------------------------------------------------------------


class CheckpointClassifierSignal(ClassifierSignal):
    """A sequence-classification checkpoint directory (on the heavy executor)."""

    @classmethod
    def build_checkpoint(cls, spec: ClassifierSpec, ctx: BuildContext) -> CheckpointClassifierSignal:
        try:
            ctx.executor.apply_thread_budget()
            model = get_hf_classifier(
                ctx.models,
                Path(spec.model),
                precision=spec.precision,
                torch_threads=ctx.settings.dispatch.torch_threads,
            )
        except ModelUnavailable as exc:
            reason = f"classifier {spec.model} unavailable: {exc}"
            log.warning("signal %s is unavailable: %s", spec.name, reason)
            return cls(spec, None, reason)
        # A policy naming labels the checkpoint does not have is a policy error, not an outage.
        check_label_mapping(spec.labels, model.labels)
        check_policy_labels(spec, spec.policy_labels(model.labels))
        return cls(spec, model)

    def label_names(self) -> list[str] | None:
        if self.model is not None:
            return self.spec.policy_labels(self.model.labels)
        return list(dict.fromkeys(self.spec.labels.values())) if self.spec.labels else None

    def policy_probabilities(self, model: HfTextClassifier, rows: FloatArray) -> list[dict[str, float]]:
        """Each text's policy-label probabilities from its checkpoint probabilities."""
        columns: dict[str, list[int]] = {}
        for i, label in enumerate(model.labels):
            name = self.spec.labels.get(label) if self.spec.labels else label
            if name is not None:
                columns.setdefault(name, []).append(i)
        out: list[dict[str, float]] = []
        for row in rows:
            probs: dict[str, float] = {}
            for name, cols in columns.items():
                values = row[cols]
                probs[name] = float(values.max()) if model.multi_label else min(1.0, float(values.sum()))
            out.append(probs)
        return out

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        model: HfTextClassifier = self.require_model()
        texts = select_texts(request, self.spec)
        if not texts:
            return Evaluation(matched=False)
        rows = await ctx.executor.run(model.predict, [t.text for t in texts], batch=self.spec.batch)
        names = self.spec.policy_labels(model.labels)
        threshold = self.spec.threshold if self.spec.threshold is not None else CHECKPOINT_THRESHOLD
        thresholds = {name: self.spec.thresholds.get(name, threshold) for name in names}
        return summarize(self.spec, names, self.policy_probabilities(model, rows), texts, thresholds)
