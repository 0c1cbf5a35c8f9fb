"""The example policies route what their comments promise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extproc.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


def explain(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, policy: str, body: dict[str, object]
) -> dict[str, object]:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(body))
    assert main(["explain", "--policy", str(EXAMPLES / policy), "--json", str(request)]) == 0
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def chat(text: str, **extra: object) -> dict[str, object]:
    return {"model": "auto", "messages": [{"role": "user", "content": text}], **extra}


@pytest.mark.parametrize(
    ("policy", "body", "decision", "model"),
    [
        (
            "multilingual_support.yaml",
            chat("¿Dónde está mi pedido? Lo compré hace dos semanas."),
            "european_languages",
            "eu-multilingual",
        ),
        ("multilingual_support.yaml", chat("注文した商品がまだ届きません。"), "east_asian_languages", "cjk"),
        (
            "multilingual_support.yaml",
            chat("Tengo dolor de cabeza y fiebre, ¿debo ir al médico?"),
            "medical",
            "medical",
        ),
        ("multilingual_support.yaml", chat("Where is my order?"), "english", "english"),
        ("privacy_guard.yaml", chat("Charge my card 4111 1111 1111 1111 please"), "block_payment_data", None),
        ("privacy_guard.yaml", chat("Email jane.doe@example.com about the meeting"), "hosted", "hosted"),
        ("privacy_guard.yaml", chat("My SSN is 123-45-6789, fill in the form"), "personal_data_in_house", "in-house"),
        ("coding_assistant.yaml", chat("Why does this segfault?\n```c\nint *p = 0; *p = 1;\n```"), "coding", "coder"),
        ("coding_assistant.yaml", chat("Tell me a joke"), "chat", "small-chat"),
        (
            "coding_assistant.yaml",
            chat("Look it up", tools=[{"type": "function", "function": {"name": "search"}}]),
            "coding",
            "coder",
        ),
    ],
)
def test_example_policy_routes_as_documented(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    policy: str,
    body: dict[str, object],
    decision: str,
    model: str | None,
) -> None:
    result = explain(capsys, tmp_path, policy, body)
    assert (result["decision"], result["model"]) == (decision, model), result["trace"]
