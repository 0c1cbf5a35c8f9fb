"""A cheap gate for expensive patterns: does a text hold any of a set of word stems?

A keyword signal with dozens of long regexes pays for every scan on every request, though nearly
every text holds none of the words those regexes need. A `StemFilter` answers "could they match?"
in one pass over the words: each word is looked up by its first three characters among the stems
sharing them. Stems of scripts written without spaces (Chinese, Japanese, Korean, Thai,
Devanagari, whose vowel signs split `\\w+` words) and phrases (words joined by a space, a hyphen or
a dot) are looked for as substrings, a phrase only once its first word occurs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_WORD = re.compile(r"\w+")
_UNSPACED = re.compile("[\u0900-\u097f\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_HEAD = 3


class StemFilter:
    """Case-insensitive: does any word of a text start with one of `stems`?"""

    def __init__(self, stems: Iterable[str]) -> None:
        folded = {s.casefold().strip() for s in stems if s.strip()}
        self._anywhere = tuple(sorted(s for s in folded if _UNSPACED.search(s)))
        self._anywhere_first = frozenset(s[0] for s in self._anywhere)
        self._phrases: dict[str, tuple[str, ...]] = {}
        self._short: set[str] = set()
        self._by_head: dict[str, tuple[str, ...]] = {}
        for stem in sorted(folded):
            if _UNSPACED.search(stem):
                continue
            words = _WORD.findall(stem)
            if len(words) > 1:  # a phrase, or a stem joined by a hyphen or dot ("pro-ana", "ak-47")
                first = words[0]
                self._phrases[first] = (*self._phrases.get(first, ()), stem)
            elif len(stem) < _HEAD:
                self._short.add(stem)
            else:
                self._by_head[stem[:_HEAD]] = (*self._by_head.get(stem[:_HEAD], ()), stem)

    def admits(self, text: str) -> bool:
        folded = text.casefold()
        if self._admits_folded(folded):
            return True
        # `re.IGNORECASE` reads a dotted capital İ and a dotless ı as i, where casefold makes İ an
        # i plus a combining dot (which splits the \w+ word) and keeps ı: read those as i too, so
        # the gate admits every text its patterns can match ("KİLL", "kıll").
        if "\u0307" not in folded and "\u0131" not in folded:
            return False
        return self._admits_folded(folded.replace("\u0307", "").replace("\u0131", "i"))

    def _admits_folded(self, folded: str) -> bool:
        by_head, short, phrases = self._by_head, self._short, self._phrases
        for word in _WORD.findall(folded):
            stems = by_head.get(word[:_HEAD])
            if stems is not None and any(word.startswith(s) for s in stems):
                return True
            if short and (word[:1] in short or word[:2] in short):
                return True
            candidates = phrases.get(word)
            if candidates is not None and any(p in folded for p in candidates):
                return True
        if self._anywhere and not self._anywhere_first.isdisjoint(folded):
            return any(s in folded for s in self._anywhere)
        return False
