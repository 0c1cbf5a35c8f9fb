"""Encoded payloads in a text (base64, base32, hex, ascii85, binary, Morse, ROT13), decoded.

An encoded instruction is dangerous for what it says, and a request to read an encoded message
("what does this base64 say? SGFwcHkgYmlydGhkYXkh") is ordinary for the same reason. A classifier
that reads only the encoded characters can tell neither: it learns "encoded text = attack", and
refuses the second while the first depends on the wrapper's words. `decode_payloads` gives the
text with every payload that decodes to readable text replaced by that text, so that a
classifier can judge what is actually being asked.

A payload counts only when its decoding is readable: valid UTF-8, no control characters, and
letters for at least half of its non-space characters. Hashes, keys and binary blobs stay as
they are (their bytes are not text), so do numbers and ordinary words that happen to fit an
alphabet. A token that decodes to another token (hex inside base64) is decoded once more, and
a decoded text is searched again (`MAX_DEPTH` passes) for payloads it quotes.
Every step is bounded: texts are scanned by precompiled patterns, at most `MAX_TRIES` candidates
of each encoding are decoded per pass, and ROT13 is tried only where its shifted common words
appear.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

MAX_DEPTH = 2  # passes over the text: a decoded text that quotes another payload, no further
MAX_TRIES = 16  # candidate tokens decoded per text and depth (a long log line has many)
MIN_LETTERS = 3
CACHED_CHARS = 4096  # texts up to this long keep their decoding (at most 2,048 of them, ~8 MB)
READABLE_SAMPLE = 4096  # characters of a decoded payload examined (a base64 file in a tool result)

# Possessive repeats and no look-arounds: a maximal run matches once and is never retried from
# every position inside it (linear on hostile input); a run that starts or ends oddly is left to
# the decoder, which reads only what decodes to readable text.
_BINARY = re.compile(r"(?<![01])(?:[01]{8}[ ]?){3,}+")
_MORSE = re.compile(r"[.\-]{1,7}+(?:(?:[ ]{1,3}|[ ]?/[ ]?)[.\-]{1,7}+){3,}+")
_HEX_SPACED = re.compile(r"[0-9A-Fa-f]{2}(?:[ :][0-9A-Fa-f]{2}){3,}+")
# One token of the base64 / base32 / hex alphabets (hex and base32 are subsets of base64's).
_TOKEN = re.compile(r"[A-Za-z0-9+/_\-]{8,}+={0,6}+")
_TOKEN_HINT = re.compile(r"[0-9+/=]|[a-z][A-Z]")
_HEX = re.compile(r"[0-9A-Fa-f]+")
_DIGIT = re.compile(r"[0-9]")
_BASE32 = re.compile(r"[A-Z2-7]+=*")
_ASCII85 = re.compile(r"<~[!-u\s]{5,}?~>|(?<![!-u])[!-u]{20,}(?![!-u])")
_A85_MARKS = re.compile(r"[!\"#$%&'()*,;<>@\[\\\]^`]")

# Morse code as the International Telecommunication Union defines it (letters, digits, common marks).
_MORSE_TABLE = {
    ".-": "a", "-...": "b", "-.-.": "c", "-..": "d", ".": "e", "..-.": "f", "--.": "g", "....": "h",
    "..": "i", ".---": "j", "-.-": "k", ".-..": "l", "--": "m", "-.": "n", "---": "o", ".--.": "p",
    "--.-": "q", ".-.": "r", "...": "s", "-": "t", "..-": "u", "...-": "v", ".--": "w", "-..-": "x",
    "-.--": "y", "--..": "z", "-----": "0", ".----": "1", "..---": "2", "...--": "3", "....-": "4",
    ".....": "5", "-....": "6", "--...": "7", "---..": "8", "----.": "9", ".-.-.-": ".", "--..--": ",",
    "..--..": "?", ".----.": "'", "-.-.--": "!", "-..-.": "/", "---...": ":", "-...-": "=", ".-.-.": "+",
    "-....-": "-", ".--.-.": "@",
}  # fmt: skip

# ROT13 is tried on a stretch of Latin words only where the ROT13 form of a frequent word appears
# ("gur" = the, "lbhe" = your); a stretch is shifted back when it then reads as words of these
# languages and did not before. Frequent function words of English, German, French, Spanish,
# Italian, Portuguese and Dutch, and the words instructions are made of.
_ROT13_WORDS = """the and is for with you your this that what how all are will not our me please print ignore
    instructions instruction rules prompt a an of to in it be do can my on as at by from have tell show give
    make write now any no system secret secrets key keys password previous forget guidelines hidden reveal
    disregard obey everything restrictions filters limits policy repeat above initial message say has but
    open who where when why which there they them their was were been would could should
    more than then like about into some other just also only very know take people time one two get use
    way see out if so most many much such each every here after before over under between because
    der die das und ist nicht ich du deine deinen alle regeln zeige vergiss ein eine mit von
    le la les et est tu tes toutes regles ton ta un une des pour pas que qui
    el los las y es tus todas reglas tu un una por para con que
    il gli e di che sono tue tutte regole
    o os as e de que tuas todas regras um uma com
    de het een en je jouw alle regels niet"""
_ROT13_COMMON = frozenset(_ROT13_WORDS.split())
_ROT13 = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
)
_ROT13_HINTS = frozenset(w.translate(_ROT13) for w in _ROT13_COMMON if len(w) >= 3)
_LATIN_WORD = re.compile(r"[a-z]{3,}")
_WORD_RUN = re.compile(r"[A-Za-z][A-Za-z' ,-]*[A-Za-z]")  # a clause: sentence marks end it
_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True, slots=True)
class Decoded:
    """A text with its readable payloads decoded in place."""

    text: str
    kinds: tuple[str, ...]  # the encodings found, outermost first ("base64", "hex")
    payloads: tuple[str, ...]  # each payload's decoded text

    @property
    def how(self) -> str:
        """The encodings found, each once, for evidence: "base64+hex"."""
        return "+".join(dict.fromkeys(self.kinds))


def readable(text: str) -> bool:
    """Decoded bytes read as text: no control or unassigned characters, mostly letters, and not
    the rare Latin letters (Latin Extended-B, IPA) that random bytes decode to: an ordinary word
    read as base64 can be valid UTF-8 ("esadecimale" -> "z\u019dy\u0226jW")."""
    letters = 0
    visible = 0
    rare = 0
    for ch in text[:READABLE_SAMPLE]:
        if ch.isspace():
            continue
        visible += 1
        if ch.isalpha():
            letters += 1
            if "\u0180" <= ch <= "\u02ff":
                rare += 1
        elif unicodedata.category(ch)[0] == "C":  # control, format, private use, unassigned, surrogate
            return False
    return letters >= MIN_LETTERS and letters * 2 >= visible and rare * 5 <= letters


def _strict_utf8(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _utf8(raw: bytes) -> str | None:
    text = _strict_utf8(raw)
    return text if text is not None and readable(text) else None


def _hex_bytes(token: str) -> bytes | None:
    digits = token.replace(" ", "").replace(":", "")
    if len(digits) % 2 or len(digits) < 8:
        return None
    if digits.isdigit() and len(digits) < 16:  # a number (a date, an order id), not hex text
        return None
    return bytes.fromhex(digits)


def _from_hex(token: str) -> str | None:
    raw = _hex_bytes(token)
    return _utf8(raw) if raw is not None else None


def _base32_bytes(token: str) -> bytes | None:
    if len(token.rstrip("=")) < 16:
        return None
    try:
        return base64.b32decode(token + "=" * (-len(token) % 8))
    except (binascii.Error, ValueError):
        return None


def _base64_bytes(token: str) -> bytes | None:
    body = token.rstrip("=")
    if len(body) < 8 or len(body) % 4 == 1:
        return None
    padded = body + "=" * (-len(body) % 4)
    try:
        if "-" in body or "_" in body:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


# The narrower alphabet first: a hex string is also valid base32 / base64, a base32 one base64.
_TOKEN_DECODERS: tuple[tuple[str, re.Pattern[str] | None, Callable[[str], bytes | None]], ...] = (
    ("hex", _HEX, _hex_bytes),
    ("base32", _BASE32, _base32_bytes),
    ("base64", None, _base64_bytes),
)


def _from_token(token: str, nested: bool = True) -> tuple[str, str] | None:
    """A base64-alphabet token as hex, base32 or base64 text; a token that decodes to another
    token (hex inside base64) is decoded once more."""
    for kind, alphabet, to_bytes in _TOKEN_DECODERS:
        if alphabet is not None and not alphabet.fullmatch(token):
            continue
        raw = to_bytes(token)
        text = _strict_utf8(raw) if raw is not None else None
        if text is None:
            continue
        if readable(text):
            return kind, text
        inner = text.strip()
        if nested and _TOKEN.fullmatch(inner) and _is_encoded_token(inner):
            found = _from_token(inner, nested=False)
            if found is not None:
                return f"{kind}+{found[0]}", found[1]
    return None


def _from_binary(token: str) -> str | None:
    bits = token.replace(" ", "")
    return _utf8(int(bits, 2).to_bytes(len(bits) // 8, "big"))


def _from_morse(token: str) -> str | None:
    words = re.split(r"\s*/\s*|\s{3,}", token.strip())
    out: list[str] = []
    unknown = 0
    for word in words:
        letters = []
        for code in word.split():
            char = _MORSE_TABLE.get(code)
            if char is None:
                unknown += 1
            else:
                letters.append(char)
        out.append("".join(letters))
    text = " ".join(w for w in out if w)
    # Dots and dashes in ordinary text (ellipses, rules) decode to runs of one letter: "i i i".
    if unknown * 5 > len(token.split()) or len({ch for ch in text if ch.isalpha()}) < MIN_LETTERS:
        return None
    return text


def _from_ascii85(token: str) -> str | None:
    try:
        raw = base64.a85decode(token, adobe=token.startswith("<~"))
    except (ValueError, binascii.Error):
        return None
    return _utf8(raw)


def _replace(text: str, step: _Step, found: list[tuple[str, str]]) -> str:
    """`text` with each match of the step's pattern that it decodes replaced by the decoded text.
    At most MAX_TRIES candidates are decoded; plain words that the pattern also matches are
    skipped by the step's cheap test without counting, so padding cannot push a payload out."""
    may_hold, pattern, candidate, decode = step
    if not may_hold(text):
        return text
    tries = 0
    pieces: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        if candidate is not None and not candidate(match.group(0)):
            continue
        if tries >= MAX_TRIES:
            break
        tries += 1
        result = decode(match.group(0))
        if result is None:
            continue
        kind, decoded = result
        found.append((kind, decoded))
        pieces.append(text[last : match.start()])
        pieces.append(decoded)
        last = match.end()
    if last == 0:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def _kind(kind: str, decode: Callable[[str], str | None]) -> Callable[[str], tuple[str, str] | None]:
    def named(token: str) -> tuple[str, str] | None:
        text = decode(token)
        return (kind, text) if text is not None else None

    return named


