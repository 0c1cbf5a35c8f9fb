"""Context signal and the token estimator."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from extproc.protocol.request import ApiKind, Role, RoutingRequest, TextSegment
from extproc.signals.context import ContextSignal, ContextSpec


def req(*parts: tuple[Role, str]) -> RoutingRequest:
    texts = [TextSegment(role=role, text=text, message_index=i) for i, (role, text) in enumerate(parts)]
    return RoutingRequest(api=ApiKind.CHAT, model="auto", stream=False, texts=texts, turn_count=1)


def signal(**kw: Any) -> ContextSignal:
    return ContextSignal(ContextSpec(type="context", name="ctx", **kw))


def test_estimate_counts_every_role() -> None:
    r = req((Role.SYSTEM, "a" * 400), (Role.USER, "b" * 400), (Role.TOOL, "c" * 400), (Role.ASSISTANT, "d" * 400))
    assert r.estimated_tokens() == 1600 // 4 + 4 * 4


def test_estimate_segments_of_one_message_share_overhead() -> None:
    texts = [TextSegment(Role.USER, "x" * 40, 0), TextSegment(Role.USER, "y" * 40, 0, source="tool_result")]
    r = RoutingRequest(api=ApiKind.CHAT, model=None, stream=False, texts=texts)
    assert r.estimated_tokens() == 20 + 4


def test_estimate_rounds_up_and_handles_empty() -> None:
    assert req().estimated_tokens() == 0
    assert req((Role.USER, "hi")).estimated_tokens() == 1 + 4


def test_estimate_uses_utf8_bytes() -> None:
    # 3-byte CJK characters count 0.75 tokens each; 2-byte Cyrillic 0.5.
    assert req((Role.USER, "漢" * 400)).estimated_tokens() == 300 + 4
    assert req((Role.USER, "ж" * 400)).estimated_tokens() == 200 + 4


def test_bounds() -> None:
    r = req((Role.USER, "x" * 4000))  # 1000 + 4 tokens
    assert signal(min_tokens=1000).compute(r).matched
    assert not signal(min_tokens=2000).compute(r).matched
    assert signal(max_tokens=1004).compute(r).matched
    assert not signal(max_tokens=1003).compute(r).matched
    ev = signal(min_tokens=10, max_tokens=2000).compute(r)
    assert ev.matched and ev.score == 1.0 and "1004" in ev.evidence[0]


def test_reads_system_text_too() -> None:
    r = req((Role.SYSTEM, "s" * 8000), (Role.USER, "short"))
    assert signal(min_tokens=2000).compute(r).matched


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "min_tokens, max_tokens or both"),
        ({"min_tokens": 10, "max_tokens": 5}, "greater than"),
        ({"min_tokens": -1}, "min_tokens"),
    ],
)
def test_spec_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ContextSpec(type="context", name="ctx", **kwargs)
