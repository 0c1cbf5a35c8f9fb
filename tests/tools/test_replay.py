"""Replay: re-decide a captured decision log under another policy and report the transitions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from extproc.cli import main
from extproc.observability.decision_log import DecisionLog, read_records
from extproc.router import Router
from extproc.settings import DecisionLogSettings, Settings
from extproc.tools.replay import replay, stub_request
from tests.conftest import CHANGED, POLICY, chat, image_chat

REROUTED = POLICY.replace("action: {type: route, models: [vlm]}", "action: {type: route, models: [secure]}")
TRAFFIC = [
    ("hello", chat("hello, how are you today?")),
    ("bug", chat("find the bug")),
    ("poem-exploit", chat("write a poem about an exploit")),
    ("poem", chat("write a poem")),
    ("image", image_chat()),
    ("bad", b"{not json"),
]


async def write_log(router: Router, path: Path, *, capture: bool) -> None:
    log = DecisionLog(DecisionLogSettings(path=path, capture=capture))
    log.start()
    log.register_policy(router.policy)
    for rid, body in TRAFFIC:
        log.submit(await router.route(body), request_id=rid, path="/v1/chat/completions", body=body)
    log.close()


def router_for(text: str, tmp_path: Path, name: str) -> Router:
    path = tmp_path / name
    path.write_text(text)
    return Router.from_settings(Settings.load(None, environ={}).model_copy(update={"policy_path": path}))


def side(s: dict[str, str]) -> str:
    return f"{s['decision']}->{s['model']}" if s["action"] == "route" else f"{s['decision']}({s['action']})"


def rows(report_dict: dict[str, Any]) -> set[tuple[str, str, int]]:
    return {(side(t["from"]), side(t["to"]), t["count"]) for t in report_dict["transitions"]}


async def test_same_policy_replays_without_changes(router: Router, tmp_path: Path) -> None:
    log = tmp_path / "d.jsonl"
    await write_log(router, log, capture=False)
    report = await replay(read_records([log]), router)
    assert (report.total, report.changed, report.modes["results"], report.modes["request_error"]) == (6, 0, 5, 1)
    assert report.notes() == []


async def test_changed_routes_show_as_transitions_from_logged_results(router: Router, tmp_path: Path) -> None:
    log = tmp_path / "d.jsonl"
    await write_log(router, log, capture=False)
    new = router_for(REROUTED, tmp_path, "rerouted.yaml")
    try:
        report = await replay(read_records([log]), new)
    finally:
        new.close()
    assert report.changed == 1
    assert ("image->vlm", "image->secure", 1) in rows(report.to_dict())
    [changed] = [t for t in report.rows() if t.changed]
    assert changed.examples == ["image"]
    assert "changed: 1 of 6" in report.render()


async def test_new_and_redefined_signals_are_named_when_only_results_were_logged(
    router: Router, tmp_path: Path
) -> None:
    log = tmp_path / "d.jsonl"
    await write_log(router, log, capture=False)
    new = router_for(CHANGED, tmp_path, "changed.yaml")
    try:
        report = await replay(read_records([log]), new)
    finally:
        new.close()
    # Without bodies the new `poetry` signal is unknown (no_match), and code_words' old results stand.
    assert report.changed == 0
    assert report.new_signals["poetry"] == 5 and report.changed_signals["code_words"] == 5
    text = report.render()
    assert "signal 'poetry' is not in the log" in text and "signal 'code_words' is defined differently" in text


async def test_captured_bodies_are_rerouted_in_full(router: Router, tmp_path: Path) -> None:
    log = tmp_path / "captured.jsonl"
    await write_log(router, log, capture=True)
    new = router_for(CHANGED, tmp_path, "changed.yaml")
    try:
        report = await replay(read_records([log]), new)
    finally:
        new.close()
    assert report.modes["body"] == 5 and report.changed == 2
    got = rows(report.to_dict())
    assert ("security->secure", "poetry->vlm", 1) in got
    assert ("general->general", "poetry->vlm", 1) in got
    assert report.notes() == []


def test_stub_request_reproduces_the_engine_facts() -> None:
    summary = {"api": "chat_completions", "model": "general", "tokens": 5000, "images": [{}], "remote_images": 1}
    stub = stub_request(summary)
    assert stub.estimated_tokens() == 5000 and stub.has_images and stub.model == "general"
    assert stub_request({"tokens": 0}).estimated_tokens() == 0


async def test_context_window_and_client_model_are_replayed_from_the_summary(router: Router, tmp_path: Path) -> None:
    # A long text request falls back from `general` (4096 tokens) to `vlm`; a client-picked model is kept.
    log = tmp_path / "d.jsonl"
    dl = DecisionLog(DecisionLogSettings(path=log))
    dl.start()
    long_body = chat("word " * 6000)
    picked = chat("hello", model="general")
    for rid, body in (("long", long_body), ("picked", picked)):
        dl.submit(await router.route(body), request_id=rid, path="/v1/chat/completions")
    dl.close()
    logged = {r["request_id"]: r for r in read_records([log]) if r["kind"] == "request"}
    assert logged["long"]["model"] == "vlm"
    report = await replay(read_records([log]), router)
    assert report.changed == 0 and report.total == 2


def test_cli_prints_the_table_and_gates_on_change(
    router: Router, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "d.jsonl"
    asyncio.run(write_log(router, log, capture=False))
    new_policy = tmp_path / "rerouted.yaml"
    new_policy.write_text(REROUTED)
    capsys.readouterr()
    assert main(["replay", str(log), "--policy", str(new_policy)]) == 0
    out = capsys.readouterr().out
    assert "changed: 1 of 6" in out
    changed_line = next(line for line in out.splitlines() if line.strip().startswith("changed "))
    assert "image -> vlm" in changed_line and "image -> secure" in changed_line and "image" in changed_line
    assert main(["replay", str(log), "--policy", str(new_policy), "--fail-on-change"]) == 1
    capsys.readouterr()
    assert main(["replay", str(log), "--policy", str(router.policy.path), "--fail-on-change", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["changed"] == 0 and data["total"] == 6
    bad_policy = tmp_path / "bad.yaml"
    bad_policy.write_text(POLICY.replace("{signal: has_image}", "{signal: nope}"))
    assert main(["replay", str(log), "--policy", str(bad_policy)]) == 2
    assert "nope" in capsys.readouterr().err


async def test_signals_the_logged_policy_skipped_are_unknown_not_failed(router: Router, tmp_path: Path) -> None:
    # A lazily dispatched record: `secret` (a safety signal, on_error=match) was not run.
    log = tmp_path / "lazy.jsonl"
    dl = DecisionLog(DecisionLogSettings(path=log))
    dl.start()
    dl.register_policy(router.policy)
    dl.submit(await router.route(chat("hello there")), request_id="lazy", path="/v1/chat/completions")
    dl.close()
    lines = log.read_text().splitlines()
    record = json.loads(lines[1])
    del record["signals"]["secret"]
    log.write_text(lines[0] + "\n" + json.dumps(record) + "\n")
    report = await replay(read_records([log]), router)
    assert report.changed == 0 and report.skipped_signals["secret"] == 1 and not report.new_signals
    assert "signal 'secret' was not run" in report.render()
