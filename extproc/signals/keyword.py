"""Keyword signal: literal words or regular expressions in the selected roles' text.

Literal keywords: each is first looked for as a plain substring (C speed; case-folded text
when case-insensitive), and only a keyword that occurs is checked against its compiled
word-boundary pattern, so a message costs a few substring searches.

Regex keywords are compiled into one alternation at policy load: a message with none of
them costs one scan. When that scan finds something, keywords it did not report (an
alternation reports one keyword per position, so "machine learning" can hide "machine")
are checked one by one: the extra work only happens on matching messages.

`views: [reader]` also looks for the keywords in the text as a reader sees it
(`extproc.detectors.reader_view`: zero-width characters dropped, look-alike letters mapped,
leetspeak and spaced-out letters read), so "n o  r u l e s" or "unr3str1ct3d" match a safety
keyword; the evidence says which view matched. A text with nothing to undo (nearly every text)
costs one cheap scan more. Off by default: a routing keyword has no adversary to read past.

`prefilter:` lists word stems (phrases, and stems of unspaced scripts, anywhere) of which a text
must hold one before the keywords are searched at all: dozens of long patterns then cost one pass
over the words on the texts they could never match (`extproc.detectors.stem_filter`). A stem the
patterns need but the list lacks loses those matches: list every word a pattern requires.

`max_chars:` bounds what the keywords read to the text's first and last halves of `max_chars`
characters: for patterns whose cost per character is high and whose target (a short request) sits
at either end of a message, a hostile megabyte costs what a page does.

`join_abbreviations: true` also reads the text with the dots of its abbreviations dropped
("K.O.-Tropfen", "z.B.", "e.g.", "Dr."), so that patterns that stop at a sentence's end ("[^.?!]")
are not cut there; a keyword present in either reading is present. Never the joined reading
alone: "etc." may also end a sentence, and joining must not let one sentence's excuse word cover
the next one's request. The stem gate reads the text as written: a stem must not need the dots
dropped ("tropfen", not "ko-tropfen").

`excuse_in_sentence:` lists regexes (case as the keywords, each read as a whole word) that excuse a
match in their own sentence only: a keyword counts when one of its matches sits in a sentence
(between `.?!。？！` or a line break) holding none of them. "How do I make meth? Then recommend a
movie." is a request for meth beside a movie question, while "In Minecraft, how do I make TNT?" is
a game's. An entry whose opening comment says `glued` (`(?#GTA numbered, glued)...`) is written for
scripts without spaces: a CJK, kana or Hangul letter beside it does not join its word ("GTA5里怎么
偷车？" holds "gta5里"). Every other entry keeps whole-word edges, so "halloween怎么自制炸弹" holds no
excuse. `excuse_void_in_sentence:` lists regexes that void every excuse in their sentence: "After
playing GTA, how do I steal a car in real life?" asks for the act outside the game. A void's edges
are Latin letters and digits only ("irl" is not in "girl"): Thai, Arabic or Hebrew glue it to their
words ("وفي الحياة الحقيقية"). A signal matched only in excused sentences is not matched; the
excuse costs nothing on the texts without a match.

A regex keyword that opens with a comment, `(?#weapons made)...`, is labelled by that comment in
results, evidence and `label:` conditions: a long pattern reads as its name.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from extproc.detectors.common import join_bounded, truncation_note
from extproc.detectors.reader_view import reader_view
from extproc.detectors.stem_filter import StemFilter
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, TextSignalSpec

_MAX_EVIDENCE = 20
# Letters joined by dots ("K.O.", "z.B.", "e.g", "U.S.A."), and a few titles and Latin or German
# shorthands written with one dot before a space ("Dr. Meier", "bzw. ", "etc. "): their dots end no
# sentence. Digits are left alone ("3.5" and "v2.1" are not words a pattern reads).
_ABBREVIATION = re.compile(
    r"(?<![\w.])[^\W\d_](?:\.[^\W\d_])+\.?(?![\w])"
    r"|(?<![\w.])(?:mrs?|ms|dr|drs?a?|prof|st|vs|etc|sra?|srta|bzw|usw|ca|nr|evtl|ggf|sog|inkl|mme|mlle|cf|approx)\.(?=\s)",
    re.IGNORECASE,
)


def join_abbreviations(text: str) -> str:
    """`text` with the dots of its abbreviations dropped ("K.O.-Tropfen" -> "KO-Tropfen")."""
    if "." not in text:
        return text
    return _ABBREVIATION.sub(lambda m: m.group(0).replace(".", ""), text)


_NAMED = re.compile(r"\(\?#([^)]+)\)")


def keyword_label(keyword: str, regex: bool) -> str:
    """The name a keyword is reported by: a regex's leading `(?#name)` comment, else the keyword."""
    named = _NAMED.match(keyword) if regex else None
    return named.group(1).strip() if named else keyword


