"""The one renderer of a decision onto the wire (`server.wire`): the metadata is rendered from the
outcome's values, agreeing with the client headers; every immediate answer is in the request's
API shape (a rejection, a clarification, a request error), with the decision's headers."""

from __future__ import annotations

import json
from collections.abc import Callable

from extproc.router import Router
from extproc.server import wire

POLICY = """
signals:
  - {name: always, type: fake_inline, behaviour: match}
  - {name: never, type: fake_inline, behaviour: no_match}
decisions:
  - name: blocked
    priority: 30
    when: {all: [{signal: always}, {signal: never}]}
    action: {type: reject, status: 429, message: "slow down", code: too_fast}
  - name: vague
    priority: 20
    when: {signal: never}
    action: {type: clarify, message: "Which one?"}
default:
  name: general
  action: {type: route, models: [text-model]}
  plugins: {set_headers: {x-team: blue}}
"""
CLARIFY = POLICY.replace(
    "when: {signal: never}\n    action: {type: clarify", "when: {signal: always}\n    action: {type: clarify"
)
REJECT = POLICY.replace("when: {all: [{signal: always}, {signal: never}]}", "when: {signal: always}")


def body(path: str, text: str = "hello") -> bytes:
    if path == "/v1/messages":
        return json.dumps({"model": "auto", "max_tokens": 8, "messages": [{"role": "user", "content": text}]}).encode()
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()


async def test_the_metadata_agrees_with_the_client_headers_it_no_longer_reads(
    make_router: Callable[..., Router],
) -> None:
    outcome = await make_router(POLICY).route(body("/v1/chat/completions"), path="/v1/chat/completions")
    routed = wire.route(outcome, debug=True, tool_rules=False)
    assert routed.body is not None and routed.refusal is None and routed.metadata is not None
    assert routed.metadata["signals"] == routed.client_headers["x-vsr-signals"] == "always"
    assert routed.metadata["trace"] == routed.client_headers["x-vsr-trace"] == outcome.trace_header()
    assert routed.metadata["headers"] == {"x-team": "blue"} and routed.upstream_headers["x-team"] == "blue"
    assert routed.upstream_headers["x-vsr-cluster"] == "text_cluster" == routed.metadata["cluster"]
    assert "x-vsr-cluster" not in routed.client_headers
    quiet = wire.route(outcome, debug=False, tool_rules=False)
    assert quiet.metadata is not None and "trace" not in quiet.metadata and "x-vsr-trace" not in quiet.client_headers
    at_headers = wire.route(outcome, debug=False, tool_rules=False, at_headers=True)
    assert at_headers.body is None and at_headers.metadata is None


async def test_a_rejection_in_each_shape_with_the_decisions_headers(make_router: Callable[..., Router]) -> None:
    router = make_router(REJECT)
    chat = wire.immediate_response(await router.route(body("/v1/chat/completions"), path="/v1/chat/completions"))
    messages = wire.immediate_response(await router.route(body("/v1/messages"), path="/v1/messages"))
    for answer in (chat, messages):
        assert (answer.status, answer.details) == (429, "vsr_reject")
        assert answer.headers["x-vsr-decision"] == "blocked" and answer.headers["content-type"] == "application/json"
    assert json.loads(chat.body) == {
        "error": {"message": "slow down", "type": "rate_limit_error", "code": "too_fast", "param": None}
    }
    assert json.loads(messages.body) == {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}


async def test_a_clarification_and_a_request_error_in_the_requests_shape(make_router: Callable[..., Router]) -> None:
    router = make_router(CLARIFY)
    clarified = wire.immediate_response(await router.route(body("/v1/messages"), path="/v1/messages"))
    assert clarified.status == 200 and json.loads(clarified.body)["content"] == [{"type": "text", "text": "Which one?"}]
    broken = await router.route(b'{"messages": "no"}', path="/v1/messages")
    answer = wire.immediate_response(broken)
    assert answer.status == 400 and json.loads(answer.body)["type"] == "error"
    assert json.loads(answer.body)["error"]["type"] == "invalid_request_error"
    chat_broken = wire.immediate_response(await router.route(b'{"messages": "no"}', path="/v1/chat/completions"))
    assert json.loads(chat_broken.body)["error"]["code"] == "invalid_request"
