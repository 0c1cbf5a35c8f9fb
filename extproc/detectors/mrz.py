"""Machine-readable zones (ICAO Doc 9303) in OCR text: TD1, TD2 and TD3, check digits verified.

OCR reads an MRZ well except for the glyphs OCR-B makes look alike (O/0, I/1, S/5, B/8,
plus a few rarer ones). Every numeric field of an MRZ is protected by a check digit, so a
read is repaired field by field: numeric-only fields take the digit reading of each
confusable glyph, alphabetic fields the letter reading, and alphanumeric fields (document
and personal numbers) try the confusable alternatives until the field's check digit
agrees. A repair never changes a digit into another digit, so a tampered field (a changed
date, a forged check digit) stays invalid.

`find_mrz(text)` returns every MRZ-shaped block it finds, valid or not; `MrzResult.valid`
says whether all its check digits agree after repair. Nothing here logs: `redacted()` is
the only form of a result that is safe to show.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

MrzFormat = Literal["TD1", "TD2", "TD3"]

LINE_LENGTHS: dict[MrzFormat, tuple[int, int]] = {"TD1": (3, 30), "TD2": (2, 36), "TD3": (2, 44)}

# OCR confusions between letters and digits in OCR-B.
_TO_DIGIT = {"O": "0", "Q": "0", "D": "0", "I": "1", "L": "1", "Z": "2", "S": "5", "B": "8", "G": "6"}
_TO_LETTER = {"0": "O", "1": "I", "2": "Z", "5": "S", "8": "B", "6": "G"}
# Alphanumeric fields try only the four classic swaps (both ways); the others are too
# ambiguous to guess without a check digit telling us which reading is right.
_ALNUM_SWAPS = {"O": "0", "0": "O", "I": "1", "1": "I", "S": "5", "5": "S", "B": "8", "8": "B"}
_MAX_ALNUM_AMBIGUOUS = 10  # confusable positions considered per field
_MAX_ALNUM_SWAPS = 1  # swaps per field; more would let chance satisfy the check digit

_WEIGHTS = (7, 3, 1)
_MRZ_CHARS = re.compile(r"^[A-Z0-9<]+$")


def char_value(ch: str) -> int:
    """The ICAO 9303 value of one MRZ character: digits as is, A=10..Z=35, '<' = 0."""
    if ch.isdigit():
        return ord(ch) - ord("0")
    if "A" <= ch <= "Z":
        return ord(ch) - ord("A") + 10
    if ch == "<":
        return 0
    raise ValueError(f"{ch!r} is not an MRZ character")


def check_digit(data: str) -> str:
    """The check digit of `data` (weights 7, 3, 1 repeating, sum modulo 10)."""
    return str(sum(char_value(c) * _WEIGHTS[i % 3] for i, c in enumerate(data)) % 10)


@dataclass(frozen=True, slots=True)
class MrzResult:
    format: MrzFormat
    lines: tuple[str, ...]  # after normalisation and repair
    document_code: str  # "P<", "I<", "ID", "V<", ...
    issuing_state: str
    document_number: str
    nationality: str
    birth_date: str  # YYMMDD as printed
    sex: str
    expiry_date: str
    surname: str
    given_names: str
    optional_data: str
    checks: dict[str, bool] = field(default_factory=dict)  # field -> check digit agrees
    repairs: int = 0  # characters changed to make the read consistent

    @property
    def valid(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    @property
    def kind(self) -> str:
        """A coarse document kind from the document code: passport, visa, id_card or other."""
        first = self.document_code[:1]
        return {"P": "passport", "V": "visa", "I": "id_card", "A": "id_card", "C": "id_card"}.get(first, "other")

    def redacted(self) -> str:
        """A log-safe summary: format, kind, issuing state and check status, no personal data."""
        failed = [name for name, ok in self.checks.items() if not ok]
        status = "valid" if self.valid else "invalid(" + ",".join(failed) + ")"
        return f"{self.format} {self.kind} state={self.issuing_state} {status} repairs={self.repairs}"


# --------------------------------------------------------------------------- normalisation


def normalize_line(line: str) -> str:
    """Uppercase, drop spaces, and map OCR's renderings of '<' (guillemets, brackets) back."""
    s = line.upper().replace("«", "<<").replace("‹", "<").replace("〈", "<").replace("＜", "<")
    s = s.replace("(", "<").replace("[", "<").replace("{", "<")
    s = re.sub(r"\s+", "", s)
    return s


def _looks_mrz(line: str) -> bool:
    return len(line) >= 28 and bool(_MRZ_CHARS.match(line)) and "<" in line


def _fit(line: str, length: int) -> list[str]:
    """Candidate readings of `line` at exactly `length` characters.

    OCR miscounts long runs of fillers; the only length fix tried is growing or shrinking
    '<' runs (the trailing run first), never touching other characters.
    """
    if len(line) == length:
        return [line]
    diff = length - len(line)
    if abs(diff) > 3:
        return []
    runs = [(m.start(), m.end()) for m in re.finditer(r"<+", line)]
    out: list[str] = []
    for start, end in reversed(runs):
        if diff < 0 and end - start <= -diff:
            continue
        new = line[:start] + "<" * (end - start + diff) + line[end:]
        if new not in out:
            out.append(new)
    return out


