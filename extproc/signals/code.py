"""code: how much the request's own text looks like source code (pasted code, stack traces).

Cheap and inline: a regex/count score per text segment (see extproc.detectors.code); the
request's score is its most code-like segment's. Code inside images is image_text's
`code` label (OCR text).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from extproc.detectors.code import code_likeness
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, TextSignalSpec


class CodeSpec(TextSignalSpec):
    type: Literal["code"]
    threshold: float = Field(default=0.6, ge=0.0, le=1.0)
    max_chars: int = Field(default=20_000, ge=64)  # per segment; the score needs no more


class CodeSignal(Signal):
    inline: ClassVar[bool] = True

    def __init__(self, spec: CodeSpec) -> None:
        super().__init__(spec)
        self.spec: CodeSpec = spec

    def known_labels(self) -> frozenset[str]:
        return frozenset({"code"})

    def compute(self, request: RoutingRequest) -> Evaluation:
        best = 0.0
        where = -1
        for segment in request.iter_text(self.spec.roles):
            score = code_likeness(segment.text[: self.spec.max_chars])
            if score > best:
                best, where = score, segment.message_index
        matched = best >= self.spec.threshold
        return Evaluation(
            matched=matched,
            score=best,
            labels={"code": best} if matched else {},
            evidence=(f"message[{where}] code likeness={best:.2f}",) if where >= 0 else (),
        )
