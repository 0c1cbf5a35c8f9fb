"""Context-size signal: the request's estimated prompt tokens (`RoutingRequest.estimated_tokens`)
against a range."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, SignalSpecBase


class ContextSpec(SignalSpecBase):
    type: Literal["context"]
    min_tokens: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _check_bounds(self) -> ContextSpec:
        if self.min_tokens is None and self.max_tokens is None:
            raise ValueError("set min_tokens, max_tokens or both")
        if self.min_tokens is not None and self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) is greater than max_tokens ({self.max_tokens})")
        return self


class ContextSignal(Signal):
    """Matches when the estimated prompt size lies in [min_tokens, max_tokens] (inclusive)."""

    spec: ContextSpec

    inline = True

    def compute(self, request: RoutingRequest) -> Evaluation:
        tokens = request.estimated_tokens()
        lo, hi = self.spec.min_tokens, self.spec.max_tokens
        matched = (lo is None or tokens >= lo) and (hi is None or tokens <= hi)
        bounds = f"[{'-' if lo is None else lo}, {'-' if hi is None else hi}]"
        return Evaluation(
            matched=matched,
            score=1.0 if matched else 0.0,
            evidence=(f"~{tokens} tokens (estimated) {'in' if matched else 'outside'} {bounds}",),
        )
