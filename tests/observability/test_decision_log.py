"""The decision log: one record per request, hashes not content, capture, rotation, bounded queue."""

from __future__ import annotations

import json
from pathlib import Path

from extproc.observability.decision_log import DecisionLog, read_records, record_body
from extproc.router import Router
from extproc.settings import DecisionLogSettings
from tests.conftest import chat, image_chat

SECRET_TEXT = "my card is 4111 1111 1111 1111, find the bug"


def make_log(path: Path, **kw: object) -> DecisionLog:
    log = DecisionLog(DecisionLogSettings(path=path, flush_interval_s=0.05, **kw))  # type: ignore[arg-type]
    log.start()
    return log


async def test_one_record_per_request_with_signals_decision_and_hashes_only(router: Router, tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    log = make_log(path)
    log.register_policy(router.policy)
    text_outcome = await router.route(chat(SECRET_TEXT), request_id="req-text")
    image_body = image_chat("describe")
    image_outcome = await router.route(image_body, request_id="req-image")
    bad = await router.route(b"{oops", request_id="req-bad")
    for rid, outcome, body in (
        ("req-text", text_outcome, chat(SECRET_TEXT)),
        ("req-image", image_outcome, image_body),
        ("req-bad", bad, b"{oops"),
    ):
        assert log.submit(outcome, request_id=rid, path="/v1/chat/completions", body=body, extproc_ms=1.5)
    log.close()

    raw = path.read_text()
    assert "4111 1111" not in raw and "find the bug" not in raw and "describe" not in raw  # no content
    records = list(read_records([path]))
    assert records[0]["kind"] == "policy" and records[0]["version"] == router.policy.version
    assert set(records[0]["signals"]) == {"has_image", "code_words", "secret"}
    by_id = {r["request_id"]: r for r in records if r["kind"] == "request"}
    text = by_id["req-text"]
    assert (text["decision"], text["model"], text["action"], text["status"]) == ("security", "secure", "route", 200)
    assert text["policy"] == router.policy.version
    assert text["signals"]["code_words"]["status"] == "matched"
    assert text["signals"]["has_image"]["status"] == "not_matched"
    assert set(text["signals"]["secret"]) == {"status", "latency_ms"}  # defaults left out, no evidence
    assert text["signals"]["code_words"]["score"] > 0
    assert len(text["request"]["text_sha256"]) == 64
    assert text["request"]["tokens"] > 0 and text["request"]["model"] == "auto"
    assert set(text["timings_ms"]) == {"parse", "signals", "decide", "total", "extproc"}
    assert "body" not in text
    image = by_id["req-image"]
    assert (image["decision"], image["model"]) == ("image", "vlm")
    [img] = image["request"]["images"]
    assert img["format"] == "PNG" and img["width"] == 24 and len(img["sha256"]) == 64
    bad_record = by_id["req-bad"]
    assert (bad_record["action"], bad_record["status"], bad_record["error"], bad_record["request"]) == (
        "error",
        400,
        "invalid_json",
        None,
    )
    assert log.written == 3 and log.dropped == 0


async def test_capture_keeps_bodies_and_evidence_up_to_a_size(router: Router, tmp_path: Path) -> None:
    path = tmp_path / "captured.jsonl"
    log = make_log(path, capture=True, capture_max_bytes=2000)
    small = chat("find the bug")
    big = chat("x" * 5000)
    for rid, body in (("small", small), ("big", big)):
        log.submit(await router.route(body), request_id=rid, path="/v1/chat/completions", body=body)
    log.close()
    by_id = {r["request_id"]: r for r in read_records([path]) if r["kind"] == "request"}
    assert record_body(by_id["small"]) == small
    assert by_id["small"]["signals"]["code_words"]["evidence"]
    assert record_body(by_id["big"]) is None  # over capture_max_bytes: hashes only


async def test_rotation_keeps_backups_each_starting_with_the_policy(router: Router, tmp_path: Path) -> None:
    path = tmp_path / "rotating.jsonl"
    log = make_log(path, max_bytes=4096, backups=2)
    log.register_policy(router.policy)
    outcome = await router.route(chat("hello"))
    for i in range(60):
        log.submit(outcome, request_id=f"r{i}", path="/v1/chat/completions")
    log.close()
    files = [path, path.with_name("rotating.jsonl.1"), path.with_name("rotating.jsonl.2")]
    assert all(f.exists() for f in files)
    assert not path.with_name("rotating.jsonl.3").exists()
    assert log.rotations >= 3
    for f in files:
        assert f.stat().st_size <= 4096
        first = json.loads(f.read_text().splitlines()[0])
        assert first["kind"] == "policy" and first["version"] == router.policy.version
    ids = [r["request_id"] for r in read_records(reversed(files)) if r["kind"] == "request"]
    assert ids == sorted(ids, key=lambda x: int(x[1:])) and ids[-1] == "r59"  # oldest dropped, order kept


async def test_a_full_queue_drops_and_counts_instead_of_blocking(router: Router, tmp_path: Path) -> None:
    log = DecisionLog(DecisionLogSettings(path=tmp_path / "q.jsonl", queue_size=16))  # not started: nothing drains
    outcome = await router.route(chat("hello"))
    accepted = [log.submit(outcome, request_id=str(i), path="/v1/chat/completions") for i in range(40)]
    assert accepted.count(True) == 16 and log.dropped == 24
    log.start()
    assert log.flush(5.0)
    log.close()
    assert log.written == 16
