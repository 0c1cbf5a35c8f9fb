"""complexity: is the newest user turn easy, medium or hard, judged against the policy's own examples.

    - name: difficulty
      type: complexity
      hard: ["Prove that there are infinitely many primes of the form 4k + 3.", ...]
      easy: ["What is 7 times 8?", ...]
      thresholds: {hard: 0.04, easy: 0.04}
      top_k: 3
      cues: {long_chars: 400, length_weight: 0.03, structure_weight: 0.03}
    leaf: {signal: difficulty, label: hard}

The turn (the newest user turn, fenced code removed, as `domain` reads it) is embedded with
all-MiniLM-L6-v2 (the embedder's cache shares that one embedding with `domain`'s second stage,
`semantic` and the answer cache). Its margin is the mean cosine to the `top_k` nearest `hard`
examples minus the same for the `easy` examples (`top_k: 1`, the default, is nearest against
nearest; with a few dozen examples a side, 3 keeps one look-alike example from deciding: a
plain "explain what a hash table is" lands near one algorithm-design example, not near three);
optional cues move it: a long turn (>= `long_chars`)
adds `length_weight`, a short one (< `long_chars` / 8) subtracts it, and structure (several
numbered parts, equations, a "prove" / "derive" / "show that") adds `structure_weight`.
margin >= `thresholds.hard` is `hard`, margin <= -`thresholds.easy` is `easy`, anything in
between `medium`. The label's score is in (0, 1] (0.5 + margin / 2 for hard, 0.5 - margin / 2 for
easy, 1 - |margin| for medium); the evidence gives the margin and the cues.

Optional first stage (`first_stage: {model: static, hard: H, easy: E}`): the turn's static vector
(the subject classifier's distilled MiniLM token vectors, `static_embedding.py`: a gather, no
forward pass), centred on the mean of the examples embedded the same way, projected on the
direction from the easy examples' mean to the hard examples' mean (both centred and normalised).
A projection >= `H` answers `hard` and <= -`E` answers `easy` without MiniLM; anything between is
embedded as above. A MiniLM embedding already cached (domain's second stage) is read first: where
one exists the first stage is never asked. No cues and no `top_k` in the first stage: measured, the
mean direction held out better than the nearest examples or the cues over static vectors.

A routing signal: without MiniLM it is unknown, so a rule on it never fires on its account (the
first stage still answers the texts it is sure of).
"""

from __future__ import annotations

import logging
import re
from typing import ClassVar, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from extproc.models.lru import LruCache, text_key
from extproc.models.registry import ModelUnavailable
from extproc.models.text_embedder import FloatArray, TextEmbedder
from extproc.protocol.request import Role, RoutingRequest
from extproc.signals.base import (
    COST_EMBEDDING,
    BuildContext,
    Evaluation,
    Signal,
    SignalContext,
    SignalUnavailable,
    TextSignalSpec,
)
from extproc.signals.domain import DomainSpec, get_shipped_domain, select_turns

log = logging.getLogger(__name__)

LEVELS = ("easy", "medium", "hard")
_NUMBERED = re.compile(r"(?:^|\s)(?:\(?[a-d1-9][.)]|part [a-d1-9])\s", re.IGNORECASE)
_MATHS = re.compile(r"[=^√∫∑∏≤≥≠]|\\frac|\\int|\bd/dx\b")
# What a demanding problem asks for, in the languages people write homework in: MiniLM reads
# English, so in other languages the examples' similarity says little and this cue carries more.
_DEMANDING = re.compile(
    r"\b(prove|derive|show that|justify|rigorous|step by step|optimi[sz]e|design an?"
    r"|beweise\w*|herleit\w*|leite\w* \w+ her|zeigen sie,? dass|zeige,? dass|schritt f(?:ü|ue)r schritt"
    r"|d(?:é|e)montr\w*|montre[rz]? que|prouve[rz]?|justifie[rz]?|(?:é|e)tape par (?:é|e)tape"
    r"|demuestr\w*|demostr\w*|pruebe que|probar que|deduc\w*|paso a paso|justifi\w*"
    r"|dimostr\w*|ricava\w*|passo dopo passo|giustific\w*"
    r"|prove que|provar que|demonstr\w*|deduz\w*|passo a passo"
    r"|доказ\w*|докаж\w*|выведи\w*|обоснуй\w*|пошагов\w*)\b"
    r"|证明|證明|推导|推導|求证|求證|証明|導出|導いて|증명|유도하",
    re.I,
)


class ComplexityThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hard: float = Field(default=0.04, ge=-2.0, le=2.0)  # margin at or above: hard
    easy: float = Field(default=0.04, ge=-2.0, le=2.0)  # margin at or below minus this: easy