# --------------------------------------------------------------------------- field repair


def _digits(s: str) -> tuple[str, int]:
    out = "".join(_TO_DIGIT.get(c, c) for c in s)
    return out, sum(a != b for a, b in zip(out, s, strict=True))


def _letters(s: str) -> tuple[str, int]:
    out = "".join(_TO_LETTER.get(c, c) for c in s)
    return out, sum(a != b for a, b in zip(out, s, strict=True))


def _check_char(c: str) -> tuple[str, int]:
    d, n = _digits(c)
    if d == "<":  # a filler check digit is allowed for empty optional fields
        return d, 0
    return d, n


def _alnum_candidates(value: str) -> Iterator[tuple[str, int]]:
    """Readings of an alphanumeric field, fewest swaps first."""
    ambiguous = [i for i, c in enumerate(value) if c in _ALNUM_SWAPS][:_MAX_ALNUM_AMBIGUOUS]
    for k in range(min(len(ambiguous), _MAX_ALNUM_SWAPS) + 1):
        for combo in itertools.combinations(ambiguous, k):
            chars = list(value)
            for i in combo:
                chars[i] = _ALNUM_SWAPS[chars[i]]
            yield "".join(chars), k


def _verify(data: str, check: str) -> bool:
    if check == "<":
        return set(data) <= {"<"}
    return check.isdigit() and check_digit(data) == check


def _repair_numeric(value: str, check: str) -> tuple[str, str, bool, int]:
    v, n1 = _digits(value)
    c, n2 = _check_char(check)
    return v, c, _verify(v, c), n1 + n2


def _alnum_readings(value: str, check: str) -> list[tuple[str, str, bool, int]]:
    """Readings of an alphanumeric field with its check digit, those that verify first.

    The printed reading comes first when it verifies; otherwise every reading with at most
    `_MAX_ALNUM_SWAPS` confusable swaps that verifies, fewest swaps first; the unrepaired
    reading (marked failed) closes the list. A check digit passes a wrong guess one time in
    ten, and the composite digit cannot help (ICAO aligns each field's weights inside it),
    so a repaired alphanumeric field is a likely reading, not a proven one: results count
    their repairs, and numeric fields (dates, check digits) are never guessed this way.
    """
    c, n = _check_char(check)
    if _verify(value, c):
        return [(value, c, True, n)]
    out = [(cand, c, True, n + k) for cand, k in _alnum_candidates(value) if k and _verify(cand, c)]
    out.append((value, c, False, n))
    return out


def _split_name(field_: str) -> tuple[str, str]:
    letters, _ = _letters(field_)
    surname, _, given = letters.partition("<<")
    return surname.replace("<", " ").strip(), given.replace("<", " ").strip()


# --------------------------------------------------------------------------- formats


def _composite(checks: dict[str, bool], data: str, raw: str, repairs: int, *, required: bool) -> tuple[str, int]:
    """Verify the composite check digit over `data`; visas (MRV) carry none."""
    if not required:
        return raw, repairs
    comp, n = _check_char(raw)
    checks["composite"] = _verify(data, comp)
    return comp, repairs + n


def _parse_td3(l1: str, l2: str) -> list[MrzResult]:
    doc_code, r0 = _letters(l1[0:2])
    state, r1 = _letters(l1[2:5])
    surname, given = _split_name(l1[5:44])
    nationality, r3 = _letters(l2[10:13])
    dob, dob_chk, ok_dob, r4 = _repair_numeric(l2[13:19], l2[19])
    sex = {"0": "O"}.get(l2[20], l2[20])
    exp, exp_chk, ok_exp, r5 = _repair_numeric(l2[21:27], l2[27])
    out: list[MrzResult] = []
    for number, n_chk, ok_num, r2 in _alnum_readings(l2[0:9], l2[9]):
        for personal, p_chk, ok_p, r6 in _alnum_readings(l2[28:42], l2[42]):
            checks = {"document_number": ok_num, "birth_date": ok_dob, "expiry_date": ok_exp, "personal_number": ok_p}
            body = number + n_chk + nationality + dob + dob_chk + sex + exp + exp_chk + personal + p_chk
            composite_data = number + n_chk + dob + dob_chk + exp + exp_chk + personal + p_chk
            comp, repairs = _composite(
                checks, composite_data, l2[43], r0 + r1 + r2 + r3 + r4 + r5 + r6, required=not doc_code.startswith("V")
            )
            out.append(MrzResult(
                "TD3", (doc_code + state + l1[5:44], body + comp), doc_code, state, number.rstrip("<"), nationality,
                dob, sex, exp, surname, given, personal.rstrip("<"), checks, repairs,
            ))  # fmt: skip
    return out


