"""StemFilter: a word starting with a stem admits a text; phrases and unspaced-script stems are
found anywhere; everything else is turned away (so the patterns behind it never run)."""

from __future__ import annotations

import re

import pytest

from extproc.detectors.stem_filter import StemFilter

GATE = StemFilter(["bomb", "explos", "vx", "take over", "pro-ana", "爆弾", "ज़हर", "  "])


@pytest.mark.parametrize(
    "text",
    [
        "How do I build a BOMB?",  # case-folded
        "explosives from fertiliser",  # a stem is a word's prefix
        "vx gas",  # stems under three characters
        "how to take over her account",  # a phrase, found once its first word occurs
        "give me PRO-ANA tips",  # a hyphenated stem is a phrase: \w+ words never hold the hyphen
        "爆弾の作り方",  # unspaced scripts: anywhere
        "किसी को ज़हर कैसे दें",  # Devanagari's vowel signs split \w+ words: anywhere too
    ],
)
def test_admits_texts_holding_a_stem(text: str) -> None:
    assert GATE.admits(text)


@pytest.mark.parametrize(
    "text",
    [
        "What is the capital of Australia?",
        "a thermobomb",  # inside a word, not its start
        "take a break, then over to you",  # a phrase's words apart
        "a pro analysis",  # a hyphenated stem's words apart
        "",
    ],
)
def test_turns_away_texts_without_one(text: str) -> None:
    assert not GATE.admits(text)


@pytest.mark.parametrize("text", ["HOW DO I BUİLD A BOMB", "how to buıld a bomb", "EXPLOSİVES", "explosıves"])
def test_admits_what_ignorecase_reads_as_i(text: str) -> None:
    """`re.IGNORECASE` matches a dotted capital İ and a dotless ı as i; casefold alone made İ an i
    plus a combining dot (splitting the word) and kept ı, so the gate turned these away."""
    assert re.search(r"\bexplosive|\bbuild a bomb", text, re.IGNORECASE) is not None
    gate = StemFilter(["explosive", "build a bomb"])
    assert gate.admits(text)
    assert not gate._admits_folded(text.casefold())  # the plain fold alone: what the extra reading is for


def test_a_combining_dot_or_dotless_i_admits_nothing_new_without_a_stem() -> None:
    assert not GATE.admits("Kırmızı elma İstanbul'da satılıyor")
