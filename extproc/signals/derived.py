"""Derived signals: a score (weighted sum of other signals' values, with named bands) and a
partition (a softmax over a group of signals, with an exclusive winner).

They run no model and read no request: the engine computes them from their inputs' results
(`extproc.policy.derived_eval`). What lives here is the spec and the arithmetic over
`SignalResult`s, so that the dispatcher, the loader and the engine share one definition.

Unknown is not zero. An input that has not run yet, or could not run, contributes the whole
range its weight allows (`[min(0, w), max(0, w)]`, values lie in 0..1): when the score's
band is the same at both ends of that interval the band is known anyway (the input is not
worth running), otherwise the score is unknown, unless the input's `if_unknown` gives the
value to use (or its signal fails closed: `on_error: match` counts as a full match).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, SignalResult, SignalSpecBase, SignalStatus

ValueSource = Literal["match", "confidence", "score", "label"]
# Derived signals cost nothing to compute; their inputs carry the cost.
COST_DERIVED = 0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScoreInput(_Strict):
    """One term of a score: `weight` times the value its signal gives.

    `value`: `match` (1 when the signal, or its `label`, matched; else 0), `confidence` (the
    signal's score when it matched, else 0), `score` (its score whether or not it matched: a
    similarity below the signal's threshold still counts), `label` (the probability of `label`).
    """

    signal: str = Field(min_length=1)
    weight: float = 1.0
    value: ValueSource | None = None  # None: `label` when a label is named, else `match`
    label: str | None = None
    if_unknown: float | None = Field(default=None, ge=0.0, le=1.0)
    # [ours, theirs]: put a similarity on the scale the weights were tuned for, mapping `ours` (this
    # signal's threshold) to `theirs` and 1 to 1 (an imported score whose weights assume another encoder).
    rescale: tuple[float, float] | None = None

    @property
    def source(self) -> ValueSource:
        if self.value is not None:
            return self.value
        return "label" if self.label is not None else "match"

    @model_validator(mode="after")
    def _check(self) -> ScoreInput:
        if not math.isfinite(self.weight):
            raise ValueError(f"input {self.signal!r}: weight must be a finite number")
        if self.value == "label" and self.label is None:
            raise ValueError(f"input {self.signal!r}: value 'label' needs a `label`")
        return self

    def describe(self) -> str:
        return f"{self.signal}[{self.label}]" if self.label is not None else self.signal


class Band(_Strict):
    """A named range of a score: `gte` / `gt` below, `lt` / `lte` above (either end may be open)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    gte: float | None = None
    gt: float | None = None
    lt: float | None = None
    lte: float | None = None

    @model_validator(mode="after")
    def _check(self) -> Band:
        if self.gte is not None and self.gt is not None:
            raise ValueError(f"band {self.name!r}: give gte or gt, not both")
        if self.lt is not None and self.lte is not None:
            raise ValueError(f"band {self.name!r}: give lt or lte, not both")
        low, high = self.low, self.high
        if low is not None and high is not None and low > high:
            raise ValueError(f"band {self.name!r} is empty: its lower end {low:g} is above its upper end {high:g}")
        return self

    @property
    def low(self) -> float | None:
        return self.gte if self.gte is not None else self.gt

    @property
    def high(self) -> float | None:
        return self.lt if self.lt is not None else self.lte

    def contains(self, x: float) -> bool:
        if self.gte is not None and x < self.gte:
            return False
        if self.gt is not None and x <= self.gt:
            return False
        if self.lt is not None and x >= self.lt:
            return False
        return not (self.lte is not None and x > self.lte)

    def describe(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>=' if self.gte is not None else '>'}{self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.lt is not None else '<='}{self.high:g}")
        return f"{self.name} ({' and '.join(parts) or 'any'})"


class ScoreSpec(SignalSpecBase):
    """`{signal: risk, label: high}` tests the band; `{signal: risk}` tests `threshold` (the score
    at or above it) or, without one, whether the score falls in any band."""

    type: Literal["score"]
    inputs: list[ScoreInput] = Field(min_length=1)
    bands: list[Band] = Field(default_factory=list)
    threshold: float | None = None

    @model_validator(mode="after")
    def _check(self) -> ScoreSpec:
        names = [b.name for b in self.bands]
        if len(set(names)) != len(names):
            raise ValueError("band names must be unique")
        for i, a in enumerate(self.bands):
            for b in self.bands[i + 1 :]:
                if _overlap(a, b):
                    raise ValueError(f"bands {a.name!r} and {b.name!r} overlap; a score must fall in one band")
        if not self.bands and self.threshold is None:
            raise ValueError("a score needs `bands` or a `threshold` for its rules to test")
        return self


class PartitionSpec(SignalSpecBase):
    """An exclusive choice among `members` (signals, each read as `value`): softmax of their
    values over `temperature`; the winner is the label, with its probability. No member above
    `min_value` (or a winner below `min_probability`): no match."""

    type: Literal["partition"]
    members: list[ScoreInput] = Field(min_length=2)
    temperature: float = Field(default=1.0, gt=0.0)
    min_value: float = 0.0
    min_probability: float = Field(default=0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check(self) -> PartitionSpec:
        labels = [m.describe() for m in self.members]
        if len(set(labels)) != len(labels):
            raise ValueError("partition members must be distinct")
        return self


def _overlap(a: Band, b: Band) -> bool:
    """Do two bands share a point? (Closed/open ends are compared exactly.)"""
    low = max((x for x in (a.low, b.low) if x is not None), default=-math.inf)
    high = min((x for x in (a.high, b.high) if x is not None), default=math.inf)
    if low < high:
        return True
    if low > high:
        return False
    return a.contains(low) and b.contains(low)


InputState = Literal["known", "pending", "unknown", "assumed"]


@dataclass(frozen=True, slots=True)
class Term:
    """One input's part in a score: its value (a range while unknown) and its contribution."""

    input: ScoreInput
    low: float
    high: float
    state: InputState

    @property
    def known(self) -> bool:
        return self.state in ("known", "assumed")

    def describe(self) -> str:
        w = self.input.weight
        if self.known:
            note = " (assumed)" if self.state == "assumed" else ""
            return f"{self.input.describe()}: {self.low:.3f} x {w:g} = {self.low * w:+.3f}{note}"
        lo, hi = sorted((self.low * w, self.high * w))
        state = "not run" if self.state == "pending" else self.state
        return f"{self.input.describe()}: {state} [{lo:+.3f}, {hi:+.3f}]"


@dataclass(slots=True)
class Bounds:
    """A score's interval from what is known: exact once every input that matters is known."""

    low: float
    high: float
    terms: list[Term] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.low == self.high

    def pending(self) -> list[str]:
        return [t.input.signal for t in self.terms if t.state == "pending"]


def input_value(term: ScoreInput, result: SignalResult) -> float:
    """The value (0..1 for every built-in signal) a known result gives one input."""
    if term.label is None and term.value is None:  # the common case, a plain match: no more to read
        return 1.0 if result.status is SignalStatus.MATCHED else 0.0
    value = _raw_value(term, result)
    if term.rescale is not None and value > 0.0 and term.source in ("confidence", "score", "label"):
        ours, theirs = term.rescale
        span = 1.0 - ours
        value = theirs + (value - ours) * (1.0 - theirs) / span if span > 0 else theirs
        value = min(max(value, 0.0), 1.0)
    return value


def _raw_value(term: ScoreInput, result: SignalResult) -> float:
    source = term.source
    if source == "label":
        return float(result.labels.get(term.label or "", 0.0))
    if term.label is not None:  # match / confidence of one label
        got = float(result.labels.get(term.label, 0.0))
        if source == "match":
            return 1.0 if got > 0.0 else 0.0
        return got
    if source == "match":
        return 1.0 if result.matched else 0.0
    if source == "confidence":
        return result.score if result.matched else 0.0
    return result.score


# An input's state and value range: known/assumed (low == high), pending (not run yet) or unknown.
InputLookup = Callable[[ScoreInput], tuple[InputState, float, float]]


class DerivedSignal(Signal):
    """Computed by the engine from other signals' results; never dispatched."""

    derived: ClassVar[bool] = True
    inline = True
    cost: ClassVar[int] = COST_DERIVED

    @property
    def input_terms(self) -> list[ScoreInput]:
        raise NotImplementedError

    def compute(self, request: RoutingRequest) -> Evaluation:
        raise RuntimeError(f"{self.name}: a derived signal is computed by the engine, not run")


class ScoreSignal(DerivedSignal):
    spec: ScoreSpec

    def __init__(self, spec: ScoreSpec) -> None:
        super().__init__(spec)
        self.spec = spec

    @property
    def input_terms(self) -> list[ScoreInput]:
        return list(self.spec.inputs)

    def known_labels(self) -> frozenset[str]:
        return frozenset(b.name for b in self.spec.bands)

    def bounds(self, lookup: InputLookup) -> Bounds:
        out = Bounds(0.0, 0.0)
        for term in self.spec.inputs:
            state, low, high = lookup(term)
            w = term.weight
            out.low += min(low * w, high * w)
            out.high += max(low * w, high * w)
            out.terms.append(Term(term, low, high, state))
        return out

    def bands_of(self, bounds: Bounds) -> list[str]:
        """The bands the score may still fall in."""
        return [b.name for b in self.spec.bands if _may_contain(b, bounds.low, bounds.high)]

    def evaluation(self, bounds: Bounds) -> Evaluation:
        """The result for an exact score (or an interval all of whose points agree)."""
        score = bounds.low
        band = next((b.name for b in self.spec.bands if b.contains(score)), None)
        matched = score >= self.spec.threshold if self.spec.threshold is not None else band is not None
        evidence = [f"score {score:.3f}" + (f" in {band}" if band else " in no band")]
        if not bounds.exact:
            evidence[0] = f"score in [{bounds.low:.3f}, {bounds.high:.3f}], band {band}"
        if self.spec.threshold is not None:
            evidence.append(f"threshold {self.spec.threshold:g}")
        evidence += [t.describe() for t in bounds.terms]
        return Evaluation(
            matched=matched,
            score=score,
            labels={band: 1.0} if band is not None else {},
            evidence=tuple(evidence),
        )


class PartitionSignal(DerivedSignal):
    spec: PartitionSpec

    def __init__(self, spec: PartitionSpec) -> None:
        super().__init__(spec)
        self.spec = spec

    @property
    def input_terms(self) -> list[ScoreInput]:
        return list(self.spec.members)

    def known_labels(self) -> frozenset[str]:
        return frozenset(m.describe() for m in self.spec.members)

    def evaluation(self, values: Mapping[str, float]) -> Evaluation:
        """The winner of `values` (member label -> value); ties go to the earlier member."""
        eligible = {k: v for k, v in values.items() if v > self.spec.min_value}
        evidence = [f"{k}={v:.3f}" for k, v in values.items()]
        if not eligible:
            return Evaluation(matched=False, evidence=(f"no member above {self.spec.min_value:g}", *evidence))
        top = max(eligible.values())
        weights = {k: math.exp((v - top) / self.spec.temperature) for k, v in eligible.items()}
        total = sum(weights.values())
        winner = max(eligible, key=lambda k: (eligible[k], -list(values).index(k)))
        probability = weights[winner] / total
        matched = probability >= self.spec.min_probability
        return Evaluation(
            matched=matched,
            score=probability,
            labels={winner: probability} if matched else {},
            evidence=(f"winner {winner} p={probability:.3f} (temperature {self.spec.temperature:g})", *evidence),
        )


def _may_contain(band: Band, low: float, high: float) -> bool:
    if band.gte is not None and high < band.gte:
        return False
    if band.gt is not None and high <= band.gt:
        return False
    if band.lt is not None and low >= band.lt:
        return False
    return not (band.lte is not None and low > band.lte)


def band_truth(band: Band, low: float, high: float) -> bool | None:
    """Is the score in `band` for every point of [low, high] (True), none (False), or it depends (None)?"""
    if not _may_contain(band, low, high):
        return False
    if band.contains(low) and band.contains(high):
        return True
    return None


def known_result(result: SignalResult | None) -> bool:
    return result is not None and result.status in (SignalStatus.MATCHED, SignalStatus.NOT_MATCHED)