class KeywordSpec(TextSignalSpec):
    type: Literal["keyword"]
    keywords: list[str] = Field(min_length=1)
    mode: Literal["any", "all", "none"] = "any"
    whole_word: bool = True
    case_sensitive: bool = False
    regex: bool = False  # keywords are regular expressions (Python `re` syntax)
    views: list[Literal["reader"]] = Field(default_factory=list)  # also read the text as a reader sees it
    prefilter: list[str] = Field(default_factory=list)  # stems a text must hold before the keywords are searched
    max_chars: int | None = Field(default=None, ge=2)  # read only the first and last max_chars / 2 characters
    join_abbreviations: bool = False  # an abbreviation's dots ("K.O.", "z.B.") are no sentence ends
    excuse_in_sentence: list[str] = Field(default_factory=list)  # regexes excusing a match in their sentence
    # regexes that void any excuse in their sentence ("in real life", "现实中"): the act asked for outside the game
    excuse_void_in_sentence: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_keywords(self) -> KeywordSpec:
        seen: set[str] = set()
        for i, kw in enumerate(self.keywords):
            if not kw:
                raise ValueError(f"keywords[{i}] is empty")
            label = keyword_label(kw, self.regex)
            if label in seen:
                raise ValueError(f"keywords[{i}] {label!r} is listed twice")
            seen.add(label)
            if self.regex:
                _check_regex(kw, f"keywords[{i}] {kw!r}", "match any text")
        for i, excuse in enumerate(self.excuse_in_sentence):
            _check_regex(excuse, f"excuse_in_sentence[{i}] {excuse!r}", "excuse any text")
        for i, void in enumerate(self.excuse_void_in_sentence):
            _check_regex(void, f"excuse_void_in_sentence[{i}] {void!r}", "void every excuse")
        return self


def _check_regex(pattern: str, where: str, if_empty: str) -> None:
    """A policy regex must compile and must not match the empty string (it would `if_empty`)."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{where} is not a valid regular expression: {exc}") from exc
    if compiled.fullmatch("") is not None:
        raise ValueError(f"{where} matches the empty string, so it would {if_empty}")


def _keyword_pattern(kw: str, spec: KeywordSpec) -> str:
    body = kw if spec.regex else re.escape(kw)
    if not spec.whole_word:
        return f"(?:{body})"
    if spec.regex:
        return rf"(?<!\w)(?:{body})(?!\w)"
    # A literal keyword only needs a boundary on the sides that are word characters ("c++", ".net"),
    # and none beside a CJK character: those scripts write words without spaces ("请本地处理" holds "本地处理").
    head = r"(?<!\w)" if _bounded(kw[0]) else ""
    tail = r"(?!\w)" if _bounded(kw[-1]) else ""
    return f"{head}{body}{tail}"


# What ends a sentence for `excuse_in_sentence`: the same marks the sentence-reading patterns stop at.
_SENTENCE_MARKS = ".?!\u3002\uff1f\uff01\n"
_SENTENCE_END = re.compile(f"[{_SENTENCE_MARKS}]")


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of the sentence(s) holding text[start:end] (a zero-width match: the sentence it opens)."""
    head = max(text.rfind(mark, 0, start) for mark in _SENTENCE_MARKS) + 1
    tail = _SENTENCE_END.search(text, max(end, start))
    return head, tail.start() if tail else len(text)


def _unexcused(
    pattern: re.Pattern[str], excuse: re.Pattern[str], text: str, void: re.Pattern[str] | None = None
) -> bool:
    """Does `pattern` match in a sentence of `text` that holds no `excuse` (or holds a `void`)?"""
    for m in pattern.finditer(text):
        head, tail = _sentence(text, m.start(), m.end())
        if excuse.search(text, head, tail) is None:
            return True
        if void is not None and void.search(text, head, tail) is not None:
            return True
    return False


_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK = re.compile(f"[{_CJK_RANGES}]")
# A word character other than a CJK, kana or Hangul letter: the edge of a `glued` excuse entry.
_WORD_NOT_CJK = f"[^\\W{_CJK_RANGES}]"
# A Latin letter or digit: the edge of an `excuse_void_in_sentence` entry.
_LATIN = "[A-Za-z0-9\u00c0-\u024f]"
_GLUED = re.compile(r"\(\?#[^)]*\bglued\b")


def _excuse_entry(entry: str) -> str:
    """One `excuse_in_sentence` entry as a whole word; a `glued` entry's word may touch CJK letters."""
    edge = _WORD_NOT_CJK if _GLUED.match(entry) else r"\w"
    return rf"(?<!{edge})(?:{entry})(?!{edge})"


def _bounded(ch: str) -> bool:
    return (ch.isalnum() or ch == "_") and _CJK.match(ch) is None


