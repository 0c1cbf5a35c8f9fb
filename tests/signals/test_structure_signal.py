"""Structure signal: code fences, tools, turns, labels, roles, validation."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from extproc.protocol.request import ApiKind, Role, RoutingRequest, TextSegment
from extproc.signals.structure import StructureSignal, StructureSpec, count_code_blocks

CODE = "Fix this:\n```python\nprint('hi')\n```\nand this:\n~~~\nls -la\n~~~\n"


def req(*parts: tuple[Role, str], tools: list[str] | None = None, calls: int = 0, turns: int = 1) -> RoutingRequest:
    texts = [TextSegment(role=role, text=text, message_index=i) for i, (role, text) in enumerate(parts)]
    return RoutingRequest(
        api=ApiKind.CHAT,
        model="auto",
        stream=False,
        texts=texts,
        tools=tools or [],
        tool_call_count=calls,
        turn_count=turns,
    )


def signal(**kw: Any) -> StructureSignal:
    return StructureSignal(StructureSpec(type="structure", name="st", **kw))


def test_count_code_blocks() -> None:
    assert count_code_blocks(CODE) == 2
    assert count_code_blocks("no code, just `inline` ticks") == 0
    assert count_code_blocks("```\nunclosed block") == 1
    assert count_code_blocks("text ``` in the middle of a line") == 0
    assert count_code_blocks("    ```\nindented four: a code line, not a fence") == 0


def test_code_blocks_min() -> None:
    assert signal(code_blocks_min=2).compute(req((Role.USER, CODE))).matched
    assert not signal(code_blocks_min=3).compute(req((Role.USER, CODE))).matched


def test_labels_always_present() -> None:
    ev = signal(turns_min=1).compute(req((Role.USER, "hello")))
    assert ev.labels == {"code_block": 0.0, "tools": 0.0, "multi_turn": 0.0}
    ev = signal(turns_min=1).compute(req((Role.USER, CODE), tools=["get_weather"], turns=3))
    assert ev.labels == {"code_block": 1.0, "tools": 1.0, "multi_turn": 1.0}
    assert signal(turns_min=1).known_labels() == frozenset({"code_block", "tools", "multi_turn"})


def test_tools_condition() -> None:
    assert signal(tools=True).compute(req((Role.USER, "x"), tools=["f"])).matched
    assert signal(tools=True).compute(req((Role.USER, "x"), calls=1)).matched
    assert not signal(tools=True).compute(req((Role.USER, "x"))).matched
    assert signal(tools=False).compute(req((Role.USER, "x"))).matched


def test_all_conditions_must_hold_and_score_is_fraction() -> None:
    s = signal(code_blocks_min=1, tools=True, turns_min=2)
    ev = s.compute(req((Role.USER, CODE), tools=["f"], turns=1))
    assert not ev.matched and ev.score == pytest.approx(2 / 3)
    assert s.compute(req((Role.USER, CODE), tools=["f"], turns=2)).matched


def test_roles_for_code_blocks() -> None:
    r = req((Role.ASSISTANT, CODE), (Role.USER, "thanks"))
    assert not signal(code_blocks_min=1).compute(r).matched
    assert signal(code_blocks_min=1, roles=["assistant"]).compute(r).matched


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({}, "at least one"), ({"code_blocks_min": 0}, "code_blocks_min"), ({"turns_min": 0}, "turns_min")],
)
def test_spec_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        StructureSpec(type="structure", name="st", **kwargs)
