"""The base of the signals that run one pure text detector over the request's text (pii,
secrets, jailbreak): the kinds a spec selects, the text it reads, how findings become a result.

Each subclass names its detector (`find`), the kinds it knows, and which spec field selects
kinds; the spec validates that field with `detectors.common.check_kinds` through
`selected_kinds`. Text is joined under one bound (`join_bounded`: a long text's head and its
tail, so an attack written after a long padding is read), and a cut is noted in the evidence.
A detector whose findings an attacker places (`reads_whole_text`: jailbreak) reads a long text
whole instead, in overlapping windows up to a per-text budget (`scan_windows`): an override in
the middle of a padded text has no gap to hide in.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection
from typing import ClassVar

from extproc.detectors.common import (
    MAX_SCAN_CHARS,
    MAX_TAIL_CHARS,
    Finding,
    check_kinds,
    join_bounded,
    scan_windows,
    shifted,
    truncation_note,
    windowed_note,
)
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, TextSignalSpec

MAX_EVIDENCE = 10


def selected_kinds(values: Collection[str] | None, known: tuple[str, ...], field: str, what: str) -> None:
    """Validate a spec's kind list: unknown names raise ValueError naming the field (pydantic reports it)."""
    try:
        check_kinds(values, known, what)
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from None


def summarize(findings: list[Finding], min_score: float, allow: frozenset[str] = frozenset()) -> Evaluation:
    """The evaluation of a detector's findings: labels are the best score per kind, the match
    (and score) come from findings at or above `min_score` whose kind is not allowed."""
    labels: dict[str, float] = {}
    blocking = 0.0
    evidence: list[str] = []
    kept = [f for f in findings if f.score >= min_score]
    for f in kept:
        labels[f.kind] = max(labels.get(f.kind, 0.0), f.score)
        if f.kind not in allow:
            blocking = max(blocking, f.score)
    for f in kept[:MAX_EVIDENCE]:
        evidence.append(f.redacted + (" (allowed)" if f.kind in allow else ""))
    if len(kept) > MAX_EVIDENCE:
        evidence.append(f"... and {len(kept) - MAX_EVIDENCE} more")
    return Evaluation(matched=blocking > 0.0, score=blocking, labels=labels, evidence=tuple(evidence))


class DetectorSignal(Signal):
    """Inline, fail-closed (a safety signal), reading `spec.roles`' text with one detector."""

    inline = True
    safety: ClassVar[bool] = True
    known_kinds: ClassVar[tuple[str, ...]]
    # Read a long text whole, window by window, rather than its head and tail (`scan_windows`).
    reads_whole_text: ClassVar[bool] = False

    spec: TextSignalSpec

    def __init__(self, spec: TextSignalSpec) -> None:
        super().__init__(spec)
        chosen = self.chosen_kinds()
        self.kinds: tuple[str, ...] = tuple(chosen) if chosen is not None else self.known_kinds

    @abstractmethod
    def chosen_kinds(self) -> list[str] | None:
        """The kinds the spec selects; None: every kind the detector knows."""

    @abstractmethod
    def find(self, text: str) -> list[Finding]:
        """The detector over `text`, restricted to `self.kinds`."""

    def summarize(self, findings: list[Finding]) -> Evaluation:
        return summarize(findings, 0.5)

    def find_in_windows(self, windows: list[tuple[int, str]]) -> list[Finding]:
        """`find` over each window, findings at offsets in the whole text; a finding two windows
        share (the overlap) is kept once."""
        if len(windows) == 1:
            _, text = windows[0]
            return self.find(text) if text else []
        seen: set[tuple[str, int, int]] = set()
        out: list[Finding] = []
        for offset, text in windows:
            for f in shifted(self.find(text), offset):
                key = (f.kind, f.start, f.end)
                if key not in seen:
                    seen.add(key)
                    out.append(f)
        return sorted(out, key=lambda f: f.start)

    def known_labels(self) -> frozenset[str]:
        return frozenset(self.kinds)

    def off_loop(self, request: RoutingRequest) -> bool:
        """A text read whole in more than one window (jailbreak's 1 Mi characters of Cyrillic held
        the loop 1-2 s): judged in a worker thread. The regexes hold the GIL while they match,
        but the loop gets it back between calls (every few ms), instead of after the last window."""
        if not self.reads_whole_text:
            return False
        chars = sum(len(s.text) + 2 for s in request.iter_text(self.spec.roles))  # + the windows' "\n\n" joins
        return chars > MAX_SCAN_CHARS + MAX_TAIL_CHARS

    def compute(self, request: RoutingRequest) -> Evaluation:
        texts = (s.text for s in request.iter_text(self.spec.roles))
        if self.reads_whole_text:
            windows, read, total = scan_windows(texts)
            evaluation = self.summarize(self.find_in_windows(windows))
            note = windowed_note(len(windows), read, total)
        else:
            text, total = join_bounded(texts)
            evaluation = self.summarize(self.find(text) if text else [])
            note = truncation_note(len(text), total)
        if not note:
            return evaluation
        return Evaluation(evaluation.matched, evaluation.score, evaluation.labels, evaluation.evidence + note)
