"""The decision row is the one list of a decision's facts: the log writes each of them under its
own name, the console shows the same ones, and a field added to one place only fails here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from extproc.observability.decision_log import DecisionLog, RequestRecord, read_records
from extproc.observability.metrics import Metrics
from extproc.observability.observer import Observer
from extproc.observability.recent import RecentDecision, RecentDecisions
from extproc.observability.row import DecisionRow
from extproc.router import Router
from extproc.settings import DecisionLogSettings
from tests.conftest import chat

ROW_FIELDS = {f.name for f in dataclasses.fields(DecisionRow)}
# The log record's frame and what it keeps of the request: not facts of the decision.
LOG_ONLY = {"kind", "v", "request", "body", "body_b64"}
# Row fields the log writes inside another field ("extproc" in timings_ms) or not at all.
LOG_INSIDE = {"extproc_ms"}
LOG_LEAVES_OUT = {"conversation"}
# The console's ring: its own numbering, the matched names, the router's total for the timings.
CONSOLE_ONLY = {"seq", "matched", "latency_ms"}
CONSOLE_LEAVES_OUT = {"cache", "reasoning", "timings_ms"}


def full_row(row: DecisionRow) -> DecisionRow:
    """Every optional fact set, to values no outcome of the test policy has by itself."""
    return dataclasses.replace(
        row,
        ts=1_700_000_000.25,
        request_id="rid-full",
        path="/v1/responses",
        extproc_ms=2.5,
        overload="fail_safe",
        cache="bypass:no-cache",
        reasoning="on:high",
        conversation={"state": "followed", "key": "session", "remembered_model": "big", "reason": None},
        selection="latency:big 41ms<120ms",
    )


def test_the_log_record_has_exactly_the_rows_fields() -> None:
    assert set(RequestRecord.__annotations__) - LOG_ONLY == ROW_FIELDS - LOG_INSIDE - LOG_LEAVES_OUT


def test_the_console_shows_exactly_the_rows_fields() -> None:
    held = {f.name for f in dataclasses.fields(RecentDecision)}
    assert held == ROW_FIELDS - CONSOLE_LEAVES_OUT - {"error"} | {"error_code", "seq", "latency_ms"}
    row = DecisionRow.failure("not_ready", request_id=None, path="/v1/responses")
    assert set(RecentDecision.of(1, row).to_dict()) == ROW_FIELDS - CONSOLE_LEAVES_OUT | CONSOLE_ONLY


async def test_every_writer_writes_the_rows_values(router: Router, tmp_path: Path) -> None:
    outcome = await router.route(chat("please review this code"), request_id="req")
    row = full_row(DecisionRow.of(outcome, request_id="req", path="/v1/chat/completions"))
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(DecisionLogSettings(path=path, flush_interval_s=0.05))
    log.start()
    log.register_policy(router.policy)
    assert log.submit(outcome, request_id="ignored", path="/ignored", row=row)
    log.close()
    [record] = [r for r in read_records([path]) if r["kind"] == "request"]
    for name in ROW_FIELDS - LOG_INSIDE - LOG_LEAVES_OUT - {"ts", "signals", "timings_ms"}:
        assert record[name] == getattr(row, name), name  # type: ignore[literal-required]
    assert record["ts"] == "2023-11-14T22:13:20.250Z"
    assert set(record["signals"]) == {s.name for s in row.signals}
    assert record["timings_ms"]["extproc"] == 2.5 and set(record["timings_ms"]) == set(row.timings_ms) | {"extproc"}

    shown = RecentDecision.of(7, row).to_dict()
    for name in ROW_FIELDS - CONSOLE_LEAVES_OUT - {"ts", "signals"}:
        assert shown[name] == getattr(row, name), name
    assert shown["ts"] == row.ts and set(shown["signals"]) == set(record["signals"])
    assert shown["matched"] == row.matched and shown["latency_ms"] == round(row.timings_ms["total"], 3)


async def test_the_observer_builds_one_row_for_every_writer(
    router: Router, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[DecisionRow] = []
    original = DecisionRow.of

    def counting(*args: object, **kwargs: object) -> DecisionRow:
        row = original(*args, **kwargs)  # type: ignore[arg-type]
        built.append(row)
        return row

    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(DecisionLogSettings(path=path, flush_interval_s=0.05))
    log.start()
    metrics, recent = Metrics(), RecentDecisions(4)
    observer = Observer(metrics, log, recent)
    outcome = await router.route(chat("hello"), request_id="one")
    monkeypatch.setattr(DecisionRow, "of", counting)
    observer.outcome(outcome, request_id="one", path="/v1/chat/completions", extproc_ms=1.0)
    monkeypatch.undo()
    log.close()
    assert len(built) == 1
    [row] = built
    [shown] = recent.since(0)
    [record] = [r for r in read_records([path]) if r["kind"] == "request"]
    assert shown.ts == row.ts and record["request_id"] == shown.request_id == "one"
    assert metrics.requests == {(row.decision or "none", row.model or "none", row.action): 1}