def _parse_td2(l1: str, l2: str) -> list[MrzResult]:
    doc_code, r0 = _letters(l1[0:2])
    state, r1 = _letters(l1[2:5])
    surname, given = _split_name(l1[5:36])
    nationality, r3 = _letters(l2[10:13])
    dob, dob_chk, ok_dob, r4 = _repair_numeric(l2[13:19], l2[19])
    sex = {"0": "O"}.get(l2[20], l2[20])
    exp, exp_chk, ok_exp, r5 = _repair_numeric(l2[21:27], l2[27])
    optional = l2[28:35]
    out: list[MrzResult] = []
    for number, n_chk, ok_num, r2 in _alnum_readings(l2[0:9], l2[9]):
        checks = {"document_number": ok_num, "birth_date": ok_dob, "expiry_date": ok_exp}
        body = number + n_chk + nationality + dob + dob_chk + sex + exp + exp_chk + optional
        composite_data = number + n_chk + dob + dob_chk + exp + exp_chk + optional
        comp, repairs = _composite(
            checks, composite_data, l2[35], r0 + r1 + r2 + r3 + r4 + r5, required=not doc_code.startswith("V")
        )
        out.append(MrzResult(
            "TD2", (doc_code + state + l1[5:36], body + comp), doc_code, state, number.rstrip("<"), nationality,
            dob, sex, exp, surname, given, optional.strip("<"), checks, repairs,
        ))  # fmt: skip
    return out


def _parse_td1(l1: str, l2: str, l3: str) -> list[MrzResult]:
    doc_code, r0 = _letters(l1[0:2])
    state, r1 = _letters(l1[2:5])
    optional1 = l1[15:30]
    dob, dob_chk, ok_dob, r3 = _repair_numeric(l2[0:6], l2[6])
    sex = {"0": "O"}.get(l2[7], l2[7])
    exp, exp_chk, ok_exp, r4 = _repair_numeric(l2[8:14], l2[14])
    nationality, r5 = _letters(l2[15:18])
    optional2 = l2[18:29]
    surname, given = _split_name(l3)
    out: list[MrzResult] = []
    for number, n_chk, ok_num, r2 in _alnum_readings(l1[5:14], l1[14]):
        checks = {"document_number": ok_num, "birth_date": ok_dob, "expiry_date": ok_exp}
        line1 = doc_code + state + number + n_chk + optional1
        composite_data = line1[5:30] + dob + dob_chk + exp + exp_chk + optional2
        comp, repairs = _composite(checks, composite_data, l2[29], r0 + r1 + r2 + r3 + r4 + r5, required=True)
        line2 = dob + dob_chk + sex + exp + exp_chk + nationality + optional2 + comp
        out.append(MrzResult(
            "TD1", (line1, line2, l3), doc_code, state, number.rstrip("<"), nationality, dob, sex, exp, surname,
            given, (optional1 + optional2).strip("<"), checks, repairs,
        ))  # fmt: skip
    return out


def _best(results: Sequence[MrzResult]) -> MrzResult | None:
    if not results:
        return None
    # A fully valid reading wins, fewest repairs first; among invalid ones the unrepaired
    # reading is reported, so a failed check is never hidden behind a guessed repair.
    valid = [r for r in results if r.valid]
    if valid:
        return min(valid, key=lambda r: r.repairs)
    return min(results, key=lambda r: (r.repairs, -sum(r.checks.values())))


def _try_block(fmt: MrzFormat, lines: Sequence[str]) -> MrzResult | None:
    _, length = LINE_LENGTHS[fmt]
    fitted = [_fit(line, length) for line in lines]
    if any(not f for f in fitted):
        return None
    parsed: list[MrzResult] = []
    for combo in itertools.product(*fitted):
        if fmt == "TD3":
            parsed += _parse_td3(combo[0], combo[1])
        elif fmt == "TD2":
            parsed += _parse_td2(combo[0], combo[1])
        else:
            parsed += _parse_td1(combo[0], combo[1], combo[2])
    return _best(parsed)


def find_mrz(text: str) -> list[MrzResult]:
    """Every MRZ block in `text` (one MRZ line per text line), best reading of each."""
    lines = [normalize_line(raw) for raw in text.splitlines()]
    found: list[MrzResult] = []
    i = 0
    while i < len(lines):
        if not _looks_mrz(lines[i]):
            i += 1
            continue
        result: MrzResult | None = None
        used = 1
        # Try the layouts whose line count fits, longest lines first.
        for fmt in ("TD3", "TD2", "TD1"):
            count, length = LINE_LENGTHS[fmt]
            block = lines[i : i + count]
            if len(block) < count or not all(_looks_mrz(b) for b in block):
                continue
            if any(abs(len(b) - length) > 3 for b in block):
                continue
            candidate = _try_block(fmt, block)
            if candidate is not None and (result is None or _best([result, candidate]) is candidate):
                result, used = candidate, count
        if result is not None:
            found.append(result)
            i += used
        else:
            i += 1
    return found
