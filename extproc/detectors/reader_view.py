"""A text as a reader sees it: the cheap obfuscations that change what a text's characters are
but not what a person reads, undone.

- format characters: zero-width spaces and joiners, soft hyphens, bidi embeddings, overrides and
  isolates, invisible operators and tag characters are dropped (a zero-width joiner or non-joiner
  with no ASCII letter on either side is kept: Persian, Indic and emoji sequences need them);
- look-alike letters (Unicode TR39 "confusables", reduced to the Latin look-alikes that obfuscate
  Latin-script text): full-width, mathematical and enclosed letters become their ASCII letters
  (their compatibility form); Cyrillic, Greek, Armenian and small-capital / IPA letters become
  the Latin letter they look like, but only in a word that mixes them with Latin letters, or in
  words made only of look-alikes that stand beside a Latin word and beside no real word of another
  script. Real Cyrillic or Greek text (words such as "привет", "καλημέρα" carry letters with no
  Latin look-alike) is left as it is, even where chess or maths notation makes most of its
  characters ASCII;
- leetspeak: in a word whose digits and symbols sit between letters ("1gn0r3", "pr0mpt",
  "s3cr3t"), 0 1 3 4 5 7 @ $ become o i e a s t a s. A number at a word's edge ("sha256",
  "covid19", "4k", "x86"), a word with a digit that is not a leet letter ("h2o", "k8s") and
  a lone number are not words in leetspeak and stay;
  Leetspeak is written without capitals, and a text with none reads to the classifier's case
  n-grams unlike the same words written as people write them ("forget every instruction ..."
  scores lower than "Forget every instruction ..."): where the text read has no capital letter,
  the first letter of each sentence and the pronoun "I" are capitalised (sentence case), so the
  view reads as the attack would have been written without the digits;
- letters separated by spaces or by one repeated mark ("i g n o r e", "i.g.n.o.r.e",
  "i-g-n-o-r-e"): a run of at least four single letters is joined; a wider gap (two spaces or
  more, or " / ") between runs stays a word break.

`reader_view(text)` is None when none of that applies (most texts: one regex search for ASCII
text), else the rewritten text and what was undone, for the evidence. Nothing here decides
anything: the prompt-attack classifier judges the view beside the text as sent
(`extproc.signals.classifier_views`) and the jailbreak patterns read it when the text as sent
has no finding (`extproc.detectors.jailbreak`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# --- format characters ---------------------------------------------------------------------------
_FORMAT = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\U0001bca0-\U0001bca3\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)
_JOINERS = "\u200c\u200d"

# --- look-alike letters ----------------------------------------------------------------------------
# Blocks whose letters NFKC maps to ASCII letters: full-width forms, mathematical alphanumerics,
# enclosed and squared letters, modifier (superscript) letters.
_COMPAT_BLOCKS = "\uff21-\uff3a\uff41-\uff5a\U0001d400-\U0001d7ff\u24b6-\u24e9\U0001f130-\U0001f189\u1d2c-\u1d6a"
_COMPAT = re.compile(f"[{_COMPAT_BLOCKS}]+")
# Letters of other scripts (and Latin extensions) drawn like a Latin letter, from Unicode's
# confusables.txt (TR39), Latin targets only; lower case, as the text is read case-folded.
_LOOKALIKE_PAIRS = (
    # Cyrillic
    "аa вb еe ѐe ёe һh іi їi јj кk ӏl мm нh оo ӧo рp сc ԛq тt уy ӯy хx ѕs ԁd ԝw ьb"
    # Greek
    " αa βb γy εe ηn ιi κk νv οo ρp τt υu χx ωw ϲc ϳj ζz"
    # Armenian
    " օo սu ցg ոn հh զq"
    # Latin small capitals and IPA letters (not Turkish's dotless ı: a letter of its own)
    " ɑa ɡg ʏy ɪi ʀr ᴀa ʙb ᴄc ᴅd ᴇe ɢg ʜh ᴊj ᴋk ʟl ᴍm ɴn ᴏo ᴘp ʀr ꜱs ᴛt ᴜu ᴠv ᴡw ʏy ᴢz ℓl"
)
_LOOKALIKE = {
    pair[0]: pair[1] for pair in _LOOKALIKE_PAIRS.split() if len(pair) == 2 and pair[1].isascii() and pair[0] != pair[1]
}
# Upper-case forms map through their lower case.
_LOOKALIKE_TABLE = str.maketrans(
    {**_LOOKALIKE, **{ch.upper(): lat for ch, lat in _LOOKALIKE.items() if ch.upper() != ch and len(ch.upper()) == 1}}
)
_WORD = re.compile(r"[^\W\d_]+")  # a word's letters (digits and marks split words)
_LOOKALIKE_CLASS = re.escape("".join(sorted(chr(k) for k in _LOOKALIKE_TABLE)))
# Any character one of the non-ASCII steps would change: one scan of a text with none of them.
_SUSPECT = re.compile(f"{_FORMAT.pattern}|[{_COMPAT_BLOCKS}{_LOOKALIKE_CLASS}]")
# A Latin letter beside a look-alike: every word that mixes them has one.
_MIXED = re.compile(f"[A-Za-z][{_LOOKALIKE_CLASS}]|[{_LOOKALIKE_CLASS}][A-Za-z]")
_ANY_LOOKALIKE = re.compile(f"[{_LOOKALIKE_CLASS}]")

# --- leetspeak -------------------------------------------------------------------------------------
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"})
# A token of letters, leet digits and leet symbols with a leet character between two letters
# somewhere, or a leet character both before and after letters.
_LEET_WORD = re.compile(
    r"(?<![\w@$.])(?=[A-Za-z013457@$]{3,24}(?![\w@$]))"
    r"[A-Za-z013457@$]*[A-Za-z][013457@$]+[A-Za-z][A-Za-z013457@$]*(?![\w@$])(?!\.[A-Za-z])"
)  # a word's length (not a base64 run, a hash or a token), and not an e-mail address ("ivan@example.ru")
_LEET_HINT = re.compile(r"[A-Za-z][013457@$]+[A-Za-z]")
# Once a text has two such words, every word of letters and leet characters is read ("4ll", "7h3")
# and so is a number of one or two leet digits ("15" is "is"); alone, "4th", "3rd" and "2nd" are
# numbers.
_LEET_EDGE = re.compile(
    r"(?<![\w@$.])(?=[A-Za-z013457@$]*[A-Za-z])[A-Za-z013457@$]*[013457@$][A-Za-z013457@$]*(?![\w@$])(?!\.[A-Za-z])"
    r"|(?<![\w@$.])[013457]{1,2}(?![\w@$.])"
)

# A text read out of leetspeak with no capital letters gets them back where English puts them:
# each sentence's first letter (at the start, after . ! ? and a space, after a line break) and
# the pronoun "i" ("i", "i'm", "i'd"; not "i.e." nor a word's "i"); "e.g." and "i.e." end no sentence.
# Each pattern starts with a character to scan for (no leading look-around: the engine would try
# every position). A sentence's end is checked in code: "e.g." and "i.e." end none.
_SENTENCE_START = re.compile(r"[.!?\n][ \t]*[\"'(\[]?[a-z]")
_ABBREVIATION = re.compile(r"[a-z]\.[a-z]\.")
_PRONOUN_I = re.compile(r"i(?<![\w'’.]i)(?!\w|\.\w)")

# --- spaced letters --------------------------------------------------------------------------------
# Single characters each followed by whitespace, at least four in a row; one space inside a word,
# two or more (or a line break) between words.
_SPACED_RUN = re.compile(r"(?<!\S)(?:\w[ \t]+){3,}\w(?!\S)")
_SPACED_GAP = re.compile(r"[ \t]{2,}")
# Single characters joined by one repeated mark: "i.g.n.o.r.e", "i-g-n-o-r-e", "i*g*n*o*r*e".
_MARKED_RUN = re.compile(r"(?<![\w.\-*·|_])\w(?P<mark>[.\-_*·|])\w(?:(?P=mark)\w){2,}(?![\w.\-*·|_])")
_SPACED_HINT = re.compile(r"(?<!\S)\w[ \t]+\w[ \t]+\w[ \t]+\w(?!\S)|\w([.\-_*·|])\w\1\w\1\w")


# The shape of a text, at bytes speed: letters "a", leet digits and symbols "0", other digits "9",
# joining marks ".", whitespace " ", the rest "#". The hints below are substring tests on it.
def _shape_table() -> bytes:
    out = bytearray(b"#" * 256)
    for i in range(256):
        ch = chr(i)
        if ch.isascii() and ch.isalpha():
            out[i] = ord("a")
        elif ch in "013457@$":
            out[i] = ord("0")
        elif ch.isdigit():
            out[i] = ord("9")
        elif ch in ".-_*|":
            out[i] = ord(".")
        elif ch in " \t":
            out[i] = ord(" ")
    return bytes(out)


_SHAPE = _shape_table()


@dataclass(frozen=True, slots=True)
class Reading:
    text: str
    undone: tuple[str, ...]  # what was undone, in words, for the evidence

    @property
    def how(self) -> str:
        return ", ".join(self.undone)


def _strip_format(text: str) -> str:
    def keep(m: re.Match[str]) -> str:
        ch = m.group()
        if ch in _JOINERS:
            before = text[m.start() - 1] if m.start() else " "
            after = text[m.end()] if m.end() < len(text) else " "
            if not (before.isascii() and before.isalnum()) and not (after.isascii() and after.isalnum()):
                return ch
        return ""

    return _FORMAT.sub(keep, text)


def _compat(m: re.Match[str]) -> str:
    return unicodedata.normalize("NFKC", m.group())


def _word_kind(word: str) -> str:
    """The kind of a word: "latin" (ASCII letters, or Latin letters with diacritics), "mixed" (Latin letters and
    look-alikes and nothing else), "lookalike" (look-alikes only) or "foreign" (a letter of another
    script with no Latin look-alike: a real Cyrillic, Greek or other word)."""
    has_latin = has_lookalike = False
    for ch in word:
        if ch.isascii():
            has_latin = True
        elif ch.lower() in _LOOKALIKE:
            has_lookalike = True
        elif unicodedata.name(ch, "").startswith("LATIN"):
            has_latin = True
        else:
            return "foreign"
    if has_lookalike:
        return "mixed" if has_latin else "lookalike"
    return "latin"


def _map_lookalikes(text: str) -> str:
    """Look-alike letters mapped in words that mix them with Latin letters, and in words made of
    nothing else that stand among Latin words: beside a Latin word, and not beside a real word of
    another script. Real Cyrillic or Greek text keeps its words even where digits, chess or maths
    notation make its characters mostly ASCII ("1. e4 e5 2. Nf3 ... как тут играть?": "как" and
    "тут" are made of look-alikes, but sit beside "играть")."""
    if not _ANY_LOOKALIKE.search(text):
        return text
    # Cheap first: text that is mostly other scripts is left alone unless a word mixes scripts
    # (an ASCII letter touching a non-ASCII character in the bytes' shape, and a look-alike beside
    # a Latin letter) or its ASCII letters outnumber its other characters.
    ascii_chars = len(text.encode("ascii", "ignore"))
    others = len(text) - ascii_chars
    if ascii_chars <= 4 * others:
        shape = text.encode("utf-8", "surrogatepass").translate(_SHAPE)
        mixed = (b"a#" in shape or b"#a" in shape) and _MIXED.search(text) is not None
        if not mixed and shape.count(b"a") <= others:
            return text
    words = list(_WORD.finditer(text))
    kinds = [_word_kind(m.group()) for m in words]
    if "mixed" not in kinds and "lookalike" not in kinds:
        return text
    # In text with real words of another script, a look-alike run at the text's edge ("В SQL ...")
    # needs Latin on both sides: it may be that script's one-letter word.
    has_foreign = "foreign" in kinds
    out: list[str] = []
    last = 0
    i = 0
    while i < len(words):
        kind = kinds[i]
        if kind == "mixed":
            out += [text[last : words[i].start()], words[i].group().translate(_LOOKALIKE_TABLE)]
            last = words[i].end()
        elif kind == "lookalike":
            j = i
            while j < len(words) and kinds[j] == "lookalike":
                j += 1  # a run of look-alike words: judged by the words on either side of it
            sides = {kinds[i - 1] if i else "edge", kinds[j] if j < len(words) else "edge"}
            if "foreign" not in sides and sides & {"latin", "mixed"} and not ("edge" in sides and has_foreign):
                run = text[words[i].start() : words[j - 1].end()]
                out += [text[last : words[i].start()], run.translate(_LOOKALIKE_TABLE)]
                last = words[j - 1].end()
            i = j
            continue
        i += 1
    out.append(text[last:])
    return "".join(out)


def _join_spaced(m: re.Match[str]) -> str:
    words = _SPACED_GAP.split(m.group())
    return " ".join("".join(word.split()) for word in words)


def _join_spaced_runs(text: str) -> str:
    text = _SPACED_RUN.sub(_join_spaced, text)
    return _MARKED_RUN.sub(lambda m: m.group().replace(m.group("mark"), ""), text)


def _read_leet_word(m: re.Match[str]) -> str:
    word = m.group()
    plain = word.translate(_LEET)
    # A word in capitals keeps them ("PR0MPT" is "PROMPT", not "PRoMPT").
    return plain.upper() if word.isupper() and sum(ch.isalpha() for ch in word) >= 2 else plain


def _unleet(text: str) -> str:
    plain, n = _LEET_WORD.subn(_read_leet_word, text)
    return _LEET_EDGE.sub(_read_leet_word, plain) if n >= 2 else plain


def sentence_case(text: str) -> str:
    """`text`, which has no capital letter, with its sentences' first letters and the pronoun "I"
    capitalised."""

    def capital(m: re.Match[str]) -> str:
        found = m.group()
        start = m.start()
        after_word = start > 3 and text[start - 4].isalnum()
        if found[0] == "." and start >= 3 and not after_word and _ABBREVIATION.fullmatch(text, start - 3, start + 1):
            return found  # "i.e. this", "e.g. that"
        if found[0] != "\n" and found[1:2] not in (" ", "\t"):
            return found  # "3.5", "v2.0", "a.b": no space after the mark
        return found[:-1] + found[-1].upper()

    text = _SENTENCE_START.sub(capital, text)
    if text[:1].islower() or text[:1] in "\"'([":
        text = re.sub(r"^[\"'(\[]?[a-z]", lambda m: m.group().upper(), text, count=1)
    return _PRONOUN_I.sub("I", text)


def reader_view(text: str) -> Reading | None:
    """`text` with its format characters, look-alike letters, leetspeak and spaced-out letters
    undone (see the module docstring); None when there is nothing to undo."""
    undone: list[str] = []
    out = text
    if not text.isascii() and _SUSPECT.search(text):
        stripped = _strip_format(out)
        if stripped != out:
            undone.append("format characters removed")
            out = stripped
        if _COMPAT.search(out):
            out = _COMPAT.sub(_compat, out)
            undone.append("compatibility letters mapped")
        mapped = _map_lookalikes(out)
        if mapped != out:
            undone.append("look-alike letters mapped")
            out = mapped
    shape = out.encode("utf-8", "surrogatepass").translate(_SHAPE)  # non-ASCII bytes are "#"
    if (b"a a a a" in shape or b"a.a.a.a" in shape or b"a  a  a" in shape) and _SPACED_HINT.search(out):
        joined = _join_spaced_runs(out)
        if joined != out:
            undone.append("spaced letters joined")
            out = joined
            shape = out.encode("utf-8", "surrogatepass").translate(_SHAPE)
    if b"a0" in shape and b"0a" in shape and _LEET_HINT.search(out):
        plain = _unleet(out)
        if plain != out:
            undone.append("leetspeak read")
            out = plain
            if out.islower():  # no capital letter anywhere
                out = sentence_case(out)
                undone.append("sentence case restored")
    return Reading(out, tuple(undone)) if undone else None