def _rot13_runs(text: str, found: list[tuple[str, str]]) -> str:
    """Stretches of Latin words that read as English only after ROT13, shifted back."""
    if _ROT13_HINTS.isdisjoint(_LATIN_WORD.findall(text.lower())):
        return text

    def shift(match: re.Match[str]) -> str:
        run = match.group(0)
        words = [w.lower() for w in _WORD.findall(run)]
        if len(words) < 2:
            return run
        # Words of one or two letters match by chance ("a", "y", "un"); only longer ones count.
        before = sum(len(w) > 2 and w in _ROT13_COMMON for w in words)
        after = sum(len(w) > 2 and w.translate(_ROT13) in _ROT13_COMMON for w in words)
        if after >= 2 and after * 8 >= len(words) and after > 2 * before:
            shifted = run.translate(_ROT13)
            found.append(("rot13", shifted))
            return shifted
        return run

    return _WORD_RUN.sub(shift, text)


def _is_encoded_token(token: str) -> bool:
    # Encoded text always shows a digit, a base64 mark or an upper-case letter inside a lower-case
    # run; a plain word ("instructions") does not.
    return _TOKEN_HINT.search(token) is not None


def _is_ascii85(token: str) -> bool:
    # ascii85's alphabet holds every letter up to "u", so long words and paths match its pattern;
    # its output is full of marks, theirs is not.
    return token.startswith("<~") or len(_A85_MARKS.findall(token)) >= 3


