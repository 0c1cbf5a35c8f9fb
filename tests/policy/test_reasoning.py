"""Reasoning control: the exact body each family's server receives (Chat and Responses), `keep`,
the explicit false of `off`, policy-defined families, validation, and the headers through the router."""

from __future__ import annotations

import asyncio
import json
import textwrap
from typing import Any

import pytest
from pydantic import ValidationError

from extproc.policy.load import PolicyError, PolicyLoader, compile_text
from extproc.policy.reasoning import BUILTIN_FAMILIES, ReasoningFamily, ReasoningSetting, apply_reasoning
from extproc.protocol.request import ApiKind
from extproc.router import Router
from extproc.server import wire
from extproc.signals.base import BuildContext

ON = ReasoningSetting(mode="on", effort="high")
OFF = ReasoningSetting(mode="off")
KEEP = ReasoningSetting(mode="keep")


def applied(
    family: str, setting: ReasoningSetting, body: dict[str, Any], api: ApiKind = ApiKind.CHAT
) -> tuple[str, dict[str, Any]]:
    copy = json.loads(json.dumps(body))
    sent = apply_reasoning(copy, api, setting, BUILTIN_FAMILIES[family])
    return sent, copy


CLIENT = {"model": "auto", "messages": [], "chat_template_kwargs": {"enable_thinking": True, "other": 1}}


@pytest.mark.parametrize(
    ("family", "setting", "api", "body", "sent", "expected"),
    [
        ("qwen3", ON, ApiKind.CHAT, {}, "on", {"chat_template_kwargs": {"enable_thinking": True}}),
        (
            "qwen3",
            OFF,
            ApiKind.CHAT,
            CLIENT,
            "off",
            {**CLIENT, "chat_template_kwargs": {"enable_thinking": False, "other": 1}},
        ),
        ("qwen3", OFF, ApiKind.RESPONSES, {}, "off", {"chat_template_kwargs": {"enable_thinking": False}}),
        (
            "deepseek",
            ON,
            ApiKind.CHAT,
            {"chat_template_kwargs": "junk"},
            "on",
            {"chat_template_kwargs": {"thinking": True}},
        ),
        ("deepseek", OFF, ApiKind.CHAT, {}, "off", {"chat_template_kwargs": {"thinking": False}}),
        ("gpt_oss", ON, ApiKind.CHAT, {"reasoning_effort": "low"}, "on:high", {"reasoning_effort": "high"}),
        ("gpt_oss", ReasoningSetting(mode="on"), ApiKind.CHAT, {}, "on:medium", {"reasoning_effort": "medium"}),
        ("gpt_oss", OFF, ApiKind.CHAT, {}, "off:low", {"reasoning_effort": "low"}),
        (
            "gpt_oss",
            ON,
            ApiKind.RESPONSES,
            {"reasoning": {"summary": "auto"}},
            "on:high",
            {"reasoning": {"summary": "auto", "effort": "high"}},
        ),
        ("openai", ON, ApiKind.RESPONSES, {}, "on:high", {"reasoning": {"effort": "high"}}),
        ("openai", OFF, ApiKind.RESPONSES, {"reasoning": {"effort": "high"}}, "off", {}),
        ("openai", OFF, ApiKind.CHAT, {"reasoning_effort": "high", "x": 1}, "off", {"x": 1}),
        ("none", ON, ApiKind.CHAT, {"reasoning_effort": "high"}, "none", {"reasoning_effort": "high"}),
        ("qwen3", KEEP, ApiKind.CHAT, CLIENT, "kept", CLIENT),
        (
            "gpt_oss",
            KEEP,
            ApiKind.RESPONSES,
            {"reasoning": {"effort": "low"}},
            "kept",
            {"reasoning": {"effort": "low"}},
        ),
    ],
)
def test_each_family_writes_its_fields(
    family: str, setting: ReasoningSetting, api: ApiKind, body: dict[str, Any], sent: str, expected: dict[str, Any]
) -> None:
    got_sent, got = applied(family, setting, body, api)
    assert got_sent == sent and got == expected


def test_nested_objects_are_copied_not_mutated() -> None:
    inner = {"enable_thinking": True}
    body: dict[str, Any] = {"chat_template_kwargs": inner}
    apply_reasoning(body, ApiKind.CHAT, OFF, BUILTIN_FAMILIES["qwen3"])
    assert inner == {"enable_thinking": True} and body["chat_template_kwargs"] == {"enable_thinking": False}


def test_setting_and_family_validation() -> None:
    assert ReasoningSetting.model_validate({"mode": True}).mode == "on"  # YAML 1.1's bare on
    assert ReasoningSetting.model_validate({"mode": False}).mode == "off"
    with pytest.raises(ValidationError):
        ReasoningSetting.model_validate({"mode": "maybe"})
    with pytest.raises(ValidationError):
        ReasoningSetting.model_validate({"mode": "on", "effort": "extreme"})
    with pytest.raises(ValidationError):
        ReasoningFamily.model_validate({"switch": "bad path!"})


