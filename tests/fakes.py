"""Controllable signals for testing dispatch and the engine: matched, failing, slow, hanging."""

from __future__ import annotations

import asyncio
from typing import ClassVar, Literal

from pydantic import Field

from extproc.protocol.request import RoutingRequest
from extproc.signals.base import (
    COST_OCR,
    Evaluation,
    Signal,
    SignalContext,
    SignalSpecBase,
    SignalUnavailable,
)
from extproc.signals.registry import SignalCatalog, SignalType

Behaviour = Literal["match", "no_match", "raise", "unavailable", "hang", "text"]


class FakeSpec(SignalSpecBase):
    type: Literal["fake"] = "fake"
    behaviour: Behaviour = "match"
    score: float = 1.0
    labels: dict[str, float] = Field(default_factory=dict)
    delay_ms: float = 0.0
    text: str = ""  # for behaviour "text": match when the user text contains it


class FakeSignal(Signal):
    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        spec = self.spec
        assert isinstance(spec, FakeSpec)
        if spec.delay_ms:
            await asyncio.sleep(spec.delay_ms / 1000.0)
        if spec.behaviour == "hang":
            await asyncio.sleep(3600)
        if spec.behaviour == "raise":
            raise RuntimeError("fake signal failure")
        if spec.behaviour == "unavailable":
            raise SignalUnavailable("fake model not loaded")
        if spec.behaviour == "text":
            return Evaluation(matched=spec.text in request.joined_text(), score=spec.score)
        return Evaluation(matched=spec.behaviour == "match", score=spec.score, labels=spec.labels)

    def known_labels(self) -> frozenset[str] | None:
        spec = self.spec
        assert isinstance(spec, FakeSpec)
        return frozenset(spec.labels) or None


class FakeInlineSpec(FakeSpec):
    type: Literal["fake_inline"] = "fake_inline"  # type: ignore[assignment]


class FakeInlineSignal(FakeSignal):
    """Cheap and synchronous, like the regex signals: runs before any heavy signal."""

    inline: ClassVar[bool] = True

    def compute(self, request: RoutingRequest) -> Evaluation:
        spec = self.spec
        assert isinstance(spec, FakeSpec)
        return Evaluation(matched=spec.behaviour == "match", score=spec.score, labels=spec.labels)


class FakeSafetySpec(FakeSpec):
    type: Literal["fake_safety"] = "fake_safety"  # type: ignore[assignment]


class FakeSafetySignal(FakeSignal):
    safety: ClassVar[bool] = True


class FakeImageSpec(FakeSpec):
    type: Literal["fake_image"] = "fake_image"  # type: ignore[assignment]


class FakeImageSignal(FakeSignal):
    reads: ClassVar[frozenset[str]] = frozenset({"image"})
    implies_image: ClassVar[bool] = True


class ExecutorSpec(SignalSpecBase):
    """Holds the heavy executor's one worker for `work_ms` of (blocking) time per request."""

    type: Literal["executor_work"] = "executor_work"
    work_ms: float = 200.0


class ExecutorSignal(Signal):
    started: ClassVar[list[float]] = []

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        spec = self.spec
        assert isinstance(spec, ExecutorSpec)

        def work() -> bool:
            import time

            self.started.append(time.monotonic())
            time.sleep(spec.work_ms / 1000.0)
            return True

        return Evaluation(matched=await ctx.executor.run(work))


class FakeOcrSpec(FakeSpec):
    type: Literal["fake_ocr"] = "fake_ocr"  # type: ignore[assignment]


class FakeOcrSignal(FakeSignal):
    """Costs like OCR: lazy dispatch runs it only after cheaper pending signals."""

    cost: ClassVar[int] = COST_OCR


class RendezvousSpec(SignalSpecBase):
    """Two of these only finish if they run at the same time: each waits for the other."""

    type: Literal["rendezvous"] = "rendezvous"
    group: str = "a"


class RendezvousSignal(Signal):
    arrivals: ClassVar[dict[str, int]] = {}
    events: ClassVar[dict[str, asyncio.Event]] = {}

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        spec = self.spec
        assert isinstance(spec, RendezvousSpec)
        event = self.events.setdefault(spec.group, asyncio.Event())
        self.arrivals[spec.group] = self.arrivals.get(spec.group, 0) + 1
        if self.arrivals[spec.group] >= 2:
            event.set()
        await event.wait()
        return Evaluation(matched=True)


FAKE_TYPES = (
    SignalType("fake", FakeSpec, FakeSignal),
    SignalType("fake_inline", FakeInlineSpec, FakeInlineSignal),
    SignalType("fake_safety", FakeSafetySpec, FakeSafetySignal),
    SignalType("fake_image", FakeImageSpec, FakeImageSignal),
    SignalType("rendezvous", RendezvousSpec, RendezvousSignal),
    SignalType("executor_work", ExecutorSpec, ExecutorSignal),
    SignalType("fake_ocr", FakeOcrSpec, FakeOcrSignal),
)


def fake_catalog() -> SignalCatalog:
    return SignalCatalog().with_types(*FAKE_TYPES)