def _has_binary(text: str) -> bool:
    return "01" in text  # every byte of ASCII text in binary starts 0, every letter 01


def _has_morse(text: str) -> bool:
    return ".-" in text or "-." in text or ".. " in text or "-- " in text


def _has_digit(text: str) -> bool:
    return _DIGIT.search(text) is not None  # hex of text always holds a digit (its high nibbles)


def _has_token_marks(text: str) -> bool:
    # Base64, base32 and hex of text nearly always show a digit or a base64 mark within a few
    # characters; a text with none holds no such payload worth the scan.
    return _has_digit(text) or "=" in text or "+" in text or "/" in text


def _mentions_ascii85(text: str) -> bool:
    # ascii85 is rare and its pattern matches any long run of letters and marks: scanned only
    # between <~ ~> or when the text names it (ascii85, base85, a85).
    return "<~" in text or "85" in text


# A step: a cheap test that the text may hold such a payload at all, the pattern of candidate
# payloads, a cheap test that a match is worth decoding, and the decoder.
_Step = tuple[
    Callable[[str], bool], re.Pattern[str], Callable[[str], bool] | None, Callable[[str], tuple[str, str] | None]
]
_STEPS: tuple[_Step, ...] = (
    (_has_binary, _BINARY, None, _kind("binary", _from_binary)),
    (_has_morse, _MORSE, None, _kind("morse", _from_morse)),
    (_has_digit, _HEX_SPACED, None, _kind("hex", _from_hex)),
    (_has_token_marks, _TOKEN, _is_encoded_token, _from_token),
    (_mentions_ascii85, _ASCII85, _is_ascii85, _kind("ascii85", _from_ascii85)),
)


def decode_payloads(text: str) -> Decoded | None:
    """`text` with its readable encoded payloads decoded in place; None when it holds none.

    The jailbreak patterns and the prompt-attack classifier both ask about the same user text
    (and a chat re-sends its turns): texts up to `CACHED_CHARS` are decoded once."""
    if len(text) <= CACHED_CHARS:
        return _decode_cached(text)
    return _decode(text)


@functools.lru_cache(maxsize=2048)
def _decode_cached(text: str) -> Decoded | None:
    return _decode(text)


def _decode(text: str) -> Decoded | None:
    found: list[tuple[str, str]] = []
    current = text
    for _ in range(MAX_DEPTH):
        before = len(found)
        for step in _STEPS:
            current = _replace(current, step, found)
        current = _rot13_runs(current, found)
        if len(found) == before:
            break
    if not found:
        return None
    kinds = tuple(kind for kinds, _ in found for kind in kinds.split("+"))
    return Decoded(current, kinds, tuple(payload for _, payload in found))
