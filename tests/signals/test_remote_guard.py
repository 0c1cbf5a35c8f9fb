"""The remote guard stage (`type: remote_guard`): each documented wire format parsed, each backend
asked through a stand-in speaking it, only the texts the cheap stage is unsure of sent, and a
guard that is slow, down or answering nonsense turned into `on_error`, never into "safe"."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from extproc.router import Router
from extproc.signals.base import SignalStatus
from extproc.signals.remote_guard import (
    GuardError,
    RemoteGuardSpec,
    label_slug,
    parse_chat,
    parse_classify,
    parse_guard_reply,
    parse_tei,
)
from extproc.testing.guard_stand_in import GuardStandIn

BACKENDS = ("vllm_classify", "openai_chat", "tei_predict")


# --- the wire formats --------------------------------------------------------------------------


def test_llama_guard_replies() -> None:
    assert parse_guard_reply("safe").unsafe == 0.0
    verdict = parse_guard_reply("\n\nunsafe\nS1,S10")
    assert (verdict.unsafe, verdict.categories) == (1.0, ("S1", "S10"))
    assert parse_guard_reply("unsafe").categories == ()


def test_qwen3guard_replies() -> None:
    unsafe = parse_guard_reply("Safety: Unsafe\nCategories: Violent, Non-violent Illegal Acts")
    assert (unsafe.unsafe, unsafe.categories) == (1.0, ("Violent", "Non-violent Illegal Acts"))
    safe = parse_guard_reply("Safety: Safe\nCategories: None\nRefusal: Yes")
    assert (safe.unsafe, safe.controversial, safe.categories) == (0.0, False, ())
    middle = parse_guard_reply(
        "<think>the user asks about ...\nSafety: Unsafe</think>\nSafety: Controversial\nCategories: Politically Sensitive Topics"
    )
    assert (middle.unsafe, middle.controversial) == (0.0, True)  # the reasoning's own verdict is not read


@pytest.mark.parametrize("reply", ["", "I cannot help with that.", "Safety level: high"])
def test_unreadable_guard_replies_raise(reply: str) -> None:
    with pytest.raises(GuardError):
        parse_guard_reply(reply)


def test_chat_answer_shape_is_checked() -> None:
    ok = {"choices": [{"message": {"role": "assistant", "content": "unsafe\nS2"}}]}
    assert parse_chat(ok).categories == ("S2",)
    for broken in ({}, {"choices": []}, {"choices": [{"message": {"content": None}}]}, [1]):
        with pytest.raises(GuardError):
            parse_chat(broken)


def test_vllm_classify_scores() -> None:
    body = {"data": [{"index": 0, "label": "unsafe", "probs": [0.1, 0.9], "num_classes": 2}]}
    assert parse_classify(body, ["unsafe"]).unsafe == pytest.approx(0.9)
    safe = {"data": [{"index": 0, "label": "safe", "probs": [0.8, 0.2], "num_classes": 2}]}
    assert parse_classify(safe, ["unsafe"]).unsafe == pytest.approx(0.2)  # two classes: the other one's
    three = {"data": [{"index": 0, "label": "LABEL_0", "probs": [0.5, 0.2, 0.3], "num_classes": 3}]}
    assert parse_classify(three, ["unsafe"], unsafe_index=2).unsafe == pytest.approx(0.3)
    with pytest.raises(GuardError, match="unsafe_index"):
        parse_classify(three, ["unsafe"], unsafe_index=3)
    for broken in ({}, {"data": []}, {"data": [{"label": "x", "probs": [1.5]}]}, {"data": [{"probs": [0.5]}]}):
        with pytest.raises(GuardError):
            parse_classify(broken, ["unsafe"])


def test_tei_predict_scores() -> None:
    body = [{"label": "SAFE", "score": 0.7}, {"label": "INJECTION", "score": 0.3}]
    verdict = parse_tei(body, ["injection"])
    assert (verdict.unsafe, verdict.label) == (pytest.approx(0.3), "SAFE")
    assert parse_tei([body], ["injection"]).unsafe == pytest.approx(0.3)  # a batch of one
    for broken in ([], {"label": "x"}, [{"label": "x", "score": "high"}], [{"score": 0.5}]):
        with pytest.raises(GuardError):
            parse_tei(broken, ["unsafe"])


def test_spec_checks() -> None:
    with pytest.raises(ValueError, match="needs `model`"):
        RemoteGuardSpec(name="g", type="remote_guard", backend="openai_chat", url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="unsafe_index"):
        RemoteGuardSpec(name="g", type="remote_guard", backend="tei_predict", url="http://127.0.0.1:1", unsafe_index=1)
    with pytest.raises(ValueError):
        RemoteGuardSpec(name="g", type="remote_guard", backend="tei_predict", url="file:///etc/passwd")
    spec = RemoteGuardSpec(name="g", type="remote_guard", backend="tei_predict", url="http://127.0.0.1:9/")
    assert spec.endpoint == "http://127.0.0.1:9/predict"
    assert label_slug("Non-violent Illegal Acts") == "non_violent_illegal_acts"


# --- through a router, against the stand-in -----------------------------------------------------


@pytest.fixture
def guard() -> Iterator[GuardStandIn]:
    stand_in = GuardStandIn()
    stand_in.start()
    yield stand_in
    stand_in.stop()


def policy(backend: str, url: str, *, timeout_ms: int = 2000, on_error: str = "match", style: str = "") -> str:
    model = "" if backend == "tei_predict" else "    model: guard-model\n"
    return f"""
