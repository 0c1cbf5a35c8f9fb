"""Jailbreak signal: instruction overrides, system-prompt exfiltration and role-play escapes.

Reads the user's text by default (`roles` can add others), a long text whole (in overlapping
windows, up to `detectors.common.MAX_WINDOWED_CHARS`). Per category the score is the strongest
finding's; the signal matches when any category reaches `threshold`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from extproc.detectors.common import Finding
from extproc.detectors.jailbreak import JAILBREAK_CATEGORIES, find_jailbreak
from extproc.models.lru import LruCache
from extproc.signals.base import Evaluation, TextSignalSpec
from extproc.signals.detector import MAX_EVIDENCE, DetectorSignal, selected_kinds

# A policy reads the same text with several jailbreak signals (the default: `jailbreak`, and
# `quoted_attack_phrase` at a lower threshold): a text (a long text's every window) is searched
# once, its findings kept for the next signal. Short texts too: on the realistic mix the second
# search cost ~35 us a text (anchors, rules, the reader and decoded views), not a few microseconds.
_shared_findings: LruCache[list[Finding]] = LruCache(16)


class JailbreakSpec(TextSignalSpec):
    type: Literal["jailbreak"]
    categories: list[str] | None = Field(default=None, min_length=1)  # None: every category
    threshold: float = Field(default=0.5, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_categories(self) -> JailbreakSpec:
        selected_kinds(self.categories, JAILBREAK_CATEGORIES, "categories", "jailbreak categor(y/ies)")
        return self


class JailbreakSignal(DetectorSignal):
    known_kinds = JAILBREAK_CATEGORIES
    reads_whole_text = True  # an attacker chooses where in a long text the override goes
    spec: JailbreakSpec

    def chosen_kinds(self) -> list[str] | None:
        return self.spec.categories

    def find(self, text: str) -> list[Finding]:
        key = ",".join(self.kinds) + "\x00" + text
        found = _shared_findings.get(key)
        if found is None:
            found = find_jailbreak(text, self.kinds)
            _shared_findings.put(key, found)
        return list(found)

    def summarize(self, findings: list[Finding]) -> Evaluation:
        # Every category found is a label (with its best score); the threshold decides the match.
        labels: dict[str, float] = {}
        for f in findings:
            labels[f.kind] = max(labels.get(f.kind, 0.0), f.score)
        score = max(labels.values(), default=0.0)
        evidence = [f"{f.redacted} score={f.score:.2f}" for f in findings[:MAX_EVIDENCE]]
        if len(findings) > MAX_EVIDENCE:
            evidence.append(f"... and {len(findings) - MAX_EVIDENCE} more")
        return Evaluation(matched=score >= self.spec.threshold, score=score, labels=labels, evidence=tuple(evidence))
