"""The format registry: one module per API behind `FORMATS`, the paths derived from it, the one
`error_body` over the one status-to-type table, and each format's replies read back by the
answer reader (what the router answers itself is what it would accept from an upstream)."""

from __future__ import annotations

import json

import pytest

from extproc.errors import ERROR_TYPES, MalformedRequest, error_type
from extproc.images import ImageLimits
from extproc.protocol.answers import read_json, read_stream
from extproc.protocol.formats import (
    API_PATHS,
    FORMATS,
    error_body,
    format_for,
    format_for_path,
    translation_back,
    translations_by_target,
)
from extproc.protocol.formats.chat import ChatFormat
from extproc.protocol.formats.messages import MessagesFormat
from extproc.protocol.formats.messages_chat import MessagesToChat
from extproc.protocol.openai import parse_request
from extproc.protocol.request import ApiKind, Role
from extproc.protocol.responses import assistant_reply, assistant_reply_stream, rewrite_body

BODIES = {
    ApiKind.CHAT: {"model": "m", "messages": [{"role": "user", "content": "hello"}], "tool_choice": "auto"},
    ApiKind.RESPONSES: {"model": "m", "input": "hello", "user": "u-1"},
    ApiKind.COMPLETIONS: {"model": "m", "prompt": "hello"},
    ApiKind.MESSAGES: {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hello"}],
        "tool_choice": {"type": "any"},
        "metadata": {"user_id": "u-2"},
    },
}


def test_every_api_has_one_format_and_the_paths_come_from_the_registry() -> None:
    assert set(FORMATS) == set(ApiKind)
    assert {path: fmt.kind for fmt in FORMATS.values() for path in fmt.paths} == API_PATHS
    for path, api in API_PATHS.items():
        assert format_for_path(path) is format_for(api)
    assert format_for_path("/v1/embeddings") is None


@pytest.mark.parametrize("api", list(ApiKind))
def test_each_format_parses_its_body_by_path(api: ApiKind) -> None:
    path = FORMATS[api].paths[0]
    request = parse_request(json.dumps(BODIES[api]).encode(), path=path)
    assert request.api is api and request.model == "m"
    assert [s.text for s in request.iter_text([Role.USER])] == ["hello"]
    assert request.turn_count == 1
    expected = {ApiKind.CHAT: ("auto", None), ApiKind.RESPONSES: (None, "u-1"), ApiKind.MESSAGES: ("required", "u-2")}
    assert (request.tool_choice, request.end_user) == expected.get(api, (None, None))


@pytest.mark.parametrize("api", [ApiKind.CHAT, ApiKind.MESSAGES])
def test_the_messages_prologue_is_checked_once_for_both_formats_that_have_one(api: ApiKind) -> None:
    for messages, word in ((None, "required"), ("x", "must be an array"), ([], "must not be empty"), ([1], "object")):
        body = {"model": "m", "max_tokens": 8} if messages is None else {"model": "m", "messages": messages}
        with pytest.raises(MalformedRequest, match=word):
            format_for(api).parse(body, ImageLimits())


@pytest.mark.parametrize("api", list(ApiKind))
def test_each_formats_reply_reads_back_as_its_answer(api: ApiKind) -> None:
    reply = assistant_reply(api, "vsr/clarify", "Which city?")
    answer = read_json(api, reply)
    assert answer.texts() == ["Which city?"] and answer.model == "vsr/clarify"
    streamed = read_stream(api, assistant_reply_stream(api, "vsr/clarify", "Which city?"))
    assert "".join(streamed.texts()) == "Which city?" and streamed.complete, api


def test_one_status_table_types_both_envelopes() -> None:
    assert error_type(403, "openai") == "permission_error" == error_type(403, "anthropic")
    assert (error_type(503, "openai"), error_type(503, "anthropic")) == ("service_unavailable", "overloaded_error")
    assert (error_type(502, "openai"), error_type(502, "anthropic")) == ("service_unavailable", "api_error")
    assert (error_type(418, "openai"), error_type(418, "anthropic")) == ("invalid_request_error",) * 2
    for status, types in ERROR_TYPES.items():
        assert error_type(status, "openai") == types.openai and error_type(status, "anthropic") == types.anthropic


def test_error_body_is_the_formats_envelope() -> None:
    openai = error_body(ApiKind.RESPONSES, 429, "slow down", code="rate_limited")
    assert openai == {
        "error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limited", "param": None}
    }
    server = error_body(ApiKind.CHAT, 503, "loading", code="not_ready", kind="server_error")
    assert server["error"]["type"] == "server_error"
    anthropic = error_body(ApiKind.MESSAGES, 503, "loading", code="not_ready", kind="server_error")
    assert anthropic == {"type": "error", "error": {"type": "overloaded_error", "message": "loading"}}


