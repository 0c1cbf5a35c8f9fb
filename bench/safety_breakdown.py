"""bench_safety's breakdown of its rows beyond language and corpus category: the writing system a
text is in, and what a harmful request asks for (its `topic`, where the row names one: the written
held-out sets), or for corpus rows the corpus `source` it came from (the safety corpus's harmful
rows carry one category, `harmful_request`; their sources differ in kind: AILuminate hazards,
do-not-answer, AdvBench behaviours, Chinese Safety-Prompts, ...)."""

from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Any

# Unicode blocks by first code point of each range: (start, end, script); checked in order.
_SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x024F, "latin"),
    (0x1E00, 0x1EFF, "latin"),  # Latin Extended Additional (Vietnamese)
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x052F, "cyrillic"),
    (0x0590, 0x05FF, "hebrew"),
    (0x0600, 0x06FF, "arabic"),
    (0x0750, 0x077F, "arabic"),
    (0xFB50, 0xFDFF, "arabic"),
    (0xFE70, 0xFEFF, "arabic"),
    (0x0900, 0x097F, "devanagari"),
    (0x0980, 0x09FF, "bengali"),
    (0x0B80, 0x0BFF, "tamil"),
    (0x0C00, 0x0C7F, "telugu"),
    (0x0E00, 0x0E7F, "thai"),
    (0x3040, 0x30FF, "kana"),
    (0x3400, 0x4DBF, "han"),
    (0x4E00, 0x9FFF, "han"),
    (0xF900, 0xFAFF, "han"),
    (0x1100, 0x11FF, "hangul"),
    (0x3130, 0x318F, "hangul"),
    (0xAC00, 0xD7AF, "hangul"),
)


def _script_of_char(ch: str) -> str | None:
    code = ord(ch)
    for start, end, script in _SCRIPT_RANGES:
        if start <= code <= end:
            return script
    return "other" if ch.isalpha() else None


def script_of(text: str) -> str:
    """The writing system most of the text's letters are in; Japanese (any kana among Han
    characters) is `japanese`, since Han alone reads as Chinese."""
    counts: Counter[str] = Counter()
    for ch in unicodedata.normalize("NFKC", text):
        script = _script_of_char(ch)
        if script is not None:
            counts[script] += 1
    if not counts:
        return "none"
    if counts["kana"] and counts["kana"] + counts["han"] >= sum(counts.values()) / 2:
        return "japanese"
    return counts.most_common(1)[0][0]


def breakdown_groups(row: dict[str, Any]) -> list[str]:
    """The extra groups a row is counted in: its script, and for harmful rows (corpus or written)
    its topic or, without one, its corpus source."""
    groups = [f"script:{script_of(str(row['text']))}"]
    if "harmful" in str(row["label"]):
        if row.get("topic"):
            groups.append(f"topic:{row['topic']}")
        elif row.get("source"):
            groups.append(f"source:{row['source']}")
    return groups
