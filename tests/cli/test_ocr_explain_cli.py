"""`extproc explain` over a policy wired with the OCR signals: each scenario shows its signals and decision."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from extproc.cli import main
from extproc.testing.ocr_scenes import car_photo, code_screenshot, jpeg_bytes, passport_page, png_bytes, tampered_mrz

POLICY = """
version: 1
name: ocr-demo
aliases: [auto]
models:
  - {name: restricted-vlm, cluster: restricted_vlm, modalities: [text, image], context_window: 32768}
  - {name: code-security, cluster: code_security, modalities: [text, image], context_window: 32768}
  - {name: general-vlm, cluster: general_vlm, modalities: [text, image], context_window: 32768}
signals:
  - {name: image_text, type: image_text, timeout_ms: 20000, on_error: no_match}
  - {name: document, type: document, timeout_ms: 20000}
  - name: semantic
    type: semantic
    timeout_ms: 20000
    threshold: 0.28
    method: both
    exemplars:
      medical: ["What do these chest X-ray findings mean?", "I have a fever and chest pain, what could it be?"]
decisions:
  - name: identity_document
    priority: 900
    when: {any: [{signal: image_text, label: mrz}, {signal: document, label: identity_document}]}
    action: {type: route, models: [restricted-vlm]}
  - name: code_security_review
    priority: 800
    when: {all: [{signal: image_text, label: code}, {signal: image_text, label: secrets}]}
    action: {type: route, models: [code-security]}
  - name: out_of_domain_image
    priority: 600
    when: {all: [{signal: semantic, label: medical}, {signal: document, label: photo}]}
    action: {type: clarify, message: "That image does not look medical."}
default:
  action: {type: route, models: [general-vlm]}
"""


def _request(path: Path, text: str, data: bytes, mime: str) -> Path:
    uri = f"data:{mime};base64," + base64.b64encode(data).decode()
    content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": uri}}]
    path.write_text(json.dumps({"model": "auto", "messages": [{"role": "user", "content": content}]}))
    return path


@pytest.mark.slow
def test_explain_shows_ocr_signals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VSR_DISPATCH__REQUEST_DEADLINE_MS", "60000")
    monkeypatch.setenv("VSR_OCR__BUDGET_MS", "60000")
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    requests = [
        _request(tmp_path / "passport.json", "Summarize this", png_bytes(passport_page()), "image/png"),
        _request(tmp_path / "tampered.json", "Summarize this", png_bytes(passport_page(tampered_mrz())), "image/png"),
        _request(tmp_path / "code.json", "Find the bug", png_bytes(code_screenshot()), "image/png"),
        _request(tmp_path / "car.json", "I have chest pain and a fever, what is it?", jpeg_bytes(car_photo()),
                 "image/jpeg"),
    ]
    assert main(["explain", "--json", "--policy", str(policy), *map(str, requests)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(out) == 4
    text = json.dumps(out)
    assert "AKIA4HZQ7TMXW2RBKV3N" not in text and "LINDQVIST" not in text  # nothing unredacted
    decisions = [o.get("decision") for o in out]
    assert decisions == ["identity_document", "identity_document", "code_security_review", "out_of_domain_image"], out
