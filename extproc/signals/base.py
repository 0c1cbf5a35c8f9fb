"""The signal interface: what every detector, text or image, looks like to the dispatcher.

A signal is built once per policy load from its spec and evaluated once per request.
Cheap signals (regexes, counts) set `inline = True` and implement `compute`: they run on
the event loop with no thread hop, which keeps text-only overhead in microseconds. Heavy
signals (models) implement `evaluate` and push work through `ctx.executor`.
"""

from __future__ import annotations

import logging
import time
from abc import ABC
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from extproc.protocol.request import Role, RoutingRequest

if TYPE_CHECKING:
    from extproc.models.executor import HeavyExecutor
    from extproc.models.registry import ModelRegistry
    from extproc.models.text_embedder import TextEmbedder
    from extproc.settings import Settings

OnError = Literal["no_match", "match", "reject"]

# Cost classes (`Signal.cost`): a text embedding, a vision-encoder pass, an OCR pass.
COST_EMBEDDING = 10
COST_MODEL = 20
COST_OCR = 30


log = logging.getLogger(__name__)


class SignalStatus(StrEnum):
    MATCHED = "matched"
    NOT_MATCHED = "not_matched"
    UNAVAILABLE = "unavailable"  # the model it needs is not loaded
    ERROR = "error"  # it raised
    TIMEOUT = "timeout"  # it ran past its timeout or the request deadline


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What a signal computes; the dispatcher adds name, status and latency."""

    matched: bool
    score: float = 0.0  # 0..1; 1.0 for a plain boolean match
    labels: Mapping[str, float] = field(default_factory=dict)  # label -> score, for leaf `label:`
    evidence: tuple[str, ...] = ()  # short, redacted: safe to log and to show in a trace


@dataclass(frozen=True, slots=True)
class SignalResult:
    name: str
    type: str
    status: SignalStatus
    score: float = 0.0
    labels: Mapping[str, float] = field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    latency_ms: float = 0.0
    error: str | None = None

    @property
    def matched(self) -> bool:
        return self.status is SignalStatus.MATCHED

    @property
    def known(self) -> bool:
        """False when the signal could not say (unavailable, error, timeout): unknown, not false."""
        return self.status in (SignalStatus.MATCHED, SignalStatus.NOT_MATCHED)

    @classmethod
    def from_evaluation(cls, name: str, type_: str, ev: Evaluation, latency_ms: float) -> SignalResult:
        return cls(
            name=name,
            type=type_,
            status=SignalStatus.MATCHED if ev.matched else SignalStatus.NOT_MATCHED,
            score=float(ev.score),
            labels=dict(ev.labels),
            evidence=tuple(ev.evidence),
            latency_ms=latency_ms,
        )

    @classmethod
    def failed(cls, name: str, type_: str, status: SignalStatus, error: str, latency_ms: float = 0.0) -> SignalResult:
        return cls(name=name, type=type_, status=status, latency_ms=latency_ms, error=error)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "status": self.status.value,
            "matched": self.matched,
            "score": round(self.score, 6),
            "labels": {k: round(v, 6) for k, v in self.labels.items()},
            "evidence": list(self.evidence),
            "latency_ms": round(self.latency_ms, 3),
            "error": self.error,
        }


class SignalSpecBase(BaseModel):
    """Fields every signal spec has. Subclasses narrow `type` to their `Literal[...]` name and add
    their own fields; the base declares it so that code holding any spec reads `spec.type`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    on_error: OnError | None = None  # None: the family default (safety -> match, routing -> no_match)
    timeout_ms: float | None = Field(default=None, gt=0)  # None: the policy's default


class TextSignalSpec(SignalSpecBase):
    """A spec for a signal that reads request text; `roles` picks whose text."""

    roles: list[Role] = Field(default_factory=lambda: [Role.USER], min_length=1)


@dataclass(slots=True)
class SignalContext:
    """Per-request context handed to `Signal.evaluate`."""

    executor: HeavyExecutor
    deadline: float  # time.monotonic() value by which every signal must be done

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