POLICY = """
version: 1
reasoning_families:
  glm: {switch: extra_body.thinking.enabled}
models:
  - {name: general, cluster: general, reasoning_family: qwen3}
  - {name: thinker, cluster: thinker, reasoning_family: gpt_oss}
  - {name: glm, cluster: glm, reasoning_family: glm}
signals:
  - {name: hard, type: keyword, keywords: [prove]}
  - {name: glmword, type: keyword, keywords: [glm]}
  - {name: keepword, type: keyword, keywords: [keep]}
decisions:
  - name: hard
    priority: 100
    when: {signal: hard}
    action: {type: route, models: [thinker], reasoning: {mode: on, effort: high}}
  - name: glm
    priority: 90
    when: {signal: glmword}
    action: {type: route, models: [glm], reasoning: {mode: off}}
  - name: keep
    priority: 80
    when: {signal: keepword}
    action: {type: route, models: [general], reasoning: {mode: keep}}
default:
  name: general
  action: {type: route, models: [general], reasoning: {mode: off}}
"""


def compile_(text: str, ctx: BuildContext) -> Any:
    return compile_text(textwrap.dedent(text), ctx, loader=PolicyLoader(file="test.yaml"))


def test_router_writes_reasoning_and_says_so(build_ctx: BuildContext) -> None:
    router = Router(
        build_ctx.settings, compile_(POLICY, build_ctx), executor=build_ctx.executor, models=build_ctx.models
    )

    def go(text: str, path: str = "/v1/chat/completions", **extra: Any) -> Any:
        if path == "/v1/responses":
            payload: dict[str, Any] = {"model": "auto", "input": text, **extra}
        else:
            payload = {"model": "auto", "messages": [{"role": "user", "content": text}], **extra}
        return asyncio.run(router.route(json.dumps(payload).encode(), path=path))

    hard = go("prove it", reasoning_effort="low")
    assert json.loads(hard.rewritten_body())["reasoning_effort"] == "high"
    assert wire.upstream_headers(hard)["x-vsr-reasoning"] == "on:high" == wire.client_headers(hard)["x-vsr-reasoning"]
    assert hard.to_dict()["reasoning"] == "on:high"
    resp = go("prove it", path="/v1/responses")
    assert json.loads(resp.rewritten_body())["reasoning"] == {"effort": "high"}
    hello = go("hello", chat_template_kwargs={"enable_thinking": True})
    assert json.loads(hello.rewritten_body())["chat_template_kwargs"] == {"enable_thinking": False}
    assert wire.client_headers(hello)["x-vsr-reasoning"] == "off"
    glm = go("glm please")
    assert json.loads(glm.rewritten_body())["extra_body"] == {"thinking": {"enabled": False}}
    kept = go("keep mine", chat_template_kwargs={"enable_thinking": True})
    assert json.loads(kept.rewritten_body())["chat_template_kwargs"] == {"enable_thinking": True}
    assert wire.client_headers(kept)["x-vsr-reasoning"] == "kept"


def test_policy_without_reasoning_leaves_bodies_and_headers_alone(build_ctx: BuildContext) -> None:
    text = POLICY.replace(', reasoning: {mode: off}}\n"""', "}").replace(
        "  action: {type: route, models: [general], reasoning: {mode: off}}",
        "  action: {type: route, models: [general]}",
    )
    router = Router(build_ctx.settings, compile_(text, build_ctx), executor=build_ctx.executor, models=build_ctx.models)
    body = {
        "model": "auto",
        "messages": [{"role": "user", "content": "hi"}],
        "chat_template_kwargs": {"enable_thinking": True},
    }
    outcome = asyncio.run(router.route(json.dumps(body).encode()))
    assert json.loads(outcome.rewritten_body())["chat_template_kwargs"] == {"enable_thinking": True}
    assert "x-vsr-reasoning" not in wire.client_headers(outcome) and outcome.reasoning is None


def test_unknown_family_is_a_policy_error(build_ctx: BuildContext) -> None:
    with pytest.raises(PolicyError, match="unknown reasoning_family 'qwen9'"):
        compile_(POLICY.replace("reasoning_family: qwen3", "reasoning_family: qwen9"), build_ctx)


