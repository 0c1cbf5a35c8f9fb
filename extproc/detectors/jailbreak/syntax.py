"""How a jailbreak rule is written: a category, a weight, the lead phrases it may start with (its
anchors: their first words) and the rest of the pattern over the normal form, words separated by
single spaces. Shared by `rules.py` and the rule modules by class (`rules_overrides.py`,
`rules_extraction.py`, `rules_personas.py`, `rules_pretexts.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

JAILBREAK_CATEGORIES: tuple[str, ...] = ("instruction_override", "prompt_exfiltration", "roleplay_escape")


def alternatives(phrases: Iterable[str]) -> str:
    """One regex group of the phrases, longest first (so a longer phrase wins over its prefix)."""
    escaped = (re.escape(p).replace("\\ ", " ") for p in phrases)
    return "(?:" + "|".join(sorted(escaped, key=len, reverse=True)) + ")"


def gap(n: int, exclude: tuple[str, ...] = ()) -> str:
    """Up to `n` whole words, as few as possible, none of them in `exclude`."""
    if exclude:
        return f"(?:(?!{alternatives(exclude)} )[^ ]+ ){{0,{n}}}?"
    return f"(?:[^ ]+ ){{0,{n}}}?"


@dataclass(frozen=True, slots=True)
class Rule:
    category: str
    weight: float
    anchors: frozenset[str]  # first words of the leads: where the rule may start
    pattern: re.Pattern[str]
    # Lookbehinds a match's start must pass ("not after 不要"), kept out of `pattern`: a pattern
    # that opens with a lookbehind loses the regex engine's first-character skip and is tried at
    # every position of the text (a whole-text search three to ten times slower).
    not_after: re.Pattern[str] | None = None
    # Characters a text must hold for the rule to match at all (a rule of Russian phrases needs
    # Cyrillic): a text without them skips the rule's search. None: tried on every text.
    needs: re.Pattern[str] | None = None

    def finditer(self, view: str) -> Iterator[re.Match[str]]:
        """What `pattern` with its `not_after` lookbehinds in front would find in `view`."""
        if self.not_after is None:
            yield from self.pattern.finditer(view)
            return
        pos = 0
        while (m := self.pattern.search(view, pos)) is not None:
            if self.not_after.match(view, m.start()) is None:
                pos = m.start() + 1  # as the engine would: the next start position
                continue
            yield m
            pos = m.end() if m.end() > m.start() else m.start() + 1


def rule(category: str, weight: float, leads: Iterable[str], rest: str) -> Rule:
    leads = tuple(leads)
    # Words are separated by one space in the patterns as written; views may have several
    # (ASCII punctuation becomes spaces one for one). No pattern can contain "+" otherwise.
    pattern = (alternatives(leads) + rest).replace(" ", " +")
    return Rule(category, weight, frozenset(lead.split(" ")[0] for lead in leads), re.compile(pattern))


OVERRIDE, EXFIL, ROLEPLAY = JAILBREAK_CATEGORIES
