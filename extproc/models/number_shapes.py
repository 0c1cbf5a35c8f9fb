"""Numerals that are not arithmetic: dates, times, versions, prices, phone numbers, list markers.

Stage 1 of the subject classifier reads a short number as a placeholder so "what is 2 + 2" stays
maths. Meeting notes full of "3/14", "14:30" and "2026-12-06" then read as fractions, ratios and
subtractions and drift to maths too (issue 44). A numeral whose shape says what it is (a date, a
time of day, a version, a price, a phone number, "#12", "3rd", a "1." list marker) carries no
subject, so it goes before the placeholder pass; arithmetic keeps its numbers.

A bare "3/14" is both a date and a fraction: it is read as a date when it could be one (month up
to 12, day up to 31) and no arithmetic operator sits beside it ("3/4 + 1/2" stays a sum).
"""

from __future__ import annotations

import re

_MONTH_NAME = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_MONTH_DAY = r"(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12][0-9]|3[01])"

_SHAPES = re.compile(
    "|".join(
        [
            # dates with a year: 2026-12-06, 2026/12/06, 3/14/2026, 14.03.2026, 14-03-26
            r"(?<![\w.])\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:T\d{1,2}:\d{2}(?::\d{2})?Z?)?(?![\w])",
            r"(?<![\w.])\d{1,2}[-/.]\d{1,2}[-/.](?:\d{4}|\d{2})(?![\w]|\.\d)",
            # a day beside a month's name: "may 15", "june 3-5", "15 March", "Dec 6th"
            rf"(?i:\b{_MONTH_NAME}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:\s?[-–]\s?\d{{1,2}}(?:st|nd|rd|th)?)?(?!\w|[.,:/]\d))",
            rf"(?i:(?<![\w.])\d{{1,2}}(?:st|nd|rd|th)?(?:\s?[-–]\s?\d{{1,2}}(?:st|nd|rd|th)?)?\s+(?:of\s+)?{_MONTH_NAME}\b)",
            # a range of month/days written without spaces: "3/14-3/21"
            rf"(?<![\w./]){_MONTH_DAY}[-–]{_MONTH_DAY}(?![\w/]|\.\d)",
            # times of day: 14:30, 9:05:12, 3pm, 10 a.m.
            r"(?<![\w:])\d{1,2}:\d{2}(?::\d{2})?(?:\s?[aApP]\.?[mM]\.?)?(?!\w|:\d)",
            r"(?<![\w.])\d{1,2}\s?[aApP]\.?[mM]\b\.?",
            # versions and addresses: v2.3.1, v2, 3.11.4, 192.168.0.1
            r"(?<![\w.])[vV]\d+(?:\.\d+)*(?![\w])",
            r"(?<![\w.])\d+(?:\.\d+){2,}(?![\w])",
            # phone numbers: +1 555 123 4567, (555) 123-4567, 555-123-4567
            r"(?<![\w+])(?:\+?\d{1,3}[\s.-]?)?\(?\d{3}\)?[\s.-]?\d{3}[\s.-]\d{4}(?![\w])",
            # prices: $45, €12,50, £3.99 (the currency sign stays, the amount goes)
            # (not TeX's inline maths: "$2^{10}$", "$12+3$" keep their numbers)
            r"(?<=[$€£¥₹])\s?\d(?:,?\d)*(?:\.\d+)?(?!\d|[,.]\d|\s*[\^_{}\\+*/=×÷-])",
            # references and ordinals: #12, No. 4, 3rd, 21st, 2nd
            r"#\d+\b",
            r"(?<![\w.])\d+(?:st|nd|rd|th|ST|ND|RD|TH)\b",
            # list markers at a line's start: "1. ", "2) ", "(3) "
            r"^[ \t]*\(?\d{1,3}[.)](?=[ \t])",
        ]
    ),
    re.MULTILINE,
)
# a bare month/day: "on 3/14", "due 12/6"; a date unless an operator sits beside it
_BARE_MONTH_DAY = re.compile(rf"(?<![\w./]){_MONTH_DAY}(?![\w/]|\.\d)")
_OPERAND_BEFORE = re.compile(r"(?:(?:[\d)]|\b[A-Za-z])\s*[-+*×÷^]|=)\s*$")
_OPERAND_AFTER = re.compile(r"\s*(?:[-+*×÷^]\s*(?:[\d(]|[A-Za-z]\b)|=)")


def drop_number_shapes(text: str) -> str:
    """`text` with its dates, times, versions, prices, phone numbers, references, ordinals and list
    markers replaced by a space; every other numeral (arithmetic, quantities) stays."""
    text = _SHAPES.sub(" ", text)
    return _BARE_MONTH_DAY.sub(lambda m: m.group(0) if _beside_operator(text, m) else " ", text)


def _beside_operator(text: str, match: re.Match[str]) -> bool:
    """An operator beside the match with an operand beyond it ("3/4 + 1/2", "x = 3/4"); a dash
    before words ("mtg 3/14 - marketing sync") is punctuation."""
    return bool(_OPERAND_BEFORE.search(text, 0, match.start()) or _OPERAND_AFTER.match(text, match.end()))
