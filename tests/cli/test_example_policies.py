"""The example policies route what their comments promise."""

from __future__ import annotations

import json
from collections.abc import Callable
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
        # cost needs no fleet (explain has none): the cheaper of the two priced models
        ("fleet.yaml", chat("Please summarize this meeting: we agreed on the plan."), "summaries", "small"),
        ("fleet.yaml", chat("hello"), "general", "general-a"),
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


@pytest.mark.parametrize(
    ("policy", "text", "decision", "model"),
    [
        # the language routes' text models cannot read the image: the in-house VLM behind them does
        (
            "multilingual_support.yaml",
            "Was ist auf diesem Bild zu sehen? Bitte kurz beschreiben.",
            "european_languages",
            "in-house-vlm",
        ),
        (
            "multilingual_support.yaml",
            "この写真に何が写っていますか？簡単に説明してください。",
            "east_asian_languages",
            "in-house-vlm",
        ),
        # no in-house model reads images, and the hosted one must not see personal data: refused, clearly
        ("privacy_guard.yaml", "My SSN is 123-45-6789, fill in this form", "personal_data_with_images", None),
        ("coding_assistant.yaml", "Why does this segfault?\n```c\nint *p = 0; *p = 1;\n```", "screenshots", "vision"),
    ],
)
def test_example_policies_serve_image_requests_on_a_model_that_reads_them(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    policy: str,
    text: str,
    decision: str,
    model: str | None,
    chat_with_images: Callable[..., dict[str, object]],
    data_uri: Callable[..., str],
    image_bytes: Callable[..., bytes],
) -> None:
    result = explain(capsys, tmp_path, policy, chat_with_images(data_uri(image_bytes()), text=text))
    assert (result["decision"], result["model"]) == (decision, model), result["trace"]
    assert result["status"] == (422 if model is None else 200)
    assert main(["check", str(EXAMPLES / policy)]) == 0
    assert "warning" not in capsys.readouterr().out
