"""The decision row: what one routing decision is logged, shown and counted as, built once.

`DecisionRow.of(outcome, ...)` reads a routing outcome once, on the request path; the decision
log (`decision_log`, a JSON line), the console's ring (`recent`), the metrics' labels (`metrics`)
and replay's comparison key (`replay`) all read the row, so a fact of the decision is named
and computed in this one place. Each writer still chooses its rendering (the log's rounded
timings, the console's cut request id), never the facts.

The row holds references (the outcome's signal results and timings) and scalars; nothing is
serialised here. It never holds the request: what the log keeps of it is taken by the log.
Nothing writes a row after `of`; it is not a frozen dataclass only because a frozen one's
`__init__` costs the request path about 1.5 us more (observer.outcome: 11.6 against 10.2 us).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from extproc.outcome import RoutingOutcome
    from extproc.signals.base import SignalResult


@dataclass(slots=True)
class DecisionRow:
    ts: float  # unix time
    request_id: str | None  # Envoy's x-request-id
    path: str  # the API path
    policy: str | None  # the policy version (None: no policy decided, a failure)
    decision: str | None
    action: str  # route / reject / clarify / error, or not_ready / internal_error (no outcome)
    model: str | None
    status: int
    error: str | None  # the error's code
    signals: Sequence[SignalResult] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)  # the router's stages (parse, signals, ...)
    extproc_ms: float | None = None  # the whole ext_proc exchange up to the decision
    overload: str | None = None  # "shed" (answered 429) or "fail_safe" (routed fail-safe)
    cache: str | None = None  # the semantic cache: hit, miss or bypass, with why ("bypass:no-cache")
    reasoning: str | None = None  # what the upstream was told about thinking (x-vsr-reasoning)
    # the conversation store's part: state (new / followed / same / moved), the key kind that found
    # it (previous_response / session), the model it remembered, why it was not kept; never a key
    conversation: dict[str, str | None] | None = None
    selection: str | None = None  # model selection's algorithm, choice and reason (x-vsr-selection)

    @classmethod
    def of(
        cls,
        outcome: RoutingOutcome,
        *,
        request_id: str | None = None,
        path: str = "",
        extproc_ms: float | None = None,
        ts: float | None = None,
    ) -> DecisionRow:
        result = outcome.result
        model = result.model
        error = result.error
        cache = outcome.cache
        cache_state: str | None = None
        if cache is not None:
            reason = cache.get("reason")
            cache_state = f"{cache['state']}:{reason}" if reason else str(cache["state"])
        conversation = outcome.conversation
        return cls(
            ts=time.time() if ts is None else ts,
            request_id=request_id,
            path=path,
            policy=outcome.policy_version,
            decision=result.decision,
            action=result.action,
            model=model.name if model is not None else None,
            status=result.status,
            error=error.code if error is not None else None,
            signals=outcome.signals,
            timings_ms=outcome.timings_ms,
            extproc_ms=extproc_ms,
            overload=outcome.overload,
            cache=cache_state,
            reasoning=outcome.reasoning,
            conversation=conversation_part(conversation),
            selection=outcome.selection_header,
        )

    @classmethod
    def failure(cls, kind: str, *, request_id: str | None, path: str, ts: float | None = None) -> DecisionRow:
        """A request the router could not answer (`not_ready`: 503, `internal_error`: 500)."""
        return cls(
            ts=time.time() if ts is None else ts,
            request_id=request_id,
            path=path,
            policy=None,
            decision=None,
            action=kind,
            model=None,
            status=503 if kind == "not_ready" else 500,
            error=kind,
        )

    @property
    def latency_ms(self) -> float | None:
        """The router's total (parse + signals + decide)."""
        return self.timings_ms.get("total")

    @property
    def matched(self) -> list[str]:
        return [s.name for s in self.signals if s.matched]


def conversation_part(part: Mapping[str, object] | None) -> dict[str, str | None] | None:
    """A request's conversation lookup (`ConversationLookup.to_dict`) as the row keeps it: names only."""
    if not part:
        return None
    return {name: None if part.get(name) is None else str(part.get(name)) for name in _CONVERSATION_FACTS}


_CONVERSATION_FACTS = ("state", "key", "remembered_model", "reason")
