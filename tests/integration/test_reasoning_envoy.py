"""Reasoning control through the real Envoy: for each family, the exact reasoning fields the upstream
receives (the demo upstream echoes them in its reply), for Chat, Responses and Messages (native:
Anthropic's `thinking`; translated to Chat: the family's Chat fields), JSON and streamed, with
`x-vsr-reasoning` on the client's response; `keep` passes the client's fields untouched."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import LoggedStack, running_stack, stack_config

FAMILIES = ("qwen3", "deepseek", "gpt_oss", "openai", "anthropic", "none")
# model key -> (family, api): the families' models speak both APIs; these speak only OpenAI, so
# a Messages request to them is translated to Chat.
MODELS = {f: (f, "[openai, anthropic]") for f in FAMILIES} | {
    "qwen3oai": ("qwen3", "[openai]"),
    "gptossoai": ("gpt_oss", "[openai]"),
}


def policy_text() -> str:
    models = "\n".join(
        f"  - {{name: m_{f}, cluster: c_{f}, upstream_model: model-{f}, reasoning_family: {family}, "
        f'api: {api}, address: "127.0.0.1:{18600 + i}"}}'
        for i, (f, (family, api)) in enumerate(MODELS.items())
    )
    signals, decisions = [], []
    priority = 1000
    for f in MODELS:
        for mode in ("on", "off", "keep"):
            word = f"{f.replace('_', '')}{mode}"
            signals.append(f"  - {{name: s_{word}, type: keyword, keywords: [{word}]}}")
            effort = ", effort: high" if mode == "on" else ""
            decisions.append(
                f"  - {{name: d_{word}, priority: {priority}, when: {{signal: s_{word}}}, "
                f'action: {{type: route, models: [m_{f}], reasoning: {{mode: "{mode}"{effort}}}}}}}'
            )
            priority -= 1
    return "\n".join(
        [
            "version: 1",
            "models:",
            models,
            "signals:",
            *signals,
            "decisions:",
            *decisions,
            "default: {name: general, action: {type: route, models: [m_none]}}",
            "",
        ]
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoggedStack]:
    path: Path = tmp_path_factory.mktemp("reasoning") / "policy.yaml"
    path.write_text(policy_text())
    with running_stack(stack_config(policy=path)) as running:
        yield running


def post(stack: LoggedStack, path: str, payload: dict[str, Any]) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(
        stack.base_url + path,
        data=json.dumps(payload).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read().decode()


_ECHO = re.compile(r"reasoning=(-|\{.*?\})\]")


def received(body: str) -> dict[str, Any]:
    """The reasoning fields the upstream received, from the demo upstream's echo (JSON or SSE)."""
    if body.startswith("event: message_start"):  # Anthropic SSE: the echo may be cut across text deltas
        events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
        body = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    found = _ECHO.search(body.replace('\\"', '"'))
    assert found is not None, body[:400]
    return {} if found.group(1) == "-" else dict(json.loads(found.group(1)))


