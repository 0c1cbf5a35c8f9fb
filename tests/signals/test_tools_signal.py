"""Tools signal: offered / called / tool_choice / min_offered / min_calls / store, AND-combined,
globs case-insensitive; and the request fields it reads (`tool_call_names`, `tool_choice`,
`stores`) parsed from Chat Completions and Responses bodies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from extproc.protocol.openai import parse_request
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import BuildContext
from extproc.signals.tools import ToolsSignal, ToolsSpec

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"


def signal(**kw: Any) -> ToolsSignal:
    return ToolsSignal(ToolsSpec(type="tools", name="tools_sig", **kw))


def function_tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def chat_call(name: str, arguments: str = "{}", call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat(
    *,
    tools: list[str] | None = None,
    calls: list[list[dict[str, Any]]] | None = None,
    **extra: Any,
) -> RoutingRequest:
    """A chat body: one user turn, then one assistant message per entry of `calls` (with those
    tool calls) each followed by its tool results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "help me"}]
    for group in calls or []:
        messages.append({"role": "assistant", "content": None, "tool_calls": group})
        for call in group:
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": "ok"})
    body: dict[str, Any] = {"model": "auto", "messages": messages, **extra}
    if tools is not None:
        body["tools"] = [function_tool(t) for t in tools]
    return parse_request(body, path=CHAT)


def responses(items: list[dict[str, Any]] | str, **extra: Any) -> RoutingRequest:
    return parse_request({"model": "auto", "input": items, **extra}, path=RESPONSES)


# -- the request fields --------------------------------------------------------------------------


def test_chat_history_tool_calls_give_names_and_count_in_order() -> None:
    request = chat(
        calls=[
            [chat_call("search_web", '{"q": "x"}', "c1"), chat_call("read_file", '{"path": "/etc"}', "c2")],
            [chat_call("save_memory", '{"note": "n"}', "c3")],
        ]
    )
    assert request.tool_call_names == ["search_web", "read_file", "save_memory"]
    assert request.tool_call_count == 3
    # Each call's name and arguments are also assistant text, marked as a tool call.
    sources = [(s.role.value, s.source, s.text) for s in request.texts if s.source == "tool_call"]
    assert sources[0] == ("assistant", "tool_call", 'search_web {"q": "x"}')
    assert len(sources) == 3


def test_chat_tool_call_without_a_name_counts_but_is_not_named() -> None:
    request = chat(calls=[[{"id": "c1", "type": "function", "function": {"arguments": "{}"}}]])
    assert request.tool_call_count == 1
    assert request.tool_call_names == []


def test_chat_request_without_tool_calls_has_no_names() -> None:
    request = chat(tools=["search_web"])
    assert request.tool_call_names == []
    assert request.tool_call_count == 0
    assert request.tools == ["search_web"]


def test_responses_function_call_items_give_names() -> None:
    request = responses(
        [
            {"role": "user", "content": "remember my flight"},
            {"type": "function_call", "call_id": "fc1", "name": "save_memory", "arguments": '{"note": "LH123"}'},
            {"type": "function_call_output", "call_id": "fc1", "output": "saved"},
            {"type": "function_call", "call_id": "fc2", "name": "Run_Shell", "arguments": '{"cmd": "ls"}'},
        ]
    )
    assert request.tool_call_names == ["save_memory", "Run_Shell"]
    assert request.tool_call_count == 2
    assert [s.text for s in request.texts if s.source == "tool_result"] == ["saved"]


@pytest.mark.parametrize("choice", ["none", "auto", "required"])
def test_tool_choice_string_forms(choice: str) -> None:
    assert chat(tools=["a"], tool_choice=choice).tool_choice == choice


