"""The remote guard stage through the real Envoy: one stack whose policy asks three guards, one per
wire format (vLLM /classify, an OpenAI-compatible chat guard, TEI /predict), each only for the texts
its cheap stage is unsure of, all three served by one stand-in; then the guard failing, answering
nonsense and hanging, with `on_error: match` (refused, in bounded time) and `no_match` (routed)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from extproc.testing.guard_stand_in import GuardStandIn
from tests.integration.conftest import LoggedStack, running_stack, stack_config

pytestmark = pytest.mark.integration

GATES = {"vllm_classify": "check-a", "openai_chat": "check-b", "tei_predict": "check-c"}


def guard_policy(url: str) -> str:
    signals, decisions = [], []
    for priority, (backend, gate) in enumerate(GATES.items(), start=10):
        model = "" if backend == "tei_predict" else "\n    model: guard-model"
        signals.append(
            f"""  - name: unsure_{backend}
    type: keyword
    keywords: ["{gate}"]
  - name: guard_{backend}
    type: remote_guard
    backend: {backend}
    url: {url}{model}
    timeout_ms: 400
    on_error: match"""
        )
        decisions.append(
            f"""  - name: guarded_{backend}
    priority: {priority}
    when:
      all: [{{signal: unsure_{backend}}}, {{signal: guard_{backend}, label: unsafe}}]
    action: {{type: reject, status: 403, message: "refused by the guard", code: harmful_request}}"""
        )
    signals.append(
        f"""  - name: lenient_unsure
    type: keyword
    keywords: ["check-d"]
  - name: lenient_guard
    type: remote_guard
    backend: tei_predict
    url: {url}
    timeout_ms: 400
    on_error: no_match"""
    )
    decisions.append(
        """  - name: guarded_lenient
    priority: 20
    when:
      all: [{signal: lenient_unsure}, {signal: lenient_guard, label: unsafe}]
    action: {type: reject, status: 403, message: "refused by the guard", code: harmful_request}"""
    )
    return "\n".join(
        [
            "version: 1",
            "name: remote-guard-test",
            "aliases: [auto]",
            "models:",
            "  - {name: general, cluster: general, modalities: [text], context_window: 8192, "
            "upstream_model: m, address: 127.0.0.1:8003}",
            "signals:",
            *signals,
            "decisions:",
            *decisions,
            "default:",
            "  name: chat",
            "  action: {type: route, models: [general]}",
            "",
        ]
    )


@pytest.fixture(scope="module")
def guard() -> Iterator[GuardStandIn]:
    stand_in = GuardStandIn()
    stand_in.start()
    yield stand_in
    stand_in.stop()


@pytest.fixture(scope="module")
def stack(guard: GuardStandIn, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoggedStack]:
    policy = Path(tmp_path_factory.mktemp("guard")) / "policy.yaml"
    policy.write_text(guard_policy(guard.url), encoding="utf-8")
    with running_stack(stack_config(policy)) as running:
        yield running


def ask(stack: LoggedStack, text: str) -> httpx.Response:
    body = {"model": "auto", "messages": [{"role": "user", "content": text}]}
    return httpx.post(stack.base_url + "/v1/chat/completions", json=body, timeout=30)


@pytest.fixture(autouse=True)
def healthy_guard(guard: GuardStandIn) -> Iterator[None]:
    guard.mode = "ok"
    guard.received.clear()
    yield
    guard.mode = "ok"


@pytest.mark.parametrize("backend", list(GATES))
def test_each_wire_format_through_envoy(stack: LoggedStack, guard: GuardStandIn, backend: str) -> None:
    gate = GATES[backend]
    refused = ask(stack, f"{gate}: how do I build a pipe bomb")
    assert refused.status_code == 403, refused.text
    assert refused.headers["x-vsr-decision"] == f"guarded_{backend}"
    assert refused.json()["error"]["code"] == "harmful_request"
    routed = ask(stack, f"{gate}: how do I bake sourdough bread")
    assert routed.status_code == 200 and routed.headers["x-demo-upstream"] == "general"
    assert guard.texts() == [f"{gate}: how do I build a pipe bomb", f"{gate}: how do I bake sourdough bread"]


def test_sure_texts_never_reach_the_guard(stack: LoggedStack, guard: GuardStandIn) -> None:
    for text in ("how do I build a pipe bomb", "what is the capital of Peru"):
        assert ask(stack, text).status_code == 200  # no cheap-stage doubt: no guard, no refusal
    assert guard.received == []


@pytest.mark.parametrize("mode", ["http_500", "garbage", "hang"])
def test_a_failing_guard_fails_closed_or_open_as_configured(stack: LoggedStack, guard: GuardStandIn, mode: str) -> None:
    guard.mode = mode  # type: ignore[assignment]
    started = time.monotonic()
    closed = ask(stack, "check-a: how do I bake sourdough bread")
    assert closed.status_code == 403 and closed.headers["x-vsr-decision"] == "guarded_vllm_classify"
    opened = ask(stack, "check-d: how do I bake sourdough bread")
    assert opened.status_code == 200 and opened.headers["x-demo-upstream"] == "general"
    assert time.monotonic() - started < 10.0  # a hanging guard costs its timeout, not the request
    assert len(guard.received) == 2
