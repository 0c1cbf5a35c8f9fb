"""feature: a number measured on the request, tested with a predicate.

Measures: `count` (matches of `regex` in the text, or of `source` items: messages of `roles`,
tool definitions, images, `tool_calls` (the assistant's tool calls in the history), `tool_turns`
(messages that carry a tool call or a tool result: the conversation is inside a tool loop, an
outstanding call included) or `tool_results` (messages that carry a tool result: completed calls)),
`exists` (the count is above zero), `density` (matches of `keywords`
and / or `regex` per length unit of the text) and `sequence` (1 when the markers of one of
`sequences` appear in order, else 0). Predicates: `gt`, `gte`, `lt`, `lte`, `eq`, or a range
(`gte` with `lt`, ...); none given: the measure is above zero.

Length units for `density`: a word of space-separated script counts one, a CJK character
(Han, kana, Hangul) counts 2/3 (a Chinese word averages about 1.5 characters), so the same
request written in Chinese and in English gets about the same density.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from extproc.detectors.common import join_bounded, truncation_note
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, TextSignalSpec

Measure = Literal["count", "exists", "density", "sequence"]
Source = Literal["text", "messages", "tools", "images", "tool_calls", "tool_turns", "tool_results"]
# The text segments a tool loop leaves in the history, by source (see TextSegment.source).
_TOOL_SEGMENTS = {"tool_turns": ("tool_call", "tool_result"), "tool_results": ("tool_result",)}
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{_CJK}]")
_WORD = re.compile(f"[^\\s{_CJK}]+")
CJK_CHAR_WEIGHT = 2.0 / 3.0


def length_units(text: str) -> float:
    """Words of space-separated scripts plus CJK characters at 2/3 of a word each."""
    return len(_WORD.findall(text)) + CJK_CHAR_WEIGHT * len(_CJK_CHAR.findall(text))


def keyword_pattern(keyword: str) -> re.Pattern[str]:
    """A case-insensitive pattern for `keyword`: whole words for Latin-script keywords, a plain
    substring where it starts or ends in CJK (no spaces there to bound a word)."""
    escaped = re.escape(keyword.strip())
    head = "" if _CJK_CHAR.match(keyword.strip()[:1]) else r"(?<!\w)"
    tail = "" if _CJK_CHAR.match(keyword.strip()[-1:]) else r"(?!\w)"
    return re.compile(head + escaped + tail, re.IGNORECASE)


class FeatureSpec(TextSignalSpec):
    type: Literal["feature"]
    measure: Measure = "count"
    source: Source = "text"
    regex: str | None = None
    keywords: list[str] = Field(default_factory=list)
    sequences: list[list[str]] = Field(default_factory=list)
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None
    eq: float | None = None

    @model_validator(mode="after")
    def _check(self) -> FeatureSpec:
        if self.measure in ("count", "exists") and self.source == "text" and not (self.regex or self.keywords):
            raise ValueError(f"measure {self.measure!r} over text needs `regex` or `keywords`")
        if self.measure == "density" and not (self.keywords or self.regex):
            raise ValueError("measure 'density' needs `keywords` or `regex`")
        if self.measure == "sequence" and not any(len(s) >= 1 for s in self.sequences):
            raise ValueError("measure 'sequence' needs `sequences` (lists of markers, in order)")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex {self.regex!r} does not compile: {exc}") from None
        if self.eq is not None and any(x is not None for x in (self.gt, self.gte, self.lt, self.lte)):
            raise ValueError("`eq` cannot be combined with a range")
        return self

    def predicate_text(self) -> str:
        parts = [f"{op} {v:g}" for op, v in (("=", self.eq), (">", self.gt), (">=", self.gte)) if v is not None]
        parts += [f"{op} {v:g}" for op, v in (("<", self.lt), ("<=", self.lte)) if v is not None]
        return " and ".join(parts) or "> 0"

    def holds(self, x: float) -> bool:
        if self.eq is not None:
            return x == self.eq
        bounds = (self.gt, self.gte, self.lt, self.lte)
        if all(v is None for v in bounds):
            return x > 0
        return (
            (self.gt is None or x > self.gt)
            and (self.gte is None or x >= self.gte)
            and (self.lt is None or x < self.lt)
            and (self.lte is None or x <= self.lte)
        )


class FeatureSignal(Signal):
    """Matches when the predicate holds; the score is 1 then, and the evidence says the measure."""

    spec: FeatureSpec
    inline = True

    def __init__(self, spec: FeatureSpec) -> None:
        super().__init__(spec)
        self.spec = spec
        self._regex = re.compile(spec.regex) if spec.regex is not None else None
        self._keywords = [keyword_pattern(k) for k in spec.keywords if k.strip()]
        self._sequences = [[keyword_pattern(m) for m in seq if m.strip()] for seq in spec.sequences]

    def measure(self, request: RoutingRequest) -> tuple[float, str]:
        spec = self.spec
        if spec.source == "messages":
            indices = {s.message_index for s in request.iter_text(spec.roles)}
            return float(len(indices)), f"{len(indices)} message(s) of {', '.join(spec.roles)}"
        if spec.source == "tools":
            return float(len(request.tools)), f"{len(request.tools)} tool definition(s)"
        if spec.source == "images":
            count = len(request.images) + len(request.remote_images)
            return float(count), f"{count} image(s)"
        if spec.source == "tool_calls":
            return float(request.tool_call_count), f"{request.tool_call_count} tool call(s) in the history"
        if spec.source in _TOOL_SEGMENTS:
            kinds = _TOOL_SEGMENTS[spec.source]
            turns = {s.message_index for s in request.texts if s.source in kinds}
            what = "with a tool call or result" if spec.source == "tool_turns" else "with a tool result"
            return float(len(turns)), f"{len(turns)} message(s) {what}"
        text, total = join_bounded(s.text for s in request.iter_text(spec.roles))
        note = "".join(truncation_note(len(text), total))
        if spec.measure == "sequence":
            found = next((i for i, seq in enumerate(self._sequences) if _in_order(seq, text)), None)
            what = f"markers of sequence {found} in order" if found is not None else "no sequence in order"
            return (1.0 if found is not None else 0.0), what + note
        hits = len(self._regex.findall(text)) if self._regex is not None else 0
        hits += sum(len(p.findall(text)) for p in self._keywords)
        if spec.measure == "density":
            units = length_units(text)
            density = hits / units if units else 0.0
            return density, f"density {density:.3f} ({hits} hit(s) / {units:.1f} length units){note}"
        return float(hits), f"{hits} match(es){note}"

    def compute(self, request: RoutingRequest) -> Evaluation:
        value, what = self.measure(request)
        if self.spec.measure == "exists":
            holds = value > 0
            test = "> 0"
        else:
            holds = self.spec.holds(value)
            test = self.spec.predicate_text()
        return Evaluation(
            matched=holds,
            score=1.0 if holds else 0.0,
            evidence=(f"{what}; {self.spec.measure} {value:g} {test}: {'yes' if holds else 'no'}",),
        )


def _in_order(markers: list[re.Pattern[str]], text: str) -> bool:
    at = 0
    for marker in markers:
        found = marker.search(text, at)
        if found is None:
            return False
        at = found.end()
    return True
