"""Context-size signal and the token estimator the engine uses for context-window filtering.

The estimator is deliberately cheap and tokenizer-free: ceil(UTF-8 bytes / 4) over every
text segment of every role, plus 4 tokens of chat-format overhead per message. Four bytes
is about one token for English with BPE vocabularies (about 4 characters); a CJK character
takes 3 UTF-8 bytes, so it counts 0.75 tokens, and 2-byte scripts (Cyrillic, Greek) 0.5,
which tracks real tokenizers far better than characters / 4. Images are not counted: their
token cost depends on the serving model's vision encoder, not on the request text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, SignalSpecBase

BYTES_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4


def estimate_tokens(request: RoutingRequest) -> int:
    """A tokenizer-free estimate of the request's prompt tokens, over all roles' text."""
    size = 0
    messages: set[int] = set()
    for segment in request.texts:
        text = segment.text
        size += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        messages.add(segment.message_index)
    return -(-size // BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)


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

    inline = True

    def __init__(self, spec: ContextSpec) -> None:
        super().__init__(spec)
        self.cspec = spec

    def compute(self, request: RoutingRequest) -> Evaluation:
        tokens = estimate_tokens(request)
        lo, hi = self.cspec.min_tokens, self.cspec.max_tokens
        matched = (lo is None or tokens >= lo) and (hi is None or tokens <= hi)
        bounds = f"[{'-' if lo is None else lo}, {'-' if hi is None else hi}]"
        return Evaluation(
            matched=matched,
            score=1.0 if matched else 0.0,
            evidence=(f"~{tokens} tokens (estimated) {'in' if matched else 'outside'} {bounds}",),
        )
