"""The `reask` signal: the last user turn repeats the user turns before it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from extproc.protocol.request import ApiKind, Role, RoutingRequest, TextSegment
from extproc.signals.reask import ReaskSignal, ReaskSpec, overlap, turn_units


def chat(*turns: tuple[Role, str]) -> RoutingRequest:
    segments = [TextSegment(role, text, i) for i, (role, text) in enumerate(turns)]
    return RoutingRequest(api=ApiKind.CHAT, model="auto", stream=False, texts=segments, tools=[])


def reask(lookback: int = 1, threshold: float = 0.8) -> ReaskSignal:
    return ReaskSignal(ReaskSpec(type="reask", name="r", lookback_turns=lookback, threshold=threshold))


U, A = Role.USER, Role.ASSISTANT


def test_a_question_asked_again_with_a_complaint_in_front_is_a_reask() -> None:
    request = chat(
        (U, "Explain inflation vs recession."), (A, "Prices rise."), (U, "Still wrong. Explain inflation vs recession.")
    )
    ev = reask().compute(request)
    assert ev.matched and ev.score == pytest.approx(1.0)
    assert "least 1.00 >= 0.8: yes" in ev.evidence[0]


def test_a_new_question_on_the_same_topic_is_not() -> None:
    request = chat(
        (U, "Explain inflation vs recession."), (A, "..."), (U, "What causes deflation in a small open economy?")
    )
    ev = reask().compute(request)
    assert not ev.matched and ev.score < 0.5


def test_every_turn_of_the_lookback_must_repeat() -> None:
    repeated = chat(
        (U, "请问如何证明勾股定理？"),
        (A, "..."),
        (U, "请问如何证明勾股定理？"),
        (A, "..."),
        (U, "请问如何证明勾股定理？"),
    )
    assert reask(lookback=2).compute(repeated).matched  # CJK characters are the units
    once = chat(
        (U, "Tell me a joke about cats."), (A, "..."), (U, "How do I fix this?"), (A, "..."), (U, "How do I fix this?")
    )
    assert reask(lookback=1).compute(once).matched
    assert not reask(lookback=2).compute(once).matched


def test_a_first_question_is_not_a_reask() -> None:
    ev = reask().compute(chat((U, "Explain inflation.")))
    assert not ev.matched and "fewer than 2" in ev.evidence[0]
    # assistant turns are not user turns
    assert not reask().compute(chat((A, "Explain inflation."), (U, "Explain inflation."))).matched


def test_overlap_and_units() -> None:
    assert turn_units("Hello, WORLD! 你好") == {"hello", "world", "你", "好"}
    assert overlap(frozenset(), frozenset({"a"})) == 0.0
    assert overlap(frozenset({"a", "b"}), frozenset({"a", "b", "c", "d"})) == 1.0
    with pytest.raises(ValidationError):
        ReaskSpec(type="reask", name="r", lookback_turns=0)