signals:
  - name: unsure                       # stands in for the cheap stage's doubt
    type: keyword
    keywords: ["please check"]
  - name: guard
    type: remote_guard
    backend: {backend}
    url: {url}
{model}    timeout_ms: {timeout_ms}
    on_error: {on_error}
decisions:
  - name: guarded_refusal
    priority: 10
    when:
      all: [{{signal: unsure}}, {{signal: guard, label: unsafe}}]
    action: {{type: reject, status: 403, message: "refused by the guard", code: harmful_request}}
default:
  name: chat
  action: {{type: route, models: [text-model]}}
"""


def chat(text: str) -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_each_backend_refuses_what_its_guard_calls_unsafe(
    backend: str, guard: GuardStandIn, make_router: Callable[..., Router]
) -> None:
    router = make_router(policy(backend, guard.url))
    refused = await router.route(chat("please check: how do I build a pipe bomb"))
    assert (refused.action, refused.decision) == ("reject", "guarded_refusal")
    passed = await router.route(chat("please check: how do I bake bread"))
    assert passed.action == "route"
    assert guard.texts() == ["please check: how do I build a pipe bomb", "please check: how do I bake bread"]
    path = {"vllm_classify": "/classify", "openai_chat": "/v1/chat/completions", "tei_predict": "/predict"}[backend]
    assert {p for p, _ in guard.received} == {path}


async def test_only_texts_the_cheap_stage_is_unsure_of_reach_the_guard(
    guard: GuardStandIn, make_router: Callable[..., Router]
) -> None:
    router = make_router(policy("vllm_classify", guard.url))
    for text in ("how do I build a bomb", "what is the capital of Peru", "please check: a bomb"):
        await router.route(chat(text))
    assert guard.texts() == ["please check: a bomb"]


async def test_llama_guard_style_categories_become_labels(
    guard: GuardStandIn, make_router: Callable[..., Router]
) -> None:
    guard.chat_style = "llama_guard"
    router = make_router(policy("openai_chat", guard.url))
    outcome = await router.route(chat("please check: poison the well"))
    result = next(s for s in outcome.signals if s.name == "guard")
    assert result.status is SignalStatus.MATCHED
    assert {"unsafe", "s1", "s9"} <= set(result.labels)


@pytest.mark.parametrize("mode", ["http_500", "garbage"])
@pytest.mark.parametrize("on_error", ["match", "no_match"])
async def test_a_failing_guard_follows_on_error(
    mode: str, on_error: str, guard: GuardStandIn, make_router: Callable[..., Router]
) -> None:
    guard.mode = mode  # type: ignore[assignment]
    router = make_router(policy("tei_predict", guard.url, on_error=on_error))
    outcome = await router.route(chat("please check: how do I bake bread"))
    result = next(s for s in outcome.signals if s.name == "guard")
    assert result.status is SignalStatus.ERROR
    assert "HTTP 500" in (result.error or "") if mode == "http_500" else "not JSON" in (result.error or "")
    assert outcome.action == ("reject" if on_error == "match" else "route")


async def test_a_slow_guard_times_out(guard: GuardStandIn, make_router: Callable[..., Router]) -> None:
    guard.mode = "hang"
    router = make_router(policy("vllm_classify", guard.url, timeout_ms=150, on_error="match"))
    outcome = await router.route(chat("please check: how do I bake bread"))
    result = next(s for s in outcome.signals if s.name == "guard")
    assert result.status is SignalStatus.TIMEOUT
    assert outcome.action == "reject"  # fail closed: a safety signal's default


async def test_an_unreachable_guard_is_an_error(make_router: Callable[..., Router]) -> None:
    from extproc.ops.stack import free_port

    router = make_router(policy("openai_chat", f"http://127.0.0.1:{free_port()}", on_error="no_match"))
    outcome = await router.route(chat("please check: anything"))
    result = next(s for s in outcome.signals if s.name == "guard")
    assert result.status is SignalStatus.ERROR and "unreachable" in (result.error or "")
    assert outcome.action == "route"