CASES: list[tuple[str, str, str, dict[str, Any], dict[str, Any], str]] = [
    # family, mode, api, client fields, what the upstream must receive, x-vsr-reasoning
    ("qwen3", "on", "chat", {}, {"chat_template_kwargs": {"enable_thinking": True}}, "on"),
    ("qwen3", "off", "chat", {"chat_template_kwargs": {"enable_thinking": True}},
     {"chat_template_kwargs": {"enable_thinking": False}}, "off"),
    ("qwen3", "off", "responses", {}, {"chat_template_kwargs": {"enable_thinking": False}}, "off"),
    ("deepseek", "on", "responses", {}, {"chat_template_kwargs": {"thinking": True}}, "on"),
    ("deepseek", "off", "chat", {}, {"chat_template_kwargs": {"thinking": False}}, "off"),
    ("gpt_oss", "on", "chat", {"reasoning_effort": "low"}, {"reasoning_effort": "high"}, "on:high"),
    ("gpt_oss", "on", "responses", {}, {"reasoning": {"effort": "high"}}, "on:high"),
    ("gpt_oss", "off", "chat", {}, {"reasoning_effort": "low"}, "off:low"),
    ("openai", "on", "responses", {"reasoning": {"effort": "low", "summary": "auto"}},
     {"reasoning": {"effort": "high", "summary": "auto"}}, "on:high"),
    ("openai", "off", "chat", {"reasoning_effort": "high"}, {}, "off"),
    ("none", "on", "chat", {"reasoning_effort": "high"}, {"reasoning_effort": "high"}, "none"),
    ("qwen3", "keep", "chat", {"chat_template_kwargs": {"enable_thinking": True}},
     {"chat_template_kwargs": {"enable_thinking": True}}, "kept"),
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("family", "mode", "api", "client", "expected", "header"), CASES)
def test_upstream_receives_the_familys_fields(
    stack: LoggedStack,
    family: str,
    mode: str,
    api: str,
    client: dict[str, Any],
    expected: dict[str, Any],
    header: str,
    stream: bool,
) -> None:
    word = f"{family.replace('_', '')}{mode}"
    text = f"please {word} now"
    if api == "chat":
        path = "/v1/chat/completions"
        payload: dict[str, Any] = {"model": "auto", "messages": [{"role": "user", "content": text}]}
    else:
        path = "/v1/responses"
        payload = {"model": "auto", "input": text}
    payload.update(client, stream=stream)
    status, headers, body = post(stack, path, payload)
    assert status == 200, body
    assert headers["x-vsr-decision"] == f"d_{word}" and headers["x-vsr-model"] == f"m_{family}"
    assert headers["x-vsr-reasoning"] == header
    assert headers["x-demo-model"] == f"model-{family}"
    assert received(body) == expected


def test_route_without_reasoning_sends_no_header_and_no_fields(stack: LoggedStack) -> None:
    payload = {"model": "auto", "messages": [{"role": "user", "content": "hello"}], "reasoning_effort": "low"}
    status, headers, body = post(stack, "/v1/chat/completions", payload)
    assert status == 200 and headers["x-vsr-decision"] == "general"
    assert "x-vsr-reasoning" not in headers and received(body) == {"reasoning_effort": "low"}


DISABLED, CLIENTS_OWN = {"type": "disabled"}, {"type": "enabled", "budget_tokens": 2048}
MESSAGES_CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], str]] = [
    # model key, mode, client fields, what the upstream must receive, x-vsr-reasoning
    ("anthropic", "on", {"thinking": DISABLED},
     {"thinking": {"type": "enabled", "budget_tokens": 16384}, "max_tokens": 16384 + 256}, "on:high"),
    ("anthropic", "off", {"thinking": CLIENTS_OWN}, {"thinking": DISABLED, "max_tokens": 256}, "off"),
    ("anthropic", "keep", {"thinking": CLIENTS_OWN}, {"thinking": CLIENTS_OWN, "max_tokens": 256}, "kept"),
    # a Qwen3 server reached natively on /v1/messages is told with `thinking`, not its template kwargs
    ("qwen3", "on", {}, {"thinking": {"type": "enabled", "budget_tokens": 16384}, "max_tokens": 16384 + 256},
     "on:high"),
    ("none", "on", {"thinking": CLIENTS_OWN}, {"thinking": CLIENTS_OWN, "max_tokens": 256}, "none"),
    # translated to Chat: the family's Chat fields; the client's `thinking` has no Chat form
    ("qwen3oai", "off", {"thinking": CLIENTS_OWN}, {"chat_template_kwargs": {"enable_thinking": False}}, "off"),
    ("gptossoai", "on", {}, {"reasoning_effort": "high"}, "on:high"),
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("key", "mode", "client", "expected", "header"), MESSAGES_CASES)
def test_messages_upstream_receives_thinking_natively_and_chat_fields_translated(
    stack: LoggedStack,
    key: str,
    mode: str,
    client: dict[str, Any],
    expected: dict[str, Any],
    header: str,
    stream: bool,
) -> None:
    word = f"{key}{mode}"
    payload = {
        "model": "auto",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": f"please {word} now"}],
        "stream": stream,
        **client,
    }
    status, headers, body = post(stack, "/v1/messages", payload)
    assert status == 200, body
    assert headers["x-vsr-decision"] == f"d_{word}" and headers["x-vsr-model"] == f"m_{key}"
    assert headers["x-vsr-reasoning"] == header
    assert headers["x-demo-model"] == f"model-{key}"
    assert headers["content-type"].startswith("text/event-stream" if stream else "application/json")
    assert received(body) == expected