class ComplexityCues(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    long_chars: int = Field(default=400, ge=8)
    length_weight: float = Field(default=0.0, ge=0.0, le=1.0)
    structure_weight: float = Field(default=0.0, ge=0.0, le=1.0)


class ComplexityFirstStage(BaseModel):
    """A cheap reading that answers without MiniLM when its margin is outside (-easy, hard)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: Literal["static"] = "static"  # the shipped subject classifier's static token vectors
    hard: float = Field(gt=0.0, le=2.0)  # static projection at or above: hard, no embedding
    easy: float = Field(gt=0.0, le=2.0)  # static projection at or below minus this: easy, no embedding


class StaticVectors(Protocol):
    def vector(self, text: str) -> FloatArray: ...


class ComplexitySpec(TextSignalSpec):
    type: Literal["complexity"]
    hard: list[str] = Field(min_length=1)
    easy: list[str] = Field(min_length=1)
    thresholds: ComplexityThresholds = Field(default_factory=ComplexityThresholds)
    cues: ComplexityCues = Field(default_factory=ComplexityCues)
    top_k: int = Field(default=1, ge=1, le=16)  # examples averaged per side: the margin's neighbourhood
    max_chars: int = Field(default=2000, ge=16)
    first_stage: ComplexityFirstStage | None = None

    @field_validator("hard", "easy")
    @classmethod
    def _non_blank(cls, texts: list[str]) -> list[str]:
        if not all(t.strip() for t in texts):
            raise ValueError("examples must not be blank")
        return texts

    @field_validator("roles")
    @classmethod
    def _user_only(cls, roles: list[Role]) -> list[Role]:
        if roles != [Role.USER]:
            raise ValueError("complexity reads the user's newest turn only; roles cannot be changed")
        return roles


def cue_shift(text: str, cues: ComplexityCues) -> tuple[float, list[str]]:
    """The margin shift from length and structure cues, and what caused it."""
    shift, why = 0.0, []
    if cues.length_weight:
        if len(text) >= cues.long_chars:
            shift += cues.length_weight
            why.append(f"long (+{cues.length_weight:g})")
        elif len(text) < cues.long_chars // 8:
            shift -= cues.length_weight
            why.append(f"short (-{cues.length_weight:g})")
    if cues.structure_weight:
        parts = len(_NUMBERED.findall(text))
        if parts >= 2 or len(_MATHS.findall(text)) >= 3 or _DEMANDING.search(text):
            shift += cues.structure_weight
            why.append(f"structure (+{cues.structure_weight:g})")
    return shift, why


class ComplexitySignal(Signal):
    cost: ClassVar[int] = COST_EMBEDDING
    spec: ComplexitySpec

    def __init__(
        self,
        spec: ComplexitySpec,
        embedder: TextEmbedder | None = None,
        reason: str | None = None,
        static: StaticVectors | None = None,
    ) -> None:
        super().__init__(spec)
        self.spec = spec
        self._embedder = embedder
        self._reason = reason
        self._hard: FloatArray | None = None
        self._easy: FloatArray | None = None
        # The first stage runs only when configured and its vectors load; otherwise every text embeds.
        self._static = static if spec.first_stage is not None else None
        self._static_centre: FloatArray | None = None
        self._static_direction: FloatArray | None = None
        self._turns_spec = DomainSpec(name=spec.name, type="domain", max_turns=1, max_chars=spec.max_chars)

    @classmethod
    def build(cls, spec: ComplexitySpec, ctx: BuildContext) -> ComplexitySignal:
        static: StaticVectors | None = None
        if spec.first_stage is not None:
            try:
                static = get_shipped_domain(ctx.models).inner.static
            except ModelUnavailable as exc:
                log.warning("signal %s: no first stage, every text is embedded: %s", spec.name, exc)
        try:
            embedder = ctx.text_embedder()
        except ModelUnavailable as exc:
            return cls(spec, None, f"complexity needs the text embedder: {exc}", static)
        signal = cls(spec, embedder, None, static)
        ctx.executor.submit_sync(signal.prepare)
        return signal

    def prepare(self) -> None:
        """Embed the examples once per policy load."""
        if self._embedder is not None:
            self._hard = self._embedder.embed(self.spec.hard)
            self._easy = self._embedder.embed(self.spec.easy)
        self._prepare_static()

    def _prepare_static(self) -> None:
        """The examples' static vectors, centred on their mean: SIF means share one large common
        direction, so raw cosines crowd together; centred, the hard side's and the easy side's
        mean directions differ and a text's projection on their difference separates them."""
        if self._static is None or self._static_direction is not None:
            return
        hard = np.stack([self._static.vector(t) for t in self.spec.hard])
        easy = np.stack([self._static.vector(t) for t in self.spec.easy])
        centre = np.concatenate([hard, easy]).mean(axis=0)

        def unit_rows(rows: FloatArray) -> FloatArray:
            centred = rows - centre
            return np.asarray(centred / np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-6))

        self._static_centre = np.asarray(centre, dtype=np.float32)
        self._static_direction = np.asarray(
            unit_rows(hard).mean(axis=0) - unit_rows(easy).mean(axis=0), dtype=np.float32
        )

    def unavailable_reason(self) -> str | None:
        return self._reason if self._embedder is None and self._static is None else None

    def known_labels(self) -> frozenset[str]:
        return frozenset(LEVELS)

    def margin(self, vec: FloatArray) -> float:
        if self._hard is None or self._easy is None:
            self.prepare()
        assert self._hard is not None and self._easy is not None
        return self._nearest(self._hard @ vec) - self._nearest(self._easy @ vec)

    def static_margin(self, text: str) -> float | None:
        """The first stage's reading: the turn's centred static vector projected on the hard-minus-easy
        direction of the examples (None without a first stage, or for a text with no tokens)."""
        if self._static is None:
            return None
        self._prepare_static()
        assert self._static_centre is not None and self._static_direction is not None
        centred = self._static.vector(text) - self._static_centre
        norm = float(np.linalg.norm(centred))
        if norm <= 1e-6:
            return None
        return float(centred @ self._static_direction) / norm

    def first_stage(self, text: str) -> Evaluation | None:
        """The static reading's answer when it is outside the unsure band, else None."""
        band = self.spec.first_stage
        margin = self.static_margin(text)
        if band is None or margin is None:
            return None
        if margin >= band.hard:
            level, score = "hard", 0.5 + min(margin, 1.0) / 2
        elif margin <= -band.easy:
            level, score = "easy", 0.5 - max(margin, -1.0) / 2
        else:
            return None
        evidence = (f"{level}: static margin {margin:+.3f}; stage: first",)
        return Evaluation(matched=True, score=score, labels={level: score}, evidence=evidence)

    def _nearest(self, similarities: FloatArray) -> float:
        """The mean of the `top_k` highest similarities (all of them when a side has fewer)."""
        k = min(self.spec.top_k, similarities.shape[0])
        if k == 1:
            return float(similarities.max())
        return float(np.partition(similarities, -k)[-k:].mean())

    def judge(self, text: str, vec: FloatArray) -> Evaluation:
        similarity = self.margin(vec)
        shift, why = cue_shift(text, self.spec.cues)
        margin = similarity + shift
        th = self.spec.thresholds
        if margin >= th.hard:
            level, score = "hard", 0.5 + margin / 2
        elif margin <= -th.easy:
            level, score = "easy", 0.5 - margin / 2
        else:
            level, score = "medium", 1.0 - abs(margin)
        score = float(min(1.0, max(1e-6, score)))
        evidence = [
            f"{level}: margin {margin:+.3f} (similarity {similarity:+.3f}{', ' + ', '.join(why) if why else ''})"
        ]
        return Evaluation(matched=True, score=score, labels={level: score}, evidence=tuple(evidence))

    def newest(self, request: RoutingRequest) -> str | None:
        turns = select_turns(request, self._turns_spec)
        return turns[0].text if turns else None

    def answer_now(self, request: RoutingRequest) -> Evaluation | None:
        """When the turn's embedding is already cached (domain's second stage or a repeat), or the
        first stage is sure: the answer, with no hop."""
        if self._embedder is None and self._static is None:
            return None
        text = self.newest(request)
        if text is None:
            return Evaluation(matched=False, evidence=("no user text",))
        cached = self._cached(text)
        if cached is None:
            return self.first_stage(text)
        return self.judge(text, np.asarray(cached, dtype=np.float32))

    def _cached(self, text: str) -> object | None:
        """The turn's MiniLM embedding if the embedder's cache already holds it (nothing is computed)."""
        cache = getattr(self._embedder, "cache", None)
        return cache.peek(text_key(text)) if isinstance(cache, LruCache) else None

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        if self._embedder is None and self._static is None:
            raise SignalUnavailable(self._reason or "no text embedder")
        text = self.newest(request)
        if text is None:
            return Evaluation(matched=False, evidence=("no user text",))
        if self._embedder is None:
            sure = self.first_stage(text)
            if sure is not None:
                return sure
            raise SignalUnavailable(self._reason or "no text embedder")
        if self._cached(text) is None:
            sure = self.first_stage(text)
            if sure is not None:
                return sure
        vecs = await ctx.executor.run(self._embedder.embed, [text])
        return self.judge(text, vecs[0])
