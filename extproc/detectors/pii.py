"""Personal data in text: emails, phone numbers, payment cards, US SSNs, IBANs, passport numbers.

Numbers are found with one scan for "digit groups joined by single separators" and then
classified in Python with real checks (Luhn and issuer ranges for cards, area/group/serial
rules for SSNs, mod-97 and per-country length for IBANs, numbering-plan shapes for
phones; a clearly formatted 3-3-4 number outside the North American plan is still reported,
at a lower score), so version numbers, dates, IP addresses, UUIDs and hashes do not come out as
PII. Passport numbers are found only next to a "passport number" phrase in one of several
languages; machine-readable zones are another module's job.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from extproc.detectors.common import Finding, check_kinds, mask_tail

PII_KINDS: tuple[str, ...] = ("email", "phone", "credit_card", "us_ssn", "iban", "passport")

# --- numbers: cards, SSNs, phones ---------------------------------------------------------

# A run of digit groups joined by one separator each: "4111 1111 1111 1111", "(555) 123-4567",
# "+44 (0)20 7946 0958". Separators are mandatory between groups and every quantifier is
# bounded, so a failed attempt costs O(1) per start: linear overall.
_SEP = r"(?:[ \u00a0.\-]|\)[ \u00a0\-]?|[ \u00a0]?\()"
_NUMBER_RUN = re.compile(r"[\d+(]\d{0,19}(?:" + _SEP + r"\d{1,19}){0,9}")
_NON_DIGIT = re.compile(r"\D+")
_TOKEN = re.compile(r"[^ \u00a0]+")
_LONE_LAST_DIGIT = re.compile(r"[ \u00a0]\d\Z")
_SSN_SHAPE = re.compile(r"(\d{3})([ \-])(\d{2})\2(\d{4})")
_SSN_BARE = re.compile(r"\d{9}")
_SSN_CONTEXT = re.compile(r"(?i:ssn|social security|soc\.? ?sec)")
_NANP_SHAPE = re.compile(r"(?:\+?1[ .\-]?)?(?:\([2-9]\d\d\) ?|[2-9]\d\d[ .\-])[2-9]\d\d[ .\-]\d{4}")
# The 3-3-4 layout without the numbering-plan rules ("555-120-3344", "(123) 456-7890"): one
# consistent "-" or "." separator, or a parenthesised area code. Plain spaces are left out
# ("100 200 3000" is more often a list of numbers than a phone).
_PHONE_LAYOUT = re.compile(r"(?:1([.\-]))?\d{3}([.\-])\d{3}\2\d{4}|(?:1[ .\-]?)?\(\d{3}\) ?\d{3}[.\-]\d{4}")
_CARD_GROUPED = re.compile(r"\d{4}([ \-])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{1,3})?|\d{4}([ \-])\d{6}\2\d{4,5}")
_EU_LOCAL = re.compile(r"0\d{1,4}(?:([ .\-])\d{2,8})(?:\1\d{2,8}){0,4}")

# (first digits of the IIN, allowed lengths)
_CARD_IIN: tuple[tuple[tuple[int, int], frozenset[int]], ...] = (
    ((4, 4), frozenset({13, 16, 19})),  # Visa
    ((51, 55), frozenset({16})),  # Mastercard
    ((2221, 2720), frozenset({16})),  # Mastercard 2-series
    ((34, 34), frozenset({15})),  # Amex
    ((37, 37), frozenset({15})),
    ((300, 305), frozenset({14, 16, 17, 18, 19})),  # Diners
    ((36, 36), frozenset({14, 16, 17, 18, 19})),
    ((38, 39), frozenset({14, 16, 17, 18, 19})),
    ((6011, 6011), frozenset({16, 17, 18, 19})),  # Discover
    ((644, 649), frozenset({16, 17, 18, 19})),
    ((65, 65), frozenset({16, 17, 18, 19})),
    ((3528, 3589), frozenset({16, 17, 18, 19})),  # JCB
    ((62, 62), frozenset({16, 17, 18, 19})),  # UnionPay
    ((50, 50), frozenset({12, 13, 14, 15, 16, 17, 18, 19})),  # Maestro
    ((56, 58), frozenset({12, 13, 14, 15, 16, 17, 18, 19})),
    ((2200, 2204), frozenset({16, 17, 18, 19})),  # Mir
)


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check used by payment card numbers."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _plausible_iin(digits: str) -> bool:
    n = len(digits)
    for (lo, hi), lengths in _CARD_IIN:
        width = len(str(lo))
        if lo <= int(digits[:width]) <= hi and n in lengths:
            return True
    return False


def _card(raw: str, digits: str) -> float:
    n = len(digits)
    if not 13 <= n <= 19 or len(set(digits)) < 2:
        return 0.0
    if not (luhn_valid(digits) and _plausible_iin(digits)):
        return 0.0
    if raw == digits:
        return 0.9
    return 0.95 if _CARD_GROUPED.fullmatch(raw) else 0.0


def _ssn(raw: str, digits: str, text: str, start: int) -> float:
    m = _SSN_SHAPE.fullmatch(raw)
    if m is not None:
        area, group, serial = m.group(1), m.group(3), m.group(4)
    elif _SSN_BARE.fullmatch(raw) and _SSN_CONTEXT.search(text, max(0, start - 40), start):
        area, group, serial = digits[:3], digits[3:5], digits[5:]
    else:
        return 0.0
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return 0.0
    if len(set(digits)) < 2:
        return 0.0
    context = _SSN_CONTEXT.search(text, max(0, start - 40), start) is not None
    return 0.95 if context else (0.85 if m is not None else 0.0)


def _phone(raw: str, digits: str) -> float:
    n = len(digits)
    if raw.startswith("+"):
        # E.164: a country code (never starting with 0) and at most 15 digits in all.
        return 0.85 if 8 <= n <= 15 and digits[0] != "0" else 0.0
    if _NANP_SHAPE.fullmatch(raw):
        return 0.75
    m = _PHONE_LAYOUT.fullmatch(raw)
    if m is not None and (m.group(1) is None or m.group(1) == m.group(2)):
        # Formatted like a phone but not a valid North American number (an exchange or area
        # code starting with 0/1, a fictional or mistyped number): PII detection errs toward
        # recall, so report it, at the default `min_score` (0.5) and below every checked shape.
        return 0.5
    if raw.startswith("00") and 10 <= n <= 15 and digits[2] != "0" and raw != digits:
        return 0.7
    if 10 <= n <= 11 and _EU_LOCAL.fullmatch(raw) and digits[1] != "0":
        return 0.6
    return 0.0


def _classify(raw: str, text: str, start: int) -> tuple[str, float] | None:
    digits = _NON_DIGIT.sub("", raw)
    if len(digits) < 7 or _LONE_LAST_DIGIT.search(raw):
        return None  # too short, or "... 2671 2": a separate number follows
    if raw[0] != "+":
        score = _ssn(raw, digits, text, start)
        if score:
            return "us_ssn", score
        score = _card(raw, digits)
        if score:
            return "credit_card", score
    score = _phone(raw, digits)
    if score:
        return "phone", score
    return None


def _redact_number(kind: str, digits: str) -> str:
    if kind == "credit_card":
        return f"credit_card ****{digits[-4:]}"
    if kind == "us_ssn":
        return "us_ssn ***-**-**" + digits[-2:]
    return f"phone {mask_tail(digits, 2)}"


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _numbers(text: str, wanted: frozenset[str], out: list[Finding]) -> None:
    for m in _NUMBER_RUN.finditer(text):
        raw = m.group()
        if len(raw) < 7:  # fewer than 7 digits: nothing to classify
            continue
        start, end = m.span()
        if raw[0] == "(" and ")" not in raw:  # "(2023 ..." : the parenthesis belongs to prose
            raw = raw[1:]
            start += 1
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        # Part of something longer: a word, an identifier, a decimal, a version, a path, a hash.
        if _is_word_char(before) or _is_word_char(after) or after in "/:":
            continue
        if before in ".-/" and raw[0] != "+":
            continue
        hit = _classify(raw, text, start)
        if hit is None and (" " in raw or "\u00a0" in raw):
            _split_tokens(text, raw, start, wanted, out)
            continue
        if hit is not None and hit[0] in wanted:
            kind, score = hit
            out.append(Finding(kind, start, end, score, _redact_number(kind, _NON_DIGIT.sub("", raw))))


def _split_tokens(text: str, raw: str, start: int, wanted: frozenset[str], out: list[Finding]) -> None:
    """A run that is no PII as a whole may hold PII between spaces: "order 12345 4111 1111 1111 1111".

    Sub-runs start and end on a token of at least two digits (or a "+"/"(" start) and hold
    7 to 19 digits; everything else is skipped without classifying it.
    """
    tokens = [(t.start(), t.end(), len(_NON_DIGIT.sub("", t.group())), t.group()[0]) for t in _TOKEN.finditer(raw)]
    i = 0
    while i < len(tokens):
        if tokens[i][2] < 2 and tokens[i][3] not in "+(":
            i += 1
            continue
        found = False
        for j in range(len(tokens), i, -1):
            if (i == 0 and j == len(tokens)) or tokens[j - 1][2] < 2:
                continue
            digits = sum(t[2] for t in tokens[i:j])
            if not 7 <= digits <= 19:
                continue
            s, e = tokens[i][0], tokens[j - 1][1]
            hit = _classify(raw[s:e], text, start + s)
            if hit is not None:
                if hit[0] in wanted:
                    kind, score = hit
                    redacted = _redact_number(kind, _NON_DIGIT.sub("", raw[s:e]))
                    out.append(Finding(kind, start + s, start + e, score, redacted))
                i = j
                found = True
                break
        if not found:
            i += 1


# --- email ----------------------------------------------------------------------------------

_EMAIL_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.!#$%&'*+/=?^_`{|}~-")
_EMAIL_DOMAIN = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?){0,8}"
)
_TLD = re.compile(r"[A-Za-z]{2,24}|xn--[a-z0-9\-]{1,59}")


def _emails(text: str, out: list[Finding]) -> None:
    at = text.find("@")
    while at != -1:
        i = at
        while i > 0 and at - i < 64 and text[i - 1] in _EMAIL_LOCAL_CHARS:
            i -= 1
        while i < at and text[i] in ".'`{|}":  # punctuation that opens prose, not an address
            i += 1
        m = _EMAIL_DOMAIN.match(text, at + 1)
        if i < at and m is not None and "." in m.group():
            domain = m.group()
            tld = domain.rsplit(".", 1)[1]
            local = text[i:at]
            if _TLD.fullmatch(tld) and not local.endswith(".") and ".." not in local:
                out.append(Finding("email", i, m.end(), 0.95, f"email {local[0]}***@{domain}"))
                at = text.find("@", m.end())
                continue
        at = text.find("@", at + 1)


# --- IBAN -----------------------------------------------------------------------------------

IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
    "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip
_IBAN = re.compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?")


def iban_valid(iban: str) -> bool:
    """ISO 13616 check: known country, its exact length, and the mod-97 remainder of 1."""
    iban = iban.replace(" ", "").upper()
    if IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban.isalnum():
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _ibans(text: str, out: list[Finding]) -> None:
    for m in _IBAN.finditer(text):
        start = m.start()
        if start and _is_word_char(text[start - 1]):
            continue
        raw = m.group()
        length = IBAN_LENGTHS.get(raw[:2])
        if length is None:
            continue
        # Take exactly the country's length of characters; the regex may have run on into a word.
        taken = 0
        end = start
        for ch in raw:
            end += 1
            if ch != " ":
                taken += 1
                if taken == length:
                    break
        if taken != length or (end < len(text) and _is_word_char(text[end])):
            continue
        compact = text[start:end].replace(" ", "")
        if iban_valid(compact):
            out.append(Finding("iban", start, end, 0.98, f"iban {compact[:2]}** ****{compact[-4:]}"))


# --- passport numbers next to a "passport number" phrase ------------------------------------

_PASSPORT = re.compile(
    r"(?i:reisepass(?:nummer|[ \-]?nr)?|passnummer|pass[ \-]?nr|passports?|passeports?|pasaportes?"
    r"|passaport[eo]s?|paspoort|paszport|паспорт[а-я]{0,2})"
    r"[\s:#.\-–'’°º]{0,4}"
    r"(?:(?i:number|num|no|nr|nummer|numéro|numero|número|nº|n°|n|id|is|of|de|du|del|do|da|№)"
    r"[\s:#.\-°º]{1,4}){0,3}"
    r"(?P<num>[A-Za-z0-9]{6,9})(?![\w\-])"
)


def _passports(text: str, out: list[Finding]) -> None:
    # Not `finditer`: a rejected candidate must not hide an overlapping one. In "my passport,
    # passport number X1234567" the first "passport" takes the second as its number (no
    # digits, rejected); the search then resumes one character after the rejected match's
    # start, not after its end. A match is at most ~60 characters long, so this stays linear.
    pos = 0
    while True:
        m = _PASSPORT.search(text, pos)
        if m is None:
            return
        start = m.start()
        num = m.group("num")
        inside_word = start and _is_word_char(text[start - 1])
        if inside_word and not text[start - 4 : start].lower().endswith("eise"):
            pos = start + 1
            continue
        if sum(ch.isdigit() for ch in num) < 5:
            pos = start + 1
            continue
        out.append(Finding("passport", m.start("num"), m.end("num"), 0.8, f"passport {mask_tail(num, 2)}"))
        pos = m.end()


_NUMBER_KINDS = frozenset({"phone", "credit_card", "us_ssn"})


def find_pii(text: str, kinds: Collection[str] | None = None) -> list[Finding]:
    """Personal data in `text`, sorted by offset; `kinds` limits the search (all of PII_KINDS by default)."""
    wanted = check_kinds(kinds, PII_KINDS, "PII kind")
    out: list[Finding] = []
    if "email" in wanted and "@" in text:
        _emails(text, out)
    if not wanted.isdisjoint(_NUMBER_KINDS):
        _numbers(text, wanted, out)
    if "iban" in wanted:
        _ibans(text, out)
    if "passport" in wanted:
        low = text.lower()
        if "pas" in low or "паспорт" in low:
            _passports(text, out)
    if len(out) > 1:
        out.sort(key=lambda f: (f.start, -f.end))
        # Overlaps across families (an IBAN's digits as a phone...): keep the first, longest.
        deduped: list[Finding] = []
        for f in out:
            if deduped and f.start < deduped[-1].end:
                continue
            deduped.append(f)
        out = deduped
    return out