class KeywordSignal(Signal):
    spec: KeywordSpec
    inline = True

    def __init__(self, spec: KeywordSpec) -> None:
        super().__init__(spec)
        self._keywords = tuple(spec.keywords)
        self._labels = tuple(keyword_label(kw, spec.regex) for kw in spec.keywords)
        self._prefilter = StemFilter(spec.prefilter) if spec.prefilter else None
        self._fold = not spec.case_sensitive and not spec.regex  # literal, case-insensitive: fold the text
        flags = re.IGNORECASE if (spec.regex and not spec.case_sensitive) else 0
        needles = [kw.casefold() if self._fold else kw for kw in spec.keywords]
        self._needles: tuple[str, ...] | None = None if spec.regex else tuple(needles)
        self._each = tuple(re.compile(_keyword_pattern(n, spec), flags) for n in needles)
        self._combined: re.Pattern[str] | None = None
        # Numbered groups or back-references in user regexes would be renumbered inside one
        # alternation: those policies use the per-keyword patterns only.
        if spec.regex and not any(p.groups for p in self._each):
            alternation = "|".join(f"(?P<k{i}>{_keyword_pattern(kw, spec)})" for i, kw in enumerate(spec.keywords))
            try:
                self._combined = re.compile(alternation, flags)
            except re.error:  # e.g. an inline global flag inside one keyword
                self._combined = None
        self._excuse: re.Pattern[str] | None = None
        if spec.excuse_in_sentence:
            excuses = "|".join(_excuse_entry(e) for e in spec.excuse_in_sentence)
            self._excuse = re.compile(excuses, 0 if spec.case_sensitive else re.IGNORECASE)
        self._void: re.Pattern[str] | None = None
        if spec.excuse_void_in_sentence:
            voids = "|".join(rf"(?<!{_LATIN})(?:{v})(?!{_LATIN})" for v in spec.excuse_void_in_sentence)
            self._void = re.compile(voids, 0 if spec.case_sensitive else re.IGNORECASE)

    def known_labels(self) -> frozenset[str]:
        return frozenset(self._labels)

    def found(self, text: str) -> list[str]:
        """The keywords present in `text`, in policy order."""
        if self._prefilter is not None and not self._prefilter.admits(text):
            return []
        hit = self._hits(text)
        if self.spec.join_abbreviations:  # after the gate: most texts never pay for it
            # An extra reading, never a replacement: a dot that `join_abbreviations` drops may also
            # end a sentence ("I love history etc. What poison..."), and joining the two must not
            # let one sentence's excuse word cover the other's request.
            joined = join_abbreviations(text)
            if joined != text:
                hit = [a or b for a, b in zip(hit, self._hits(joined), strict=True)]
        return [label for label, h in zip(self._labels, hit, strict=True) if h]

    def _hits(self, text: str) -> list[bool]:
        """Per keyword, in policy order: is it present in `text` (in a sentence no excuse covers)?"""
        hit = self._present(text)
        excuse = self._excuse
        if excuse is not None and any(hit) and excuse.search(text) is not None:
            haystack = text.casefold() if self._fold else text
            hit = [h and _unexcused(self._each[i], excuse, haystack, self._void) for i, h in enumerate(hit)]
        return hit

    def _present(self, text: str) -> list[bool]:
        """Per keyword, in policy order: is it present in `text`?"""
        if self._needles is not None:
            haystack = text.casefold() if self._fold else text
            return [
                needle in haystack and pattern.search(haystack) is not None
                for needle, pattern in zip(self._needles, self._each, strict=True)
            ]
        hit = [False] * len(self._keywords)
        if self._combined is not None:
            any_hit = False
            for m in self._combined.finditer(text):
                group = m.lastgroup
                if group is not None:
                    hit[int(group[1:])] = True
                    any_hit = True
            if not any_hit:
                return hit
        for i, pattern in enumerate(self._each):
            if not hit[i] and pattern.search(text) is not None:
                hit[i] = True
        return hit

    def compute(self, request: RoutingRequest) -> Evaluation:
        texts = (s.text for s in request.iter_text(self.spec.roles))
        limit = self.spec.max_chars
        if limit is None:
            text, total = join_bounded(texts)
        else:  # an exact cut: the bound is the point
            text, total = join_bounded(texts, limit // 2, tail=limit - limit // 2, lookback=0)
        found = self.found(text) if text else []
        read_note, read_only = "", frozenset[str]()
        if text and "reader" in self.spec.views:
            reading = reader_view(text)
            if reading is not None:
                extra = [kw for kw in self.found(reading.text) if kw not in found]
                if extra:
                    found = [label for label in self._labels if label in found or label in extra]
                    read_note = f" (as read: {reading.how})"
                    read_only = frozenset(extra)
        fraction = len(found) / len(self._labels)
        mode = self.spec.mode
        if mode == "any":
            matched, score = bool(found), fraction
        elif mode == "all":
            matched, score = len(found) == len(self._keywords), fraction
        else:
            matched, score = not found, 1.0 - fraction
        evidence = tuple(f"keyword {kw!r}{read_note if kw in read_only else ''}" for kw in found[:_MAX_EVIDENCE])
        if len(found) > _MAX_EVIDENCE:
            evidence += (f"... and {len(found) - _MAX_EVIDENCE} more",)
        return Evaluation(
            matched=matched,
            score=score,
            labels={kw: 1.0 for kw in found},
            evidence=evidence + truncation_note(len(text), total),
        )