@dataclass(slots=True)
class BuildContext:
    """What a signal factory gets at policy load: settings, the heavy executor, the models."""

    settings: Settings
    executor: HeavyExecutor
    models: ModelRegistry

    def text_embedder(self) -> TextEmbedder:
        """The process's one MiniLM embedder, shared by every signal that embeds and by the answer
        cache; raises ModelUnavailable. Its `embed` through the executor is coalesced: one encoder
        pass per text, whatever number of signals (and concurrent requests) ask for it, batched
        across requests (`attach_to_executor`). Imports no torch (the ONNX runtime)."""
        from extproc.models.text_embedder import attach_to_executor, get_text_embedder

        threads = self.settings.dispatch.torch_threads
        embedder = get_text_embedder(self.models, self.settings.embedder, torch_threads=threads)
        attach_to_executor(self.executor, embedder, self.settings.embedder)
        return embedder

    def embedding_stage(self, signal_name: str) -> tuple[TextEmbedder | None, str | None]:
        """A cascade's optional embedding stage: the embedder, or (logged) why there is none; the
        cascade's first stage still answers without it."""
        from extproc.models.registry import ModelUnavailable

        try:
            # Past the cascade's own model, so models load: cap torch's threads if it is loaded.
            self.executor.apply_thread_budget()
            return self.text_embedder(), None
        except ModelUnavailable as exc:
            reason = f"embedding stage unavailable (no MiniLM): {exc}"
            log.warning("signal %s: %s", signal_name, reason)
            return None, reason


class SignalUnavailable(Exception):
    """Raised by `evaluate` when the model it needs is not loaded; the result is UNAVAILABLE."""


class Signal(ABC):  # noqa: B024 - subclasses implement compute or evaluate, either one
    """One configured signal. Subclasses set the ClassVars and implement compute or evaluate."""

    # Does a failure of this family fail closed (counts as a match) by default?
    safety: ClassVar[bool] = False
    # Cheap and synchronous: run `compute` on the event loop, no executor hop, no timeout.
    inline: ClassVar[bool] = False
    # What the signal reads. "image" signals need image pixels; "image_meta" only counts/URLs.
    reads: ClassVar[frozenset[str]] = frozenset({"text"})
    # Does a positive match of this signal imply the request carries an image? Used by load-time
    # checks ("this rule requires images; can its models accept them?").
    implies_image: ClassVar[bool] = False
    # Rough cost class of one evaluation, for lazy dispatch: when a decision still needs several
    # heavy signals, the cheapest class runs first, since it may settle the decision alone
    # (a vision label ~80 ms can make OCR ~600 ms unnecessary). Inline signals always run first.
    cost: ClassVar[int] = COST_MODEL

    def __init__(self, spec: SignalSpecBase) -> None:
        self.spec = spec
        self.name = spec.name
        self.type: str = spec.type

    @property
    def on_error(self) -> OnError:
        if self.spec.on_error is not None:
            return self.spec.on_error
        return "match" if self.safety else "no_match"

    @classmethod
    def build(cls, spec: Any, ctx: BuildContext) -> Signal:
        """Construct from a validated spec at policy load; heavy signals load models here."""
        return cls(spec)

    def unavailable_reason(self) -> str | None:
        """Why this signal cannot run at all (e.g. no vision model configured); None when it can."""
        return None

    def known_labels(self) -> frozenset[str] | None:
        """Labels a leaf may name; None when the signal accepts any label (checked at run time)."""
        return None

    def compute(self, request: RoutingRequest) -> Evaluation:
        """Synchronous evaluation for `inline` signals."""
        raise NotImplementedError(f"{type(self).__name__} is not an inline signal")

    def off_loop(self, request: RoutingRequest) -> bool:
        """For an inline signal: is `compute` on this request long enough to hold the event loop
        (a long text read whole)? Then the dispatcher runs it in a worker thread, with the same
        result and still without a timeout, so other streams' requests go on meanwhile."""
        return False

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        """Asynchronous evaluation; the default runs `compute` (for inline signals)."""
        return self.compute(request)

    def answer_now(self, request: RoutingRequest) -> Evaluation | None:
        """For a heavy signal: its answer when it needs no waiting (every score it would compute
        is cached), so the dispatcher skips the task, the timeout and the executor hop; None
        otherwise. It must equal what `evaluate` would return."""
        return None


M = TypeVar("M")


class ModelSignal(Signal, Generic[M]):
    """A signal backed by one loaded model (OCR, a language detector, ...). Without the model it is
    unavailable (unknown, never "no") and says why, in health checks and traces."""

    def __init__(self, spec: SignalSpecBase, model: M | None = None, reason: str | None = None) -> None:
        super().__init__(spec)
        self.model = model
        self.reason = reason

    def unavailable_reason(self) -> str | None:
        return self.reason if self.model is None else None

    def require_model(self) -> M:
        """The model, or SignalUnavailable (the dispatcher records UNAVAILABLE) when it is not loaded."""
        if self.model is None:
            raise SignalUnavailable(self.reason or f"{self.type}: model not loaded")
        return self.model
