"""Replay a decision log under another policy: what would the new policy have done?

Each `request` record is re-decided one of two ways:

- **from captured bodies** (the log was written with `capture: true`): the body is routed
  again in full through a `Router` holding the new policy (every signal runs again);
- **from logged signal results** (the default, privacy-preserving log): the new policy's
  engine (`decide`, the same pure function the router uses) is run over the logged
  results. A signal the new policy has that the log lacks is *unknown* (its `on_error`
  applies); a signal the logged policy had but did not run for a record (lazy dispatch:
  no decision needed it) is unknown there whatever its `on_error`; a signal whose
  definition changed since the log was written is re-used with its old results. The
  report names each, with how many records they touched.

Records of requests that failed before any decision (malformed JSON, a corrupt image) are
kept as logged: no policy changes how a request is parsed. The report is a transition
table: (decision -> model) before and after, with counts and example request ids.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from extproc.images import RemoteImage
from extproc.observability.decision_log import (
    LogRecord,
    PolicyRecord,
    RequestSummary,
    record_body,
    signal_spec_hash,
)
from extproc.observability.row import DecisionRow
from extproc.outcome import RoutingOutcome
from extproc.policy.engine import decide
from extproc.policy.load import CompiledPolicy
from extproc.protocol.request import ApiKind, RoutingRequest
from extproc.router import Router
from extproc.signals.base import SignalResult, SignalStatus

Key = tuple[str, str, str]  # (decision, model, action)
MODES = ("results", "body", "request_error")


def describe(key: Key) -> str:
    decision, model, action = key
    if action == "route":
        return f"{decision} -> {model}"
    return f"{decision} ({action})"


@dataclass(slots=True)
class Transition:
    before: Key
    after: Key
    count: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def to_dict(self) -> dict[str, Any]:
        def side(key: Key) -> dict[str, str | None]:
            return {"decision": _none(key[0]), "model": _none(key[1]), "action": key[2]}

        return {
            "from": side(self.before),
            "to": side(self.after),
            "changed": self.changed,
            "count": self.count,
            "examples": self.examples,
        }


@dataclass(slots=True)
class ReplayReport:
    policy_version: str
    policy_path: str | None
    total: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    logged_versions: Counter[str] = field(default_factory=Counter)
    transitions: dict[tuple[Key, Key], Transition] = field(default_factory=dict)
    new_signals: Counter[str] = field(default_factory=Counter)  # in the new policy, not in the log
    changed_signals: Counter[str] = field(default_factory=Counter)  # definition differs from the logged one
    skipped_signals: Counter[str] = field(default_factory=Counter)  # logged policy had it, did not run it
    on_error: dict[str, str] = field(default_factory=dict)
    examples_per_row: int = 3

    @property
    def changed(self) -> int:
        return sum(t.count for t in self.transitions.values() if t.changed)

    def add(self, before: Key, after: Key, request_id: str | None, mode: str) -> None:
        self.total += 1
        self.modes[mode] += 1
        row = self.transitions.get((before, after))
        if row is None:
            row = self.transitions[(before, after)] = Transition(before, after)
        row.count += 1
        if request_id and len(row.examples) < self.examples_per_row:
            row.examples.append(request_id)

    def rows(self) -> list[Transition]:
        return sorted(self.transitions.values(), key=lambda t: (not t.changed, -t.count, describe(t.before)))

    def notes(self) -> list[str]:
        out: list[str] = []
        for name, n in sorted(self.new_signals.items()):
            out.append(
                f"signal {name!r} is not in the log (new in this policy): treated as unknown "
                f"(on_error={self.on_error.get(name, 'no_match')}) in {n} re-decided record(s)"
            )
        for name, n in sorted(self.skipped_signals.items()):
            out.append(
                f"signal {name!r} was not run for {n} logged record(s) (their decision did not need it): "
                "unknown there, whatever its on_error"
            )
        for name, n in sorted(self.changed_signals.items()):
            out.append(
                f"signal {name!r} is defined differently than when the log was written: its logged results "
                f"(old definition) were used for {n} record(s); capture bodies to run the new definition"
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": {"version": self.policy_version, "path": self.policy_path},
            "total": self.total,
            "changed": self.changed,
            "modes": dict(self.modes),
            "logged_policy_versions": dict(self.logged_versions),
            "transitions": [t.to_dict() for t in self.rows()],
            "new_signals": dict(self.new_signals),
            "changed_signals": dict(self.changed_signals),
            "skipped_signals": dict(self.skipped_signals),
            "notes": self.notes(),
        }

    def render(self) -> str:
        logged = ", ".join(f"{v} x{n}" for v, n in self.logged_versions.most_common()) or "none"
        lines = [
            f"replayed {self.total} request(s) under {self.policy_path or 'the policy'} "
            f"(version {self.policy_version}); logged under: {logged}",
            f"re-decided from logged signal results: {self.modes['results']}; re-routed from captured bodies: "
            f"{self.modes['body']}; request errors kept as logged: {self.modes['request_error']}",
            f"changed: {self.changed} of {self.total}",
        ]
        rows = self.rows()
        if rows:
            width = max(28, *(len(describe(t.before)) for t in rows))
            width_to = max(28, *(len(describe(t.after)) for t in rows))
            lines.append("")
            lines.append(
                f"  {'':<9} {'from (decision -> model)':<{width}}  "
                f"{'to (decision -> model)':<{width_to}}  count  examples"
            )
            for t in rows:
                mark = "changed" if t.changed else "same"
                lines.append(
                    f"  {mark:<9} {describe(t.before):<{width}}  {describe(t.after):<{width_to}}  {t.count:>5}  "
                    + ", ".join(t.examples)
                )
        notes = self.notes()
        if notes:
            lines.append("")
            lines.extend(f"note: {n}" for n in notes)
        return "\n".join(lines) + "\n"


def spec_hashes(policy: CompiledPolicy) -> dict[str, str]:
    """The same per-signal definition hashes the decision log writes in its `policy` records."""
    return {s.name: signal_spec_hash(s) for s in policy.spec.signals}


async def replay(
    records: Iterable[LogRecord], router: Router, *, use_bodies: bool = True, examples: int = 3
) -> ReplayReport:
    policy = router.policy
    report = ReplayReport(
        policy.version, str(policy.path) if policy.path is not None else None, examples_per_row=examples
    )
    report.on_error = {name: signal.on_error for name, signal in policy.signals.items()}
    new_hashes = spec_hashes(policy)
    headers: dict[str, PolicyRecord] = {}
    for record in records:
        if record["kind"] == "policy":
            headers[str(record.get("version"))] = record
            continue
        before: Key = (_s(record.get("decision")), _s(record.get("model")), _s(record.get("action")))  # as logged
        report.logged_versions[str(record.get("policy"))] += 1
        request_id = record.get("request_id")
        body = record_body(record) if use_bodies else None
        if record.get("request") is None or (
            record.get("action") == "error" and record.get("error") != "no_capable_model"
        ):
            report.add(before, before, request_id, "request_error")
            continue
        if body is not None:
            outcome = await router.route(body, path=str(record.get("path") or "/v1/chat/completions"))
            after = _key(DecisionRow.of(outcome))
            report.add(before, after, request_id, "body")
            continue
        logged: dict[str, Any] = dict(record.get("signals") or {})
        header = headers.get(str(record.get("policy")))
        header_signals: dict[str, Any] = dict(header.get("signals") or {}) if header is not None else {}
        results: dict[str, SignalResult] = {}
        for name, signal in policy.signals.items():
            if name in logged:
                results[name] = _result(name, logged[name])
                old = header_signals.get(name, {}).get("spec_sha256")
                if old is not None and old != new_hashes.get(name):
                    report.changed_signals[name] += 1
            elif header_signals.get(name, {}).get("used"):
                report.skipped_signals[name] += 1  # the logged policy had it but did not need it: unknown
            else:
                report.new_signals[name] += 1  # no result to replay: a failed signal, so its on_error applies
                results[name] = SignalResult.failed(name, signal.type, SignalStatus.UNAVAILABLE, "not in the log")
        # Absent now means "not run" (unknown); signals new to the policy were added above as failed.
        summary = record.get("request")
        assert summary is not None  # records without one were kept as logged above
        decided = decide(policy, stub_request(summary), results, missing="unknown")
        report.add(before, _key(DecisionRow.of(RoutingOutcome(decided, policy.version))), request_id, "results")
    return report


def stub_request(summary: RequestSummary | dict[str, Any]) -> RoutingRequest:
    """A request with the facts the engine reads (requested model, images, size), from a log record."""
    images = len(summary.get("images") or []) + int(summary.get("remote_images") or 0)
    try:
        api = ApiKind(summary.get("api") or ApiKind.CHAT.value)
    except ValueError:
        api = ApiKind.CHAT
    return RoutingRequest(
        api=api,
        model=summary.get("model"),
        stream=bool(summary.get("stream")),
        token_estimate=int(summary.get("tokens") or 0),
        remote_images=[RemoteImage("logged:image", 0) for _ in range(images)],
        turn_count=int(summary.get("turns") or 0),
    )


def _result(name: str, data: dict[str, Any]) -> SignalResult:
    try:
        status = SignalStatus(str(data.get("status")))
    except ValueError:
        status = SignalStatus.ERROR
    return SignalResult(
        name=name,
        type=str(data.get("type", "")),
        status=status,
        score=float(data.get("score") or 0.0),
        labels={str(k): float(v) for k, v in (data.get("labels") or {}).items()},
        latency_ms=float(data.get("latency_ms") or 0.0),
        error=data.get("error"),
    )


def _key(row: DecisionRow) -> Key:
    """A transition's side: the decision row's fields, as the log writes them."""
    return (_s(row.decision), _s(row.model), row.action)


def _s(value: Any) -> str:
    return "-" if value is None else str(value)


def _none(value: str) -> str | None:
    return None if value == "-" else value
