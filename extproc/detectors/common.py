"""What every detector returns, and small helpers they share."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Finding:
    """One detection in a scanned text.

    `start`/`end` are offsets in the text that was scanned (end exclusive). `redacted` is
    safe to log or show: it never holds the full detected value.
    """

    kind: str  # entity / secret kind / jailbreak category, e.g. "credit_card"
    start: int
    end: int
    score: float  # confidence 0..1
    redacted: str


def check_kinds(kinds: Collection[str] | None, known: tuple[str, ...], what: str) -> frozenset[str]:
    """The requested kinds as a set (all of `known` when None); unknown names raise ValueError."""
    if kinds is None:
        return frozenset(known)
    wanted = frozenset(kinds)
    unknown = sorted(wanted.difference(known))
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    return wanted


def shannon_entropy(value: str) -> float:
    """Shannon entropy of `value` in bits per character (0.0 for an empty string)."""
    n = len(value)
    if n == 0:
        return 0.0
    return -sum((c / n) * math.log2(c / n) for c in Counter(value).values())


def mask_tail(value: str, keep: int = 4, mask: str = "*") -> str:
    """`value` with everything but its last `keep` characters masked (all masked if it is short)."""
    if len(value) <= keep * 2:
        return mask * len(value)
    return mask * (len(value) - keep) + value[-keep:]


def drop_overlaps(findings: list[Finding], priority: dict[str, int]) -> list[Finding]:
    """Resolve overlapping findings: the lower priority number wins, then the higher score.

    Returns the survivors sorted by start offset. O(n log n): kept spans never overlap, so
    each candidate only needs checking against its neighbours in start order.
    """
    if len(findings) < 2:
        return list(findings)
    ranked = sorted(findings, key=lambda f: (priority.get(f.kind, 99), -f.score, f.start))
    starts: list[int] = []
    kept: list[Finding] = []
    for f in ranked:
        i = bisect.bisect_left(starts, f.start)
        if i < len(kept) and kept[i].start < f.end:
            continue  # overlaps the next kept span
        if i > 0 and kept[i - 1].end > f.start:
            continue  # overlaps the previous kept span
        starts.insert(i, f.start)
        kept.insert(i, f)
    return kept


# Signals scan at most this many characters from the start of a request's text (256 Ki characters)
# and, of a longer text, its last `MAX_TAIL_CHARS` as well: an attack phrase written after a long
# pasted document (padding placed before it) is read, and everything a head-only scan read still is.
MAX_SCAN_CHARS = 256 * 1024
MAX_TAIL_CHARS = 64 * 1024
# The tail starts at a line or word boundary found at most this far before its nominal start, so
# its first phrase is whole.
_TAIL_LOOKBACK = 1024


def join_bounded(
    texts: Iterable[str], limit: int = MAX_SCAN_CHARS, sep: str = "\n\n", tail: int = MAX_TAIL_CHARS
) -> tuple[str, int]:
    """Join `texts` with `sep`; a join longer than `limit + tail` keeps its first `limit` and its
    last `tail` characters (the tail moved back to a line or word start, at most `_TAIL_LOOKBACK`
    characters), with `sep` between them.

    Cost bound: a scan of the result reads at most `limit + tail + _TAIL_LOOKBACK + len(sep)`
    characters (321 Ki by default, a quarter more than the head-only scan this replaced), whatever
    the request's size. The middle of a longer text is not read. Returns (text, total) where
    `total` is the length the full join had, so a caller can say when (and how much) it cut.
    """
    joined = sep.join(texts)
    total = len(joined)
    if total <= limit + tail:
        return joined, total
    if tail <= 0:
        return joined[:limit], total
    start = total - tail
    floor = max(limit, start - _TAIL_LOOKBACK)
    boundary = joined.rfind("\n", floor, start)
    if boundary < 0:
        boundary = max(joined.rfind(" ", floor, start), joined.rfind("\t", floor, start))
    if boundary >= 0:
        start = boundary + 1
    if start <= limit + len(sep):  # the middle left out would be no longer than the separator
        return joined, total
    return joined[:limit] + sep + joined[start:], total


def truncation_note(scanned: int, total: int) -> tuple[str, ...]:
    """An evidence line saying the scan was cut (its head and tail read), or nothing."""
    if total > scanned:
        return (f"truncated: scanned {scanned} of {total} characters (the head and the tail; not the middle)",)
    return ()
