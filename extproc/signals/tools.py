"""Tools signal: what an agent's request (or answer) does with tools.

Every criterion given must hold (they combine with AND); names are shell-style globs matched
case-insensitively:

- `offered`: a tool offered in `tools` matches one of the globs;
- `called`: a tool call in the conversation (or, evaluated on an upstream answer or an MCP
  `tools/call`, the call being judged) has a matching name;
- `tool_choice`: the request's `tool_choice` (none / auto / required, or the forced name) matches;
- `min_offered` / `min_calls`: at least that many tools offered / calls made;
- `store`: the Responses API's `store: true` (the exchange is kept: a memory write).

Labels: `offered` and `called` (1.0 when that criterion's globs matched), `store`.
"""

from __future__ import annotations

import fnmatch
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, SignalSpecBase


class ToolsSpec(SignalSpecBase):
    type: Literal["tools"]
    offered: list[str] = Field(default_factory=list)
    called: list[str] = Field(default_factory=list)
    tool_choice: list[str] = Field(default_factory=list)
    min_offered: int | None = Field(default=None, ge=1)
    min_calls: int | None = Field(default=None, ge=1)
    store: bool | None = None

    @model_validator(mode="after")
    def _some_criterion(self) -> ToolsSpec:
        criteria = (self.offered, self.called, self.tool_choice, self.min_offered, self.min_calls)
        if not any(criteria) and self.store is None:
            raise ValueError("a tools signal needs one of: offered, called, tool_choice, min_offered, min_calls, store")
        return self


def _matching(names: list[str], globs: list[str]) -> list[str]:
    return [n for n in names if any(fnmatch.fnmatchcase(n.lower(), g.lower()) for g in globs)]


class ToolsSignal(Signal):
    spec: ToolsSpec
    inline = True
    reads: ClassVar[frozenset[str]] = frozenset({"tools"})

    def known_labels(self) -> frozenset[str]:
        return frozenset({"offered", "called", "store"})

    def compute(self, request: RoutingRequest) -> Evaluation:
        spec = self.spec
        checks: list[bool] = []
        evidence: list[str] = []
        labels: dict[str, float] = {}
        for label, names, globs in (
            ("offered", request.tools, spec.offered),
            ("called", request.tool_call_names, spec.called),
        ):
            if globs:
                found = _matching(names, globs)
                checks.append(bool(found))
                labels[label] = 1.0 if found else 0.0
                if found:
                    evidence.append(f"{label}: " + ", ".join(found[:5]))
        if spec.tool_choice:
            choice = request.tool_choice
            checks.append(choice is not None and bool(_matching([choice], spec.tool_choice)))
        if spec.min_offered is not None:
            checks.append(len(request.tools) >= spec.min_offered)
        if spec.min_calls is not None:
            checks.append(request.tool_call_count >= spec.min_calls)
        if spec.store is not None:
            checks.append(request.stores == spec.store)
            labels["store"] = 1.0 if request.stores else 0.0
            if request.stores:
                evidence.append("store: true")
        matched = all(checks)
        return Evaluation(matched=matched, score=1.0 if matched else 0.0, labels=labels, evidence=tuple(evidence))