MESSAGES = {"model": "auto", "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("family", "setting", "body", "sent", "expected"),
    [
        # on: the budget of the effort, max_tokens raised above it by the client's own max_tokens
        ("anthropic", ON, MESSAGES, "on:high", {"thinking": {"type": "enabled", "budget_tokens": 16384}, "max_tokens": 17384}),
        ("anthropic", ReasoningSetting(mode="on", effort="low"), {**MESSAGES, "max_tokens": 1024}, "on:low",
         {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2048}),
        # a max_tokens already above the budget stays; `on` without an effort takes the default (medium)
        ("qwen3", ReasoningSetting(mode="on"), {**MESSAGES, "max_tokens": 8000, "thinking": {"type": "disabled"}},
         "on:medium", {"thinking": {"type": "enabled", "budget_tokens": 4096}, "max_tokens": 8000}),
        ("gpt_oss", OFF, {**MESSAGES, "thinking": {"type": "enabled", "budget_tokens": 2048}}, "off",
         {"thinking": {"type": "disabled"}}),
        ("anthropic", KEEP, {**MESSAGES, "thinking": {"type": "enabled", "budget_tokens": 2048}}, "kept", {}),
        ("none", ON, {**MESSAGES, "thinking": {"type": "enabled", "budget_tokens": 2048}}, "none", {}),
    ],
)  # fmt: skip
def test_messages_bodies_get_anthropics_thinking_field(
    family: str, setting: ReasoningSetting, body: dict[str, Any], sent: str, expected: dict[str, Any]
) -> None:
    got_sent, got = applied(family, setting, body, ApiKind.MESSAGES)
    assert got_sent == sent and got == {**body, **expected}
    assert "chat_template_kwargs" not in got and "reasoning_effort" not in got  # only the Messages field


def test_anthropic_family_writes_nothing_in_chat_bodies_and_a_row_may_opt_out_of_thinking() -> None:
    assert applied("anthropic", ON, {"messages": []}) == ("none", {"messages": []})
    table = ReasoningFamily.model_validate({"switch": "chat_template_kwargs.enable_thinking", "thinking": None})
    body: dict[str, Any] = dict(MESSAGES)
    assert apply_reasoning(body, ApiKind.MESSAGES, OFF, table) == "off"
    assert body == {**MESSAGES, "chat_template_kwargs": {"enable_thinking": False}}
    budgets = ReasoningFamily.model_validate({"thinking": {"high": 32000}})
    body = dict(MESSAGES)
    assert apply_reasoning(body, ApiKind.MESSAGES, ON, budgets) == "on:high"
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 32000} and body["max_tokens"] == 33000
    with pytest.raises(ValidationError):  # Anthropic's minimum budget
        ReasoningFamily.model_validate({"thinking": {"low": 512}})


MESSAGES_POLICY = """
version: 1
models:
  - {name: claude, cluster: claude, reasoning_family: anthropic, api: [openai, anthropic]}
  - {name: oss, cluster: oss, reasoning_family: gpt_oss, api: [openai]}
  - {name: qwen, cluster: qwen, reasoning_family: qwen3, api: [openai]}
signals:
  - {name: hard, type: keyword, keywords: [prove]}
  - {name: ossword, type: keyword, keywords: [oss]}
  - {name: keepword, type: keyword, keywords: [keep]}
decisions:
  - {name: hard, priority: 100, when: {signal: hard}, action: {type: route, models: [claude], reasoning: {mode: on, effort: high}}}
  - {name: oss, priority: 90, when: {signal: ossword}, action: {type: route, models: [oss], reasoning: {mode: on, effort: high}}}
  - {name: keep, priority: 80, when: {signal: keepword}, action: {type: route, models: [claude], reasoning: {mode: keep}}}
default:
  name: general
  action: {type: route, models: [qwen], reasoning: {mode: off}}
"""


def test_router_writes_thinking_natively_and_the_familys_fields_when_translated(build_ctx: BuildContext) -> None:
    router = Router(
        build_ctx.settings, compile_(MESSAGES_POLICY, build_ctx), executor=build_ctx.executor, models=build_ctx.models
    )

    def go(text: str, **extra: Any) -> Any:
        payload = {"model": "auto", "max_tokens": 512, "messages": [{"role": "user", "content": text}], **extra}
        return asyncio.run(router.route(json.dumps(payload).encode(), path="/v1/messages"))

    native = go("prove it", thinking={"type": "disabled"})
    assert not native.translates
    body = json.loads(native.rewritten_body())
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384} and body["max_tokens"] == 16384 + 512
    assert (
        wire.upstream_headers(native)["x-vsr-reasoning"] == "on:high" == wire.client_headers(native)["x-vsr-reasoning"]
    )
    assert native.to_dict()["reasoning"] == "on:high"
    kept = go("keep mine", thinking={"type": "enabled", "budget_tokens": 2048})
    assert json.loads(kept.rewritten_body())["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert wire.client_headers(kept)["x-vsr-reasoning"] == "kept"
    # translated to Chat: the family's Chat fields, never a `thinking` field, max_tokens as the client's
    oss = go("oss please", thinking={"type": "enabled", "budget_tokens": 2048})
    assert oss.translates and wire.client_headers(oss)["x-vsr-reasoning"] == "on:high"
    chat = json.loads(oss.rewritten_body())
    assert chat["reasoning_effort"] == "high" and "thinking" not in chat and chat["max_tokens"] == 512
    assert oss.reasoning == "on:high"
    qwen = go("hello")
    chat = json.loads(qwen.rewritten_body())
    assert qwen.translates and chat["chat_template_kwargs"] == {"enable_thinking": False}
    assert wire.upstream_headers(qwen)["x-vsr-reasoning"] == "off"
