"""The normal form the jailbreak rules are written against, and the leetspeak view.

See `extproc.detectors.jailbreak` for what the normalisation does and why.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable


def _invisible_class() -> str:
    """A regex class of combining marks and format characters (Mn, Me, Cf), built from unicodedata."""
    ranges: list[tuple[int, int]] = []
    code_points: Iterable[int] = [*range(0x80, 0x10000), *range(0xE0000, 0xE0080), *range(0xE0100, 0xE01F0)]
    for cp in code_points:
        if unicodedata.category(chr(cp)) in ("Mn", "Me", "Cf"):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    parts = [re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges]
    return "[" + "".join(parts) + "]"


_INVISIBLE = re.compile(_invisible_class())
_ODD = re.compile(r"[^\w\s]|_")
_ASCII_TABLE = bytes((ord(chr(i).lower()) if chr(i).isalnum() else 0x20) for i in range(256))
_UTF8_TABLE = bytes((i if i >= 0x80 or chr(i).isalnum() else 0x20) for i in range(256))
_PUNCT_BYTES = re.compile(b"|".join(re.escape(ch.encode("utf-8")) for ch in "¿¡«»‘’‚“”„–—…·•"))
_DIACRITIC_BYTES = re.compile(rb"\xcc[\x80-\xbf]|\xcd[\x80-\xaf]")
_CONFUSABLE_HINT = re.compile(r"[\u0370-\u03ff\u0400-\u052f]")
_CONFUSABLES = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
        "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w",
        "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
        "χ": "x", "γ": "y",
    }
)  # fmt: skip
LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"})
LEET_HINT = re.compile(r"[013457@$](?<=[A-Za-z][013457@$])[A-Za-z]")


def normalize(text: str) -> str:
    """The normal form the patterns are written against (see the module docstring).

    ASCII text keeps its length (offsets map one to one); other text has runs of
    separators collapsed to one space and is mapped back with `normalize_with_map`.
    """
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_TABLE).decode("ascii")
    s = unicodedata.normalize("NFKD", text).casefold()
    if _CONFUSABLE_HINT.search(s):
        s = s.translate(_CONFUSABLES)
    # At bytes speed: ASCII punctuation and common non-ASCII punctuation to spaces, combining
    # diacritics (U+0300-U+036F) dropped. Most Latin-script text is then plain ASCII.
    b = s.encode("utf-8", "surrogatepass").translate(_UTF8_TABLE)
    b = _DIACRITIC_BYTES.sub(b"", _PUNCT_BYTES.sub(b" ", b))
    if b.isascii():
        return b" ".join(b.split()).decode("ascii")
    s = _INVISIBLE.sub("", b.decode("utf-8", "surrogatepass"))
    if _ODD.search(s):  # other non-ASCII punctuation and symbols
        s = _ODD.sub(" ", s)
    return " ".join(s.split())


def _normalize_char(ch: str) -> str:
    """One character of `text` in the normal form, before spaces are collapsed."""
    if ch.isascii():
        return ch.lower() if ch.isalnum() else " "
    pieces = unicodedata.normalize("NFKD", ch).casefold()
    if _CONFUSABLE_HINT.search(pieces):
        pieces = pieces.translate(_CONFUSABLES)
    out = []
    for p in pieces:
        if p.isascii() or not _INVISIBLE.match(p):
            out.append(p if p.isalnum() else " ")
    return "".join(out)


def normalize_with_map(text: str) -> tuple[str, list[int]]:
    """`normalize(text)` for non-ASCII text, built one character at a time with each output
    character's offset in `text`."""
    chars: list[str] = []
    origin: list[int] = []
    pending_space = False
    pending_at = 0
    for i, ch in enumerate(text):
        for p in _normalize_char(ch):
            if p != " " and not p.isspace():
                if pending_space and chars:
                    chars.append(" ")
                    origin.append(pending_at)
                pending_space = False
                chars.append(p)
                origin.append(i)
            elif not pending_space:
                pending_space = True
                pending_at = i
    return "".join(chars), origin