def test_tool_choice_chat_object_form_is_the_function_name() -> None:
    request = chat(tools=["get_weather"], tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert request.tool_choice == "get_weather"


def test_tool_choice_responses_object_form_is_the_function_name() -> None:
    request = responses(
        "weather?",
        tools=[{"type": "function", "name": "get_weather"}],
        tool_choice={"type": "function", "name": "get_weather"},
    )
    assert request.tool_choice == "get_weather"
    assert request.tools == ["get_weather"]


@pytest.mark.parametrize(
    "choice",
    [None, {"type": "function"}, {"type": "function", "function": {"name": ""}}, {"type": "allowed_tools"}, 3],
)
def test_tool_choice_absent_or_without_a_name_is_none(choice: object) -> None:
    extra = {} if choice is None else {"tool_choice": choice}
    assert chat(tools=["a"], **extra).tool_choice is None


@pytest.mark.parametrize(("value", "stores"), [(True, True), (False, False), ("true", False), (1, False)])
def test_stores_only_for_a_literal_true(value: object, stores: bool) -> None:
    assert responses("hi", store=value).stores is stores


def test_stores_false_when_store_is_absent() -> None:
    assert responses("hi").stores is False
    assert chat().stores is False


# -- validation ----------------------------------------------------------------------------------


def test_spec_needs_some_criterion() -> None:
    with pytest.raises(ValidationError, match="needs one of"):
        ToolsSpec(type="tools", name="t")
    with pytest.raises(ValidationError, match="needs one of"):
        ToolsSpec(type="tools", name="t", offered=[], called=[])


@pytest.mark.parametrize("field", ["min_offered", "min_calls"])
def test_minimums_must_be_positive(field: str) -> None:
    with pytest.raises(ValidationError):
        ToolsSpec(type="tools", name="t", **{field: 0})


def test_store_false_alone_is_a_valid_criterion() -> None:
    spec = ToolsSpec(type="tools", name="t", store=False)
    assert spec.store is False


def test_build_returns_a_working_inline_signal(build_ctx: BuildContext) -> None:
    built = ToolsSignal.build(ToolsSpec(type="tools", name="t", offered=["*"]), build_ctx)
    assert isinstance(built, ToolsSignal)
    assert built.inline
    assert built.reads == frozenset({"tools"})
    assert built.known_labels() == frozenset({"offered", "called", "store"})
    assert built.compute(chat(tools=["x"])).matched
    assert not built.compute(chat()).matched


# -- each criterion ------------------------------------------------------------------------------


def test_offered_matches_a_glob_and_reports_what_matched() -> None:
    s = signal(offered=["*shell*", "bash"])
    ev = s.compute(chat(tools=["search_web", "run_shell", "BASH"]))
    assert ev.matched and ev.score == 1.0
    assert ev.labels == {"offered": 1.0}
    assert ev.evidence == ("offered: run_shell, BASH",)


def test_offered_without_a_match() -> None:
    ev = signal(offered=["*shell*"]).compute(chat(tools=["search_web"]))
    assert not ev.matched and ev.score == 0.0
    assert ev.labels == {"offered": 0.0}
    assert ev.evidence == ()


def test_offered_on_a_request_without_tools() -> None:
    assert not signal(offered=["*"]).compute(chat()).matched


def test_offered_evidence_lists_at_most_five_names() -> None:
    names = [f"tool_{i}" for i in range(8)]
    ev = signal(offered=["tool_*"]).compute(chat(tools=names))
    assert ev.evidence == ("offered: " + ", ".join(names[:5]),)


def test_globs_are_case_insensitive_both_ways() -> None:
    assert signal(called=["RUN_*"]).compute(chat(calls=[[chat_call("run_shell")]])).matched
    assert signal(called=["run_*"]).compute(chat(calls=[[chat_call("RUN_SHELL")]])).matched
    assert signal(offered=["Get_Weather"]).compute(chat(tools=["get_weather"])).matched


def test_glob_is_a_whole_name_match_not_a_substring() -> None:
    s = signal(called=["shell"])
    assert not s.compute(chat(calls=[[chat_call("run_shell")]])).matched
    assert s.compute(chat(calls=[[chat_call("Shell")]])).matched


def test_glob_character_classes_and_single_wildcards() -> None:
    s = signal(called=["exec?", "save_[mn]*"])
    assert s.compute(chat(calls=[[chat_call("exec2")]])).matched
    assert s.compute(chat(calls=[[chat_call("save_note")]])).matched
    assert not s.compute(chat(calls=[[chat_call("exec22")]])).matched
    assert not s.compute(chat(calls=[[chat_call("save_file")]])).matched


def test_called_reads_chat_history_and_responses_items() -> None:
    s = signal(called=["save_memory*", "remember*"])
    ev = s.compute(chat(calls=[[chat_call("search_web")], [chat_call("save_memory_v2")]]))
    assert ev.matched and ev.labels == {"called": 1.0}
    assert ev.evidence == ("called: save_memory_v2",)
    assert s.compute(
        responses([{"type": "function_call", "call_id": "x", "name": "Remember", "arguments": "{}"}])
    ).matched
    assert not s.compute(chat(calls=[[chat_call("search_web")]])).matched


def test_called_does_not_match_a_tool_only_offered() -> None:
    ev = signal(called=["run_shell"]).compute(chat(tools=["run_shell"]))
    assert not ev.matched and ev.labels == {"called": 0.0}


@pytest.mark.parametrize(
    ("choice", "globs", "matched"),
    [
        ("required", ["required"], True),
        ("auto", ["required", "none"], False),
        ("none", ["NONE"], True),
        ({"type": "function", "function": {"name": "run_shell"}}, ["*shell*"], True),
        ({"type": "function", "function": {"name": "get_weather"}}, ["*shell*"], False),
    ],
)
def test_tool_choice_criterion(choice: object, globs: list[str], matched: bool) -> None:
    ev = signal(tool_choice=globs).compute(chat(tools=["run_shell", "get_weather"], tool_choice=choice))
    assert ev.matched is matched
    assert ev.labels == {}  # tool_choice has no label


def test_tool_choice_criterion_fails_without_a_tool_choice() -> None:
    assert not signal(tool_choice=["*"]).compute(chat(tools=["a"])).matched


def test_min_offered_counts_offered_tools() -> None:
    s = signal(min_offered=3)
    assert not s.compute(chat(tools=["a", "b"])).matched
    assert s.compute(chat(tools=["a", "b", "c"])).matched
    assert not s.compute(chat()).matched


def test_min_calls_counts_every_call_in_the_history_named_or_not() -> None:
    s = signal(min_calls=2)
    assert not s.compute(chat(calls=[[chat_call("a")]])).matched
    assert s.compute(chat(calls=[[chat_call("a")], [chat_call("b")]])).matched
    unnamed = {"id": "c9", "type": "function", "function": {"arguments": "{}"}}
    assert s.compute(chat(calls=[[chat_call("a"), unnamed]])).matched


def test_store_true_matches_stored_responses_exchanges() -> None:
    s = signal(store=True)
    ev = s.compute(responses("remember this", store=True))
    assert ev.matched and ev.labels == {"store": 1.0}
    assert ev.evidence == ("store: true",)
    ev = s.compute(responses("remember this", store=False))
    assert not ev.matched and ev.labels == {"store": 0.0} and ev.evidence == ()
    assert not s.compute(responses("remember this")).matched


def test_store_false_matches_exchanges_that_are_not_kept() -> None:
    s = signal(store=False)
    assert s.compute(responses("hi")).matched
    assert s.compute(responses("hi", store=False)).matched
    ev = s.compute(responses("hi", store=True))
    assert not ev.matched and ev.labels == {"store": 1.0}


# -- AND combination -----------------------------------------------------------------------------


def test_criteria_combine_with_and() -> None:
    s = signal(offered=["run_shell"], called=["run_shell"], min_calls=1)
    both = chat(tools=["run_shell"], calls=[[chat_call("run_shell")]])
    ev = s.compute(both)
    assert ev.matched
    assert ev.labels == {"offered": 1.0, "called": 1.0}
    assert ev.evidence == ("offered: run_shell", "called: run_shell")

    only_offered = s.compute(chat(tools=["run_shell"]))
    assert not only_offered.matched and only_offered.score == 0.0
    # The labels still say which criterion held.
    assert only_offered.labels == {"offered": 1.0, "called": 0.0}


def test_and_with_store_and_called_on_responses() -> None:
    s = signal(called=["save_*"], store=True)
    items = [{"type": "function_call", "call_id": "x", "name": "save_note", "arguments": "{}"}]
    assert s.compute(responses(items, store=True)).matched
    assert not s.compute(responses(items)).matched
    assert not s.compute(responses("no calls", store=True)).matched


def test_and_with_tool_choice_and_min_offered() -> None:
    s = signal(tool_choice=["required"], min_offered=2)
    assert s.compute(chat(tools=["a", "b"], tool_choice="required")).matched
    assert not s.compute(chat(tools=["a"], tool_choice="required")).matched
    assert not s.compute(chat(tools=["a", "b"], tool_choice="auto")).matched


# -- in a policy -----------------------------------------------------------------------------------


def test_policy_decision_on_a_tools_label_compiles_and_unknown_label_is_an_error(
    policy_errors: Callable[..., list[str]],
) -> None:
    body = """
    signals:
      - {name: shell, type: tools, offered: ["*shell*"]}
    decisions:
      - {name: d, priority: 10, when: {signal: shell, label: %s}, action: {type: route, models: [big-text]}}
    default:
      action: {type: route, models: [text-model]}
    """
    assert policy_errors(body % "offered") == []
    errors = policy_errors(body % "bogus")
    assert len(errors) == 1 and "no label 'bogus'" in errors[0]
