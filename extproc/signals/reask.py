"""reask: the latest user turn repeats the user turns before it (the user asks again).

A user who gets an answer they cannot use often sends the same question again, perhaps with
"still wrong" in front. The signal compares the last user message with each of the
`lookback_turns` user messages before it and matches when every one of them is at least
`threshold` alike: a repeat in a row, not one repeat somewhere in the history.

Alike is lexical, the overlap coefficient of the two turns' units (lower-cased words of
space-separated scripts, single CJK characters): shared units over the smaller turn's units.
A turn that restates an earlier one and adds "that is still wrong" keeps the earlier turn's
units, so it scores 1; a new question on the same topic shares some words, not most. No model
runs, so the signal is inline and costs a few microseconds. Fewer earlier user turns than
`lookback_turns`: no match (a first question is not a re-ask).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from extproc.protocol.request import Role, RoutingRequest
from extproc.signals.base import Evaluation, Signal, SignalSpecBase

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_UNIT = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")


def turn_units(text: str) -> frozenset[str]:
    """Lower-cased words and single CJK characters of `text` (punctuation dropped)."""
    return frozenset(_UNIT.findall(text.lower()))


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared units over the smaller set's units (0 when either turn has none)."""
    smaller = min(len(a), len(b))
    return len(a & b) / smaller if smaller else 0.0


class ReaskSpec(SignalSpecBase):
    type: Literal["reask"]
    lookback_turns: int = Field(default=1, ge=1, le=20)
    threshold: float = Field(default=0.8, gt=0.0, le=1.0)


class ReaskSignal(Signal):
    """Matches when the last user turn is alike each of the `lookback_turns` user turns before it;
    the score is the least of those similarities."""

    spec: ReaskSpec
    inline = True

    def __init__(self, spec: ReaskSpec) -> None:
        super().__init__(spec)
        self.spec = spec

    def compute(self, request: RoutingRequest) -> Evaluation:
        turns: dict[int, list[str]] = {}
        for segment in request.iter_text([Role.USER]):
            turns.setdefault(segment.message_index, []).append(segment.text)
        texts = [" ".join(parts) for _, parts in sorted(turns.items())]
        wanted = self.spec.lookback_turns
        if len(texts) < wanted + 1:
            return Evaluation(
                matched=False, evidence=(f"{len(texts)} user turn(s): fewer than {wanted + 1} to compare",)
            )
        last = turn_units(texts[-1])
        alike = [overlap(last, turn_units(t)) for t in texts[-wanted - 1 : -1]]
        least = min(alike)
        matched = least >= self.spec.threshold
        shown = ", ".join(f"{a:.2f}" for a in alike)
        verdict = f"least {least:.2f} >= {self.spec.threshold:g}: {'yes' if matched else 'no'}"
        return Evaluation(
            matched=matched,
            score=least,
            evidence=(f"last user turn vs the {wanted} before it: {shown}; {verdict}",),
        )
