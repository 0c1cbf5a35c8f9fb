"""Derived signals (scores with bands, partitions) evaluated over their inputs' results.

One `DerivedView` per walk over the decisions: it memoises each derived signal's interval so a
score several rules test is summed once. `mode` says what an input absent from the results is:
`pending` (not run yet: the engine may still ask for it; `needed_signals`), `unknown` (skipped
because no decision needed it: the router's final decision) or `on_error` (a failure of that
signal: replaying a log under a policy with new signals).

A leaf over a score is decided as soon as every point of the score's interval gives the same
answer, so an expensive input is never run when the cheap ones already settle the band.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from extproc.policy.conditions import Leaf, Tri
from extproc.signals.base import Evaluation, Signal, SignalResult, SignalStatus
from extproc.signals.derived import (
    Bounds,
    DerivedSignal,
    InputState,
    PartitionSignal,
    ScoreInput,
    ScoreSignal,
    band_truth,
    input_value,
)

Missing = Literal["pending", "unknown", "on_error"]


@dataclass(frozen=True, slots=True)
class LeafAnswer:
    truth: Tri
    pending: tuple[str, ...] = ()  # inputs not run yet that could settle it
    waiting_on_timeout: bool = False  # an input timed out: what it might have said still matters


class DerivedView:
    def __init__(
        self,
        derived: Mapping[str, DerivedSignal],
        signals: Mapping[str, Signal],
        results: Mapping[str, SignalResult],
        mode: Missing,
    ) -> None:
        self.derived = derived
        self.signals = signals
        self.results = results
        self.mode = mode
        self._bounds: dict[str, Bounds] = {}
        self._partitions: dict[str, tuple[Evaluation | None, list[str], bool]] = {}

    # -- inputs ---------------------------------------------------------------------------
    def _lookup(self, term: ScoreInput) -> tuple[InputState, float, float]:
        inner = self.derived.get(term.signal)
        if inner is not None:
            return self._derived_input(term, inner)
        result = self.results.get(term.signal)
        if result is None:
            if self.mode != "on_error":
                return "pending", 0.0, 1.0  # not run (yet)
        elif result.status is SignalStatus.MATCHED or result.status is SignalStatus.NOT_MATCHED:
            v = input_value(term, result)
            return "known", v, v
        # It could not run (or, replaying, never ran): the policy says what it counts as.
        if term.if_unknown is not None:
            return "assumed", term.if_unknown, term.if_unknown
        signal = self.signals.get(term.signal)
        if signal is not None and signal.on_error == "match":
            return "assumed", 1.0, 1.0
        return "unknown", 0.0, 1.0

    def _derived_input(self, term: ScoreInput, inner: DerivedSignal) -> tuple[InputState, float, float]:
        if isinstance(inner, ScoreSignal) and term.source in ("score", "confidence") and term.label is None:
            b = self.bounds(inner)
            if b.exact:
                return "known", b.low, b.low
            return ("pending" if b.pending() else "unknown"), b.low, b.high
        answer = self.leaf(Leaf(signal=term.signal, label=term.label))
        if answer.truth is Tri.UNKNOWN:
            return ("pending" if answer.pending else "unknown"), 0.0, 1.0
        v = 1.0 if answer.truth is Tri.TRUE else 0.0
        return "known", v, v

    def bounds(self, signal: ScoreSignal) -> Bounds:
        found = self._bounds.get(signal.name)
        if found is None:
            found = self._bounds[signal.name] = signal.bounds(self._lookup)
        return found

    def _partition(self, signal: PartitionSignal) -> tuple[Evaluation | None, list[str], bool]:
        found = self._partitions.get(signal.name)
        if found is not None:
            return found
        values: dict[str, float] = {}
        pending: list[str] = []
        unknown = False
        for member in signal.spec.members:
            state, low, _ = self._lookup(member)
            if state == "pending":
                pending.append(member.signal)
            elif state == "unknown":
                unknown = True
            values[member.describe()] = low * member.weight  # a weight scales a member's evidence
        evaluation = signal.evaluation(values) if not pending and not unknown else None
        found = self._partitions[signal.name] = (evaluation, pending, self._timed_out(signal))
        return found

    def _timed_out(self, signal: DerivedSignal) -> bool:
        for term in signal.input_terms:
            result = self.results.get(term.signal)
            if result is not None and result.status is SignalStatus.TIMEOUT:
                return True
        return False

    # -- leaves ---------------------------------------------------------------------------
    def leaf(self, leaf: Leaf) -> LeafAnswer:
        signal = self.derived[leaf.signal]
        if isinstance(signal, ScoreSignal):
            return self._score_leaf(signal, leaf)
        assert isinstance(signal, PartitionSignal)
        evaluation, pending, timed_out = self._partition(signal)
        if evaluation is None:
            return LeafAnswer(Tri.UNKNOWN, tuple(self._base(pending)), timed_out)
        return LeafAnswer(_truth(leaf, evaluation))

    def _score_leaf(self, signal: ScoreSignal, leaf: Leaf) -> LeafAnswer:
        b = self.bounds(signal)
        truth = self._score_truth(signal, leaf, b.low, b.high)
        if truth is not None:
            return LeafAnswer(Tri.of(truth))
        return LeafAnswer(Tri.UNKNOWN, tuple(self._base(b.pending())), self._timed_out(signal))

    def _base(self, names: list[str]) -> list[str]:
        """Pending inputs as signals the dispatcher can run (a derived input stands for its own)."""
        out: list[str] = []
        for name in names:
            inner = self.derived.get(name)
            if inner is None:
                out.append(name)
            elif isinstance(inner, ScoreSignal):
                out += self._base(self.bounds(inner).pending())
            elif isinstance(inner, PartitionSignal):
                out += self._base(self._partition(inner)[1])
        return list(dict.fromkeys(out))

    @staticmethod
    def _score_truth(signal: ScoreSignal, leaf: Leaf, low: float, high: float) -> bool | None:
        spec = signal.spec
        if leaf.label is not None:
            band = next((x for x in spec.bands if x.name == leaf.label), None)
            truth = band_truth(band, low, high) if band is not None else False
        elif spec.threshold is not None:
            truth = True if low >= spec.threshold else False if high < spec.threshold else None
        else:
            truths = [band_truth(band, low, high) for band in spec.bands]
            truth = True if True in truths else False if all(t is False for t in truths) else None
        if truth is False or leaf.min_score is None:
            return truth
        at_least = True if low >= leaf.min_score else False if high < leaf.min_score else None
        if at_least is False:
            return False
        return True if truth and at_least else None

    # -- results for the trace and the decision log -----------------------------------------
    def result(self, name: str) -> SignalResult:
        signal = self.derived[name]
        if isinstance(signal, ScoreSignal):
            b = self.bounds(signal)
            bands = signal.bands_of(b)
            decided = b.exact or (len(bands) <= 1 and _threshold_decided(signal, b))
            if decided:
                return SignalResult.from_evaluation(name, signal.type, signal.evaluation(b), 0.0)
            why = ", ".join(t.describe() for t in b.terms if not t.known)
            return SignalResult(
                name,
                signal.type,
                SignalStatus.UNAVAILABLE,
                score=b.low,
                evidence=(
                    f"score in [{b.low:.3f}, {b.high:.3f}]: bands {bands} still possible",
                    *[t.describe() for t in b.terms],
                ),
                error=f"undecided: {why}",
            )
        assert isinstance(signal, PartitionSignal)
        evaluation, pending, _ = self._partition(signal)
        if evaluation is None:
            missing = ", ".join(pending) or "an input could not run"
            return SignalResult.failed(name, signal.type, SignalStatus.UNAVAILABLE, f"undecided: {missing}")
        return SignalResult.from_evaluation(name, signal.type, evaluation, 0.0)

    def results_for(self, names: list[str]) -> dict[str, SignalResult]:
        return {name: self.result(name) for name in names}


def _threshold_decided(signal: ScoreSignal, b: Bounds) -> bool:
    t = signal.spec.threshold
    return t is None or b.low >= t or b.high < t


def _truth(leaf: Leaf, evaluation: Evaluation) -> Tri:
    if leaf.label is not None:
        score = evaluation.labels.get(leaf.label)
        if score is None or score <= 0.0:
            return Tri.FALSE
        return Tri.of(leaf.min_score is None or score >= leaf.min_score)
    if not evaluation.matched:
        return Tri.FALSE
    return Tri.of(leaf.min_score is None or evaluation.score >= leaf.min_score)


def derived_inputs(signal: DerivedSignal) -> list[str]:
    return [t.signal for t in signal.input_terms]
