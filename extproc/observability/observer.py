"""The one place the request path reports to: metrics, the decision log and the console's ring
of recent decisions (`recent`, content-free), from the servicer.

The ext_proc servicer calls `phase` after answering each Envoy phase and `outcome` once per
decided request (`failure` when the router could not answer). Requests explained through the
admin API or the CLI are not reported: metrics and the log describe live traffic only.
"""

from __future__ import annotations

import contextvars
import logging

from extproc.observability.decision_log import DecisionLog
from extproc.observability.metrics import Metrics
from extproc.observability.recent import RecentDecisions
from extproc.observability.row import DecisionRow
from extproc.outcome import RoutingOutcome

# The x-request-id of the request being handled (set by the servicer); log records get it.
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("vsr_request_id", default=None)


class Observer:
    def __init__(
        self,
        metrics: Metrics | None = None,
        decision_log: DecisionLog | None = None,
        recent: RecentDecisions | None = None,
    ) -> None:
        self.metrics = metrics
        self.decision_log = decision_log
        self.recent = recent

    def phase(self, phase: str, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.observe_phase(phase, seconds)

    def outcome(
        self,
        outcome: RoutingOutcome,
        *,
        request_id: str | None,
        path: str,
        body: bytes | None = None,
        extproc_ms: float | None = None,
    ) -> None:
        row = DecisionRow.of(outcome, request_id=request_id, path=path, extproc_ms=extproc_ms)  # once, for all
        if self.metrics is not None:
            self.metrics.record_outcome(outcome, row)
        if self.decision_log is not None:
            self.decision_log.submit(outcome, request_id=request_id, path=path, body=body, row=row)
        if self.recent is not None:  # never the body: the console's ring is content-free
            self.recent.record_row(row)

    def failure(self, kind: str, *, request_id: str | None, path: str) -> None:
        if self.metrics is not None:
            self.metrics.record_failure(kind)
        if self.recent is not None:
            self.recent.record_failure(kind, request_id=request_id, path=path)


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (Envoy's x-request-id) to records logged while a request is handled."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            request_id = REQUEST_ID.get()
            if request_id is not None:
                record.request_id = request_id
        return True


def install_request_id_filter() -> None:
    """Put the filter on every root handler (after `configure_logging`)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
            handler.addFilter(RequestIdFilter())
