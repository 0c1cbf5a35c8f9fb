"""The decision console's memory: a bounded ring of the last N decisions, content-free.

The request path (`Observer.outcome` / `failure`, on the event loop) appends one small record per
decided request; the admin server (same loop) reads it. No locks: both run on one thread.

A record holds what the decision was and why, never what the request said: time, request id
(Envoy's `x-request-id`), API path, decision, action, model, status, policy version, each
signal's name, status and score, the matched signal names, latencies and the overload flag.
No text, no images, no signal evidence (redacted snippets stay out too), whatever
`observability.decision_log.capture` says: the console is for watching routing, and the
decision log is the place for replayable content.

Every record gets a sequence number (1, 2, ...) so a client polls incrementally
(`since(after)`); `epoch` changes when the process restarts, telling a client to start over.
"""

from __future__ import annotations

import bisect
import itertools
import os
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extproc.observability.metrics import LATENCY_BUCKETS
from extproc.observability.row import DecisionRow

if TYPE_CHECKING:
    from extproc.outcome import RoutingOutcome

MAX_ID_CHARS = 128  # request ids and paths come from the wire: cut, never trusted to be short
# Milliseconds: the route latency histogram's bounds (`metrics`, in seconds), scaled.
LATENCY_BOUNDS_MS: tuple[float, ...] = tuple(round(b * 1000.0, 6) for b in LATENCY_BUCKETS)


@dataclass(frozen=True, slots=True)
class RecentDecision:
    seq: int
    ts: float  # unix time
    request_id: str | None
    path: str
    policy: str | None
    decision: str | None
    action: str  # route / reject / clarify / error, or not_ready / internal_error (no outcome)
    model: str | None
    status: int
    signals: tuple[tuple[str, str, float], ...]  # (name, status, score)
    latency_ms: float | None  # the router's total (parse + signals + decide)
    extproc_ms: float | None  # the whole ext_proc exchange up to the decision
    overload: str | None  # "shed" or "fail_safe"
    error_code: str | None
    # the conversation store's part: state (new / followed / same / moved), the key that found it
    # (previous_response / session), the model it remembered, and why it was not followed
    conversation: dict[str, str | None] | None = None
    selection: str | None = None  # model selection's algorithm, choice and reason (x-vsr-selection)

    @property
    def matched(self) -> list[str]:
        return [name for name, status, _ in self.signals if status == "matched"]

    @classmethod
    def of(cls, seq: int, row: DecisionRow) -> RecentDecision:
        """The console's record of a decision row: its content-free part (each signal's name,
        status and score, never its evidence), with the ids from the wire cut."""
        return cls(
            seq=seq,
            ts=row.ts,
            request_id=_cut(row.request_id),
            path=_cut(row.path) or "",
            policy=row.policy,
            decision=row.decision,
            action=row.action,
            model=row.model,
            status=row.status,
            signals=tuple((s.name, s.status.value, s.score) for s in row.signals),
            latency_ms=row.latency_ms,
            extproc_ms=row.extproc_ms,
            overload=row.overload,
            error_code=row.error,
            conversation=row.conversation,
            selection=row.selection,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "ts": round(self.ts, 3),
            "request_id": self.request_id,
            "path": self.path,
            "policy": self.policy,
            "decision": self.decision,
            "action": self.action,
            "model": self.model,
            "status": self.status,
            "matched": self.matched,
            "signals": {name: {"status": status, "score": round(score, 4)} for name, status, score in self.signals},
            "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 3),
            "extproc_ms": None if self.extproc_ms is None else round(self.extproc_ms, 3),
            "overload": self.overload,
            "error": self.error_code,
            "conversation": self.conversation,
            "selection": self.selection,
        }


def _cut(value: str | None) -> str | None:
    return value if value is None or len(value) <= MAX_ID_CHARS else value[:MAX_ID_CHARS]


