"""`extproc check` and `extproc explain` on the bundled default policy and example requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from extproc.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "policies" / "default.yaml"
REQUESTS = ROOT / "policies" / "examples" / "requests"


def explain_json(capsys: pytest.CaptureFixture[str], *files: Path, status: int = 0) -> list[dict[str, object]]:
    assert main(["explain", "--policy", str(DEFAULT), "--json", *map(str, files)]) == status
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_check_passes_bundled_policies(capsys: pytest.CaptureFixture[str]) -> None:
    policies = [DEFAULT, *sorted((ROOT / "policies" / "examples").glob("*.yaml"))]
    assert main(["check", *map(str, policies)]) == 0
    out = capsys.readouterr().out
    assert out.count(": OK") == len(policies)


def test_check_exits_1_and_prints_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    text = DEFAULT.read_text()
    assert "- {signal: jailbreak}" in text
    bad.write_text(text.replace("- {signal: jailbreak}", "- {signal: jailbrake}"))
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:" in out and "unknown signal 'jailbrake'" in out


@pytest.mark.parametrize(
    ("request_file", "decision", "action", "model"),
    [
        ("passport_text.json", "identity_document", "route", "restricted-vlm"),
        ("jailbreak.json", "jailbreak_block", "reject", None),
        ("plain_question.json", "general", "route", "general"),
        ("code_secret.json", "code_security_review", "route", "code-security"),
        ("responses_api.json", "general", "route", "general"),
        ("completions_legacy.json", "general", "route", "general"),
        ("describe_image.json", "general", "route", "general-vlm"),
    ],
)
def test_explain_json_picks_the_expected_decision(
    capsys: pytest.CaptureFixture[str], request_file: str, decision: str, action: str, model: str | None
) -> None:
    (result,) = explain_json(capsys, REQUESTS / request_file)
    assert (result["decision"], result["action"], result["model"]) == (decision, action, model)
    signals = result["signals"]
    assert isinstance(signals, list) and signals
    assert all({"name", "matched", "score", "error"} <= set(s) for s in signals)
    assert isinstance(result["trace"], dict) and result["trace"]["decisions"]


def test_explain_table_is_readable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--policy", str(DEFAULT), str(REQUESTS / "jailbreak.json")]) == 0
    out = capsys.readouterr().out
    assert "decision: jailbreak_block" in out and "status: 403" in out
    assert "jailbreak" in out and "first failing leaf" in out


def test_explain_says_what_a_conversation_would_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    follow_up = tmp_path / "follow_up.json"
    follow_up.write_text(json.dumps({"model": "auto", "input": "and then?", "previous_response_id": "resp_1"}))
    assert main(["explain", "--policy", str(DEFAULT), str(follow_up), str(REQUESTS / "passport_text.json")]) == 0
    out = capsys.readouterr().out
    assert "conversation: previous_response key; general keeps it on the model that served it" in out
    assert "conversation: no key in this request; identity_document moves it to its own model" in out
    (plain,) = explain_json(capsys, REQUESTS / "plain_question.json")
    conversation = plain["conversation"]
    assert isinstance(conversation, dict) and conversation["key"] is None and conversation["sticky"] is True
    assert conversation["store"] == "memory"  # the default settings keep conversations in the process


def test_explain_reports_bad_input_without_crashing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    (result,) = explain_json(capsys, bad, status=1)  # still explained, but the run failed
    assert result["action"] == "error" and result["status"] == 400
    assert result["error"]["code"] == "invalid_json"  # type: ignore[index]


def test_explain_shows_exactly_what_goes_to_envoy(capsys: pytest.CaptureFixture[str]) -> None:
    passport, jailbreak = explain_json(capsys, REQUESTS / "passport_text.json", REQUESTS / "jailbreak.json")
    routed: dict[str, Any] = passport["envoy"]  # type: ignore[assignment]
    assert routed["kind"] == "request_body"
    sent = json.loads(routed["body"])
    # The policy's system_prompt plugin, inserted before the client's own system message.
    assert sent["messages"][0]["role"] == "system" and "identity document" in sent["messages"][0]["content"]
    assert sent["model"] == passport["upstream_model"]
    assert routed["set_headers"]["x-data-classification"] == "restricted"  # the plugin's set_headers
    assert routed["set_headers"]["content-length"] == str(len(routed["body"].encode()))
    decision = routed["dynamic_metadata"]["vsr"]
    assert decision["cluster"] == passport["cluster"]
    assert decision["headers"] == {"x-data-classification": "restricted"}
    refused: dict[str, Any] = jailbreak["envoy"]  # type: ignore[assignment]
    assert (refused["kind"], refused["status"], refused["details"]) == ("immediate_response", 403, "vsr_reject")
    assert json.loads(refused["body"])["error"]["code"] == "jailbreak_detected"
    assert refused["headers"]["x-vsr-decision"] == "jailbreak_block"

    assert main(["explain", "--policy", str(DEFAULT), str(REQUESTS / "passport_text.json")]) == 0
    table = capsys.readouterr().out
    assert "to Envoy: request_body" in table and "header  x-data-classification: restricted" in table
