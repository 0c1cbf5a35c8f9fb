"""Structure signal: fenced code blocks, declared tools / tool calls, multi-turn conversations."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from extproc.detectors.common import join_bounded, truncation_note
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, TextSignalSpec

# A Markdown fence line: ``` or ~~~ (three or more), indented by at most three spaces.
_FENCE = re.compile(r"^ {0,3}(?:`{3,}|~{3,})", re.MULTILINE)
LABELS: tuple[str, ...] = ("code_block", "tools", "multi_turn")


def count_code_blocks(text: str) -> int:
    """Fenced code blocks in `text`; an unclosed last fence still counts as a block."""
    if "```" not in text and "~~~" not in text:
        return 0
    fences = sum(1 for _ in _FENCE.finditer(text))
    return (fences + 1) // 2


class StructureSpec(TextSignalSpec):
    type: Literal["structure"]
    code_blocks_min: int | None = Field(default=None, ge=1)
    tools: bool | None = None  # True: tools declared or tool calls present; False: neither
    turns_min: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check_any(self) -> StructureSpec:
        if self.code_blocks_min is None and self.tools is None and self.turns_min is None:
            raise ValueError("set at least one of code_blocks_min, tools, turns_min")
        return self


class StructureSignal(Signal):
    """Matches when every condition that is set holds; the score is the fraction that hold."""

    spec: StructureSpec

    inline = True

    def known_labels(self) -> frozenset[str]:
        return frozenset(LABELS)

    def compute(self, request: RoutingRequest) -> Evaluation:
        spec = self.spec
        text, total = join_bounded(s.text for s in request.iter_text(spec.roles))
        blocks = count_code_blocks(text)
        has_tools = bool(request.tools) or request.tool_call_count > 0
        checks: list[bool] = []
        if spec.code_blocks_min is not None:
            checks.append(blocks >= spec.code_blocks_min)
        if spec.tools is not None:
            checks.append(has_tools == spec.tools)
        if spec.turns_min is not None:
            checks.append(request.turn_count >= spec.turns_min)
        held = sum(checks)
        return Evaluation(
            matched=held == len(checks),
            score=held / len(checks),
            labels={
                "code_block": 1.0 if blocks else 0.0,
                "tools": 1.0 if has_tools else 0.0,
                "multi_turn": 1.0 if request.turn_count > 1 else 0.0,
            },
            evidence=(
                f"code_blocks={blocks} tools={len(request.tools)} tool_calls={request.tool_call_count} "
                f"turns={request.turn_count}",
                *truncation_note(len(text), total),
            ),
        )
