"""StemFilter: a word starting with a stem admits a text; phrases and unspaced-script stems are
found anywhere; everything else is turned away (so the patterns behind it never run)."""

from __future__ import annotations

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