class RecentDecisions:
    """The last `size` decisions, oldest first, numbered from 1."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("the ring needs room for at least one decision")
        self.size = size
        self.epoch = f"{os.getpid()}-{time.time_ns():x}"
        self._ring: deque[RecentDecision] = deque(maxlen=size)
        self._seq = 0

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def first_seq(self) -> int:
        """The oldest sequence number still held (last_seq + 1 when empty)."""
        return self._seq - len(self._ring) + 1

    def __len__(self) -> int:
        return len(self._ring)

    # -- the request path ---------------------------------------------------------------------
    def record(
        self, outcome: RoutingOutcome, *, request_id: str | None, path: str, extproc_ms: float | None = None
    ) -> None:
        """Keep one decided request (the observer, which has built its row already, calls `record_row`)."""
        self.record_row(DecisionRow.of(outcome, request_id=request_id, path=path, extproc_ms=extproc_ms))

    def record_failure(self, kind: str, *, request_id: str | None, path: str) -> None:
        """A request the router could not answer (`not_ready`: 503, `internal_error`: 500)."""
        self.record_row(DecisionRow.failure(kind, request_id=request_id, path=path))

    def record_row(self, row: DecisionRow) -> None:
        self._seq += 1
        self._ring.append(RecentDecision.of(self._seq, row))

    # -- readers ------------------------------------------------------------------------------
    def since(self, after: int = 0, limit: int | None = None) -> list[RecentDecision]:
        """Records numbered above `after`, oldest first; with `limit`, the newest `limit` of them."""
        skip = max(0, after - self.first_seq + 1)
        records = list(itertools.islice(self._ring, skip, None)) if skip < len(self._ring) else []
        if limit is not None and len(records) > limit:
            records = records[len(records) - limit :]
        return records

    def conversations(self, limit: int) -> list[RecentDecision]:
        """The last `limit` records that looked up a conversation, oldest first."""
        found: list[RecentDecision] = []
        for record in reversed(self._ring):
            if record.conversation is not None:
                found.append(record)
                if len(found) == limit:
                    break
        return found[::-1]

    def window(self) -> dict[str, Any]:
        """Per-decision counts and latency over the records held: the console's bars."""
        return window_stats(self._ring, self.size)


def _quantile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return round(sorted_values[index], 3)


def histogram(values: Iterable[float], bounds: tuple[float, ...] = LATENCY_BOUNDS_MS) -> list[int]:
    """Non-cumulative bucket counts (value <= bound), +Inf last."""
    counts = [0] * (len(bounds) + 1)
    for value in values:
        counts[bisect.bisect_left(bounds, value)] += 1
    return counts


def window_stats(records: Iterable[RecentDecision], capacity: int) -> dict[str, Any]:
    by_decision: dict[str, list[RecentDecision]] = {}
    total = 0
    shed = fail_safe = 0
    for record in records:
        total += 1
        by_decision.setdefault(record.decision or record.action, []).append(record)
        shed += record.overload == "shed"
        fail_safe += record.overload == "fail_safe"
    decisions: dict[str, Any] = {}
    all_latencies: list[float] = []
    for name, group in sorted(by_decision.items()):
        latencies = sorted(r.latency_ms for r in group if r.latency_ms is not None)
        all_latencies.extend(latencies)
        actions: dict[str, int] = {}
        for r in group:
            actions[r.action] = actions.get(r.action, 0) + 1
        decisions[name] = {
            "count": len(group),
            "actions": actions,
            "p50_ms": _quantile(latencies, 0.5),
            "p95_ms": _quantile(latencies, 0.95),
            "max_ms": round(latencies[-1], 3) if latencies else None,
            "latency_counts": histogram(latencies),
        }
    all_latencies.sort()
    return {
        "capacity": capacity,
        "total": total,
        "decisions": decisions,
        "overload": {"shed": shed, "fail_safe": fail_safe},
        "latency": {
            "bounds_ms": list(LATENCY_BOUNDS_MS),
            "counts": histogram(all_latencies),
            "p50_ms": _quantile(all_latencies, 0.5),
            "p95_ms": _quantile(all_latencies, 0.95),
        },
    }
