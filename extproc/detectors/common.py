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
    texts: Iterable[str],
    limit: int = MAX_SCAN_CHARS,
    sep: str = "\n\n",
    tail: int = MAX_TAIL_CHARS,
    lookback: int = _TAIL_LOOKBACK,
) -> tuple[str, int]:
    """Join `texts` with `sep`; a join longer than `limit + tail` keeps its first `limit` and its
    last `tail` characters (the tail moved back to a line or word start, at most `lookback`
    characters; 0 cuts exactly), with `sep` between them.

    Cost bound: a scan of the result reads at most `limit + tail + lookback + len(sep)`
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
    floor = max(limit, start - lookback)
    boundary = joined.rfind("\n", floor, start)
    if boundary < 0:
        boundary = max(joined.rfind(" ", floor, start), joined.rfind("\t", floor, start))
    if boundary >= 0:
        start = boundary + 1
    if start <= limit + len(sep):  # the middle left out would be no longer than the separator
        return joined, total
    return joined[:limit] + sep + joined[start:], total


# The jailbreak patterns read a long text whole (an attacker chooses where an override goes, so
# a scan with gaps is a scan with hiding places), in windows of what `join_bounded` reads (a
# text it reads whole is one window, read as before) that overlap
# by about `_TAIL_LOOKBACK` (each after the first starts at the first word inside the overlap, so
# a phrase cut by one window's end is whole in the next), up to this many characters a text:
# 4 Mi characters is about a million tokens of English, eight times the largest context window
# the default fleet serves, so a text longer than that cannot reach a model whole anyway (vLLM
# refuses a prompt over max_model_len). A longer text is read in windows up to the budget less
# `MAX_TAIL_CHARS`, then its last `MAX_TAIL_CHARS` (the evidence says so). Cost: linear, of the
# order of 0.15 s per Mi characters of English prose and 1.5 s of Russian for the jailbreak
# patterns on a shared 2-core machine (bench/bench_long_texts.py).
MAX_WINDOWED_CHARS = 4 * 1024 * 1024
# Text that is not all ASCII costs the patterns five to ten times as much a character (Unicode
# normalisation, the rules of scripts without word anchors), so its budget is a quarter: 1 Mi
# characters is still over twice the largest context window (131,072 tokens) in any script.
MAX_WINDOWED_CHARS_NON_ASCII = 1024 * 1024


def scan_windows(
    texts: Iterable[str],
    window: int = MAX_SCAN_CHARS + MAX_TAIL_CHARS,
    budget: int | None = None,
    sep: str = "\n\n",
    tail: int = MAX_TAIL_CHARS,
) -> tuple[list[tuple[int, str]], int, int]:
    """Join `texts` with `sep` and cut the join into windows that cover it whole (a join of at most
    `budget` characters: by default `MAX_WINDOWED_CHARS`, `MAX_WINDOWED_CHARS_NON_ASCII` for text
    that is not all ASCII), each at most `window + _TAIL_LOOKBACK` long, each after the
    first starting at the first word in the last `_TAIL_LOOKBACK` characters of the one before. A
    longer join is covered up to `budget - tail` characters and in its last `tail` (moved back to
    a boundary as `join_bounded` moves it).

    Returns (windows as (offset in the join, text), how many of the join's characters some window
    reads, the join's length):
    the caller shifts each window's findings by its offset and drops the doubles of the overlaps.
    """
    if window <= _TAIL_LOOKBACK:
        raise ValueError(f"window must be longer than the overlap ({_TAIL_LOOKBACK} characters)")
    joined = sep.join(texts)
    total = len(joined)
    if total <= window + _TAIL_LOOKBACK:
        return [(0, joined)], total, total
    if budget is None:
        budget = MAX_WINDOWED_CHARS if joined.isascii() else MAX_WINDOWED_CHARS_NON_ASCII
    covered = total if total <= budget else max(window, budget - tail)
    windows: list[tuple[int, str]] = []
    start = 0
    while start < covered:
        end = min(covered, start + window)
        if covered - end <= _TAIL_LOOKBACK:  # a sliver would be left: this window takes it
            end = covered
        windows.append((start, joined[start:end]))
        if end >= covered:
            break
        start = _word_start_after(joined, end - _TAIL_LOOKBACK, end)
    if covered < total:
        tail_start = _boundary_before(joined, total - tail, max(covered, total - tail - _TAIL_LOOKBACK))
        windows.append((tail_start, joined[tail_start:]))
    read = covered + (total - windows[-1][0] if covered < total else 0)
    return windows, read, total


def _word_start_after(text: str, floor: int, at: int) -> int:
    """The first word start after `floor` and before `at`, or `floor` itself (an unbroken run of
    letters, as Chinese is written): the next window then repeats everything from there, so any
    phrase shorter than the overlap that the previous window's end cut is whole in it."""
    found = [i for i in (text.find(" ", floor, at), text.find("\n", floor, at), text.find("\t", floor, at)) if i >= 0]
    return min(found) + 1 if found else floor


def _boundary_before(text: str, at: int, floor: int) -> int:
    """The start of the line (else the word) that holds position `at`, at least `floor`; `at` itself
    when none starts in between (one unbroken token)."""
    boundary = text.rfind("\n", floor, at)
    if boundary < 0:
        boundary = max(text.rfind(" ", floor, at), text.rfind("\t", floor, at))
    return boundary + 1 if boundary >= 0 else at


def shifted(findings: Iterable[Finding], offset: int) -> list[Finding]:
    """`findings` of a window moved to offsets in the whole text."""
    if not offset:
        return list(findings)
    return [Finding(f.kind, f.start + offset, f.end + offset, f.score, f.redacted) for f in findings]


def windowed_note(windows: int, read: int, total: int) -> tuple[str, ...]:
    """An evidence line for a text read in several windows: whole, or only in part (over the budget)."""
    if read < total:
        return (
            f"truncated: read {read} of {total} characters in {windows} windows (all but the middle: over the "
            f"budget, {MAX_WINDOWED_CHARS} characters of ASCII text, {MAX_WINDOWED_CHARS_NON_ASCII} of other text, "
            f"a text keeps its first part and its last {MAX_TAIL_CHARS})",
        )
    if windows > 1:
        return (f"read whole: {total} characters in {windows} windows",)
    return ()


def truncation_note(scanned: int, total: int) -> tuple[str, ...]:
    """An evidence line saying the scan was cut (its head and tail read), or nothing."""
    if total > scanned:
        return (f"truncated: scanned {scanned} of {total} characters (the head and the tail; not the middle)",)
    return ()
