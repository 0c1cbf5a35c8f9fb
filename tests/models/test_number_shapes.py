"""Non-arithmetic numerals (dates, times, versions, prices, phone numbers, references, ordinals,
list markers) carry no subject and go before stage 1's number placeholder; arithmetic keeps its
numbers (issue 44: meeting notes full of "3/14" read as fractions and routed as maths)."""

from __future__ import annotations

import pytest

from extproc.models.domain_classifier import NUMBER_PLACEHOLDER, neutralise_numbers
from extproc.models.number_shapes import drop_number_shapes


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("mtg 3/14 - marketing sync", "mtg   - marketing sync"),  # a bare month/day
        ("due 2026-12-06, then 14.03.2027", "due  , then  "),
        ("from 3/14/2026 to 3/21/26", "from   to  "),
        ("trip 3/14-3/21", "trip  "),  # a range written without spaces
        ("standup at 14:30, retro 9:05:30", "standup at  , retro  "),
        ("call at 3pm or 10 a.m.", "call at   or  "),
        ("at 9:30am:", "at  :"),
        ("upgrade to v2.3.1 (was v2)", "upgrade to   (was  )"),
        ("python 3.11.4 on 192.168.0.1", "python   on  "),
        ("it costs $45 or €12,50", "it costs $  or € "),
        ("call +1 555 123 4567 or (555) 123-4567", "call   or  "),
        ("see ticket #12, the 3rd row", "see ticket  , the   row"),
        ("trade show june 3-5, booth by May 20th", "trade show  , booth by  "),
        ("on 15 March", "on  "),
        ("1. milk\n2) eggs\n  (3) bread", "  milk\n  eggs\n  bread"),
    ],
)
def test_non_arithmetic_numerals_go(text: str, read: str) -> None:
    assert drop_number_shapes(text) == read
    assert drop_number_shapes(read) == read  # reading twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "what is 2 + 2",
        "17*23?",
        "what's 144 / 12",
        "what is 3/4 + 1/2",  # a fraction beside an operator is arithmetic, not a date
        "3/4 - 1/2 =",
        "x = 12/5",
        "15% of 80",
        "a 3.5 kg block at 10 m/s",  # a decimal is not a version
        "mix them in the ratio 3:2",  # a ratio is not a time (no two-digit minutes)
        "Balance H2SO4 + NaOH",
    ],
)
def test_arithmetic_keeps_its_numbers(text: str) -> None:
    assert drop_number_shapes(text) == text


def test_the_placeholder_no_longer_reads_dates_as_arithmetic() -> None:
    notes = "mtg 3/14 at 14:30: ship v2.3.1 by 2026-12-06, budget $45\n1. call jen\n2. the 3rd draft"
    before = neutralise_numbers(notes, NUMBER_PLACEHOLDER)
    assert "0/0" in before and "0:0" in before and "0.0.0" in before  # what the placeholder read
    after = neutralise_numbers(notes, NUMBER_PLACEHOLDER, drop_shapes=True)
    assert not any(c.isdigit() for c in after), after
    assert after.split() == ["mtg", "at", ":", "ship", "by", ",", "budget", "$", "call", "jen", "the", "draft"]
    # arithmetic reads as it did
    for text in ("what is 2 + 2", "what is 3/4 + 1/2", "17*23?"):
        assert neutralise_numbers(text, NUMBER_PLACEHOLDER, drop_shapes=True) == neutralise_numbers(
            text, NUMBER_PLACEHOLDER
        )