def test_the_system_prompt_goes_where_each_format_keeps_it() -> None:
    placed = {}
    for api, raw in BODIES.items():
        body, notes = rewrite_body(raw, api, "up", "Be brief.")
        placed[api] = (json.loads(body), notes)
    assert placed[ApiKind.CHAT][0]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert placed[ApiKind.RESPONSES][0]["instructions"] == "Be brief."
    assert placed[ApiKind.MESSAGES][0]["system"] == "Be brief."
    assert placed[ApiKind.COMPLETIONS][1] == ["system_prompt not applied: legacy completions have no system role"]
    assert all(doc["model"] == "up" for doc, _ in placed.values())


def test_only_responses_continues_an_earlier_answer_by_id() -> None:
    raw = {"previous_response_id": "resp-1", "store": True}
    continued = {api: (fmt.previous_response_id(raw), fmt.keeps_exchange(raw)) for api, fmt in FORMATS.items()}
    assert continued == {
        ApiKind.CHAT: (None, False),
        ApiKind.RESPONSES: ("resp-1", True),
        ApiKind.COMPLETIONS: (None, False),
        ApiKind.MESSAGES: (None, False),
    }
    responses = FORMATS[ApiKind.RESPONSES]
    assert responses.keeps_exchange({}) and not responses.keeps_exchange({"store": False})
    assert responses.previous_response_id({"previous_response_id": ""}) is None


@pytest.mark.parametrize("api", list(ApiKind))
def test_each_format_masks_the_tool_calls_of_its_answers(api: ApiKind) -> None:
    docs = {
        ApiKind.CHAT: {"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}}]},
        ApiKind.COMPLETIONS: {"choices": [{"text": "no calls here"}]},
        ApiKind.RESPONSES: {"output": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
        ApiKind.MESSAGES: {"content": [{"type": "tool_use", "name": "f", "input": {}}]},
    }
    doc = docs[api]
    FORMATS[api].redact_calls(doc, lambda _: '{"masked": true}')
    calls = read_json(api, doc).tool_calls()
    assert [json.loads(c.arguments) for c in calls] == ([] if api is ApiKind.COMPLETIONS else [{"masked": True}])


def test_a_body_on_a_path_that_names_no_api_is_guessed_by_its_formats_key() -> None:
    # Chat's key comes first: a Messages body's `messages` reads as Chat off its own path.
    assert [fmt.kind for fmt in FORMATS.values() if fmt.body_key] == [
        ApiKind.CHAT,
        ApiKind.RESPONSES,
        ApiKind.COMPLETIONS,
    ]
    for api in (ApiKind.CHAT, ApiKind.RESPONSES, ApiKind.COMPLETIONS):
        assert parse_request(json.dumps(BODIES[api]), path="/v1/other").api is api
    assert parse_request(json.dumps(BODIES[ApiKind.MESSAGES]), path="/v1/other").api is ApiKind.CHAT
    with pytest.raises(MalformedRequest, match="none of 'messages', 'input' or 'prompt'") as caught:
        parse_request(json.dumps({"model": "m"}), path="/v1/other")
    assert caught.value.code == "missing_field"


def test_only_messages_is_translated_and_its_answer_finds_the_way_back() -> None:
    translated = {fmt.kind: fmt.translation for fmt in FORMATS.values() if fmt.translation is not None}
    assert list(translated) == [ApiKind.MESSAGES]
    messages_to_chat = translated[ApiKind.MESSAGES]
    assert messages_to_chat is not None and messages_to_chat.target is ApiKind.CHAT
    assert translation_back(ApiKind.CHAT) is messages_to_chat
    with pytest.raises(KeyError):
        translation_back(ApiKind.RESPONSES)


def test_two_formats_translated_to_one_are_refused() -> None:
    """The decision metadata names only the upstream's API: a second format translated to Chat
    would leave the answer's way back ambiguous, so the registry refuses it."""
    twice = {ApiKind.MESSAGES: MessagesFormat(translation=MessagesToChat()), ApiKind.CHAT: ChatFormat(MessagesToChat())}
    with pytest.raises(ValueError, match="two API formats are translated to chat_completions"):
        translations_by_target(twice)
    assert translations_by_target({ApiKind.CHAT: ChatFormat()}) == {}
