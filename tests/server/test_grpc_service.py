"""The servicer over a real in-process gRPC channel, with a real Router over a small keyword policy."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.outcome import RoutingOutcome
from extproc.policy.load import compile_text
from extproc.router import Router
from extproc.server.app import ExtProcServer
from extproc.settings import Settings
from extproc.signals.base import BuildContext

OVERWRITE = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
CHAT = "/v1/chat/completions"


def headers_msg(
    path: str = CHAT, method: str = "POST", extra: Sequence[tuple[str, str]] = (), eos: bool = False
) -> Any:
    pairs = [(":method", method), (":path", path), (":authority", "llm"), ("x-request-id", "rid-1"), *extra]
    return ep.ProcessingRequest(
        request_headers=ep.HttpHeaders(
            headers=base_pb2.HeaderMap(headers=[base_pb2.HeaderValue(key=k, raw_value=v.encode()) for k, v in pairs]),
            end_of_stream=eos,
        )
    )


def body_msg(body: bytes) -> Any:
    return ep.ProcessingRequest(request_body=ep.HttpBody(body=body, end_of_stream=True))


def response_headers_msg() -> Any:
    return ep.ProcessingRequest(
        response_headers=ep.HttpHeaders(
            headers=base_pb2.HeaderMap(headers=[base_pb2.HeaderValue(key=":status", raw_value=b"200")])
        )
    )


def chat(text: str, **extra: Any) -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}], **extra}).encode()


# Jailbreak words are refused, bug reports go to the code model, the rest to the general model.
POLICY = """
version: 1
models:
  - {name: code-security, cluster: code_security, upstream_model: Qwen/Qwen2.5-VL-32B-Instruct}
  - {name: general, cluster: general, upstream_model: meta-llama/Llama-3.1-8B-Instruct}
signals:
  - {name: jailbreak, type: keyword, keywords: [jailbreak]}
  - {name: code_present, type: keyword, keywords: [bug]}
  - {name: code_review_words, type: keyword, keywords: [find, bug]}
decisions:
  - name: jailbreak_block
    priority: 20
    when: {signal: jailbreak}
    action: {type: reject, status: 403, message: blocked, code: jailbreak_block}
  - name: code_security_review
    priority: 10
    when: {all: [{signal: code_present}, {signal: code_review_words}]}
    action: {type: route, models: [code-security]}
default: {name: general, action: {type: route, models: [general]}}
"""


class CountingRouter(Router):
    """The real router, counting the requests it was asked to route."""

    calls: list[str]

    async def route(
        self, body: bytes, *, path: str = CHAT, request_id: str | None = None, received: float | None = None
    ) -> RoutingOutcome:
        self.calls.append(path)
        return await super().route(body, path=path, request_id=request_id, received=received)


def make_router(settings: Settings, policy: str = POLICY) -> CountingRouter:
    executor = HeavyExecutor(1, None)
    ctx = BuildContext(settings=settings, executor=executor, models=ModelRegistry())
    router = CountingRouter(settings, compile_text(policy, ctx), executor=executor, models=ctx.models)
    router.calls = []
    return router


def set_headers(mutation: Any) -> dict[str, str]:
    for option in mutation.set_headers:
        assert option.append_action == OVERWRITE
    return {o.header.key: o.header.raw_value.decode() for o in mutation.set_headers}


class Harness:
    def __init__(self, server: ExtProcServer, channel: grpc.aio.Channel) -> None:
        self.server = server
        self.stub = ep_grpc.ExternalProcessorStub(channel)
        self.health = health_pb2_grpc.HealthStub(channel)

    async def exchange(self, *messages: Any) -> list[Any]:
        """Send messages one at a time, each after the previous answer, like Envoy does."""
        call = self.stub.Process()
        replies = []
        for message in messages:
            await call.write(message)
            reply = await call.read()
            if reply is grpc.aio.EOF:
                break
            replies.append(reply)
            if reply.HasField("immediate_response"):
                break
        await call.done_writing()
        return replies

    async def status(self) -> int:
        reply = await self.health.Check(health_pb2.HealthCheckRequest(service=""))
        status: int = reply.status
        return status


async def start(
    debug: bool = False,
    load: bool = True,
    adapt: Callable[[CountingRouter], None] | None = None,
    policy: str = POLICY,
    configure: Callable[[Settings], None] | None = None,
) -> tuple[ExtProcServer, Any]:
    """A server on a free port over a real Router for `policy` (this module's keyword policy);
    `configure` may change the settings first."""
    settings = Settings.load(None, environ={}).model_copy(deep=True)
    settings.server.grpc_port = 0
    settings.server.debug_headers = debug
    settings.server.shutdown_grace_s = 2.0
    if configure is not None:
        configure(settings)

    def factory(s: Settings) -> Router:
        router = make_router(s, policy)
        if adapt is not None:
            adapt(router)
        return router

    server = ExtProcServer(settings, factory)
    port = await server.start()
    if load:
        await server.load()
    channel = grpc.aio.insecure_channel(
        f"127.0.0.1:{port}",
        options=[("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)],
    )
    return server, channel


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    server, channel = await start(debug=True)
    yield Harness(server, channel)
    await channel.close()
    await server.stop()


async def test_routes_body_rewrites_model_and_sets_routing_headers(harness: Harness) -> None:
    replies = await harness.exchange(headers_msg(), body_msg(chat("find the bug")), response_headers_msg())
    assert [r.WhichOneof("response") for r in replies] == ["request_headers", "request_body", "response_headers"]

    common = replies[1].request_body.response
    assert common.clear_route_cache
    headers = set_headers(common.header_mutation)
    new_body = common.body_mutation.body
    assert json.loads(new_body)["model"] == "Qwen/Qwen2.5-VL-32B-Instruct"
    assert headers["content-length"] == str(len(new_body))
    assert headers["x-vsr-cluster"] == "code_security"
    assert headers["x-vsr-decision"] == "code_security_review"
    assert headers["x-vsr-model"] == "code-security"

    client = set_headers(replies[2].response_headers.response.header_mutation)
    assert client["x-vsr-decision"] == "code_security_review"
    assert client["x-vsr-model"] == "code-security"
    assert client["x-vsr-signals"] == "code_present,code_review_words"
    assert "x-vsr-cluster" not in client  # topology stays inside
    assert "x-vsr-trace" not in client  # not asked for


async def test_strips_client_routing_headers_in_any_case_and_repeats(harness: Harness) -> None:
    extra = [("x-vsr-cluster", "general"), ("X-VSR-Cluster", "restricted_vlm"), ("x-vsr-model", "x"), ("x-other", "1")]
    replies = await harness.exchange(headers_msg(extra=extra))
    common = replies[0].request_headers.response
    assert set(common.header_mutation.remove_headers) == {"x-vsr-cluster", "X-VSR-Cluster", "x-vsr-model"}
    assert common.clear_route_cache
    assert not replies[0].HasField("mode_override")


async def test_non_inference_paths_pass_through(harness: Harness) -> None:
    # (GET /v1/models is answered by the router: tests/server/test_grpc_service_messages.py)
    for path, method in (("/health", "GET"), (CHAT, "GET"), ("/v1/embeddings", "POST"), ("/v1/models", "POST")):
        replies = await harness.exchange(headers_msg(path, method, extra=[("x-vsr-cluster", "a")]))
        reply = replies[0]
        assert reply.request_headers.response.header_mutation.remove_headers == ["x-vsr-cluster"]
        mode = reply.mode_override
        assert mode.request_body_mode == processing_mode_pb2.ProcessingMode.NONE
        assert mode.response_header_mode == processing_mode_pb2.ProcessingMode.SKIP
    router = harness.server.service.router
    assert isinstance(router, CountingRouter)
    assert router.calls == []


async def test_query_string_does_not_hide_an_inference_path(harness: Harness) -> None:
    replies = await harness.exchange(headers_msg(CHAT + "?x=1"), body_msg(chat("hello")))
    assert replies[1].request_body.response.body_mutation.body


async def test_reject_is_an_immediate_response_with_openai_error(harness: Harness) -> None:
    replies = await harness.exchange(headers_msg(), body_msg(chat("jailbreak please")))
    immediate = replies[-1].immediate_response
    assert immediate.status.code == 403
    assert json.loads(immediate.body)["error"]["message"] == "blocked"
    headers = set_headers(immediate.headers)
    assert headers["x-vsr-decision"] == "jailbreak_block"
    assert headers["x-vsr-signals"] == "jailbreak"
    assert headers["content-type"] == "application/json"
    assert "content-length" not in headers


async def test_malformed_json_gets_400(harness: Harness) -> None:
    replies = await harness.exchange(headers_msg(), body_msg(b"{nope"))
    immediate = replies[-1].immediate_response
    assert immediate.status.code == 400
    assert "error" in json.loads(immediate.body)


async def test_request_without_body_is_decided_at_headers(harness: Harness) -> None:
    replies = await harness.exchange(headers_msg(eos=True))
    assert replies[0].immediate_response.status.code == 400


async def test_debug_trace_only_when_asked_and_sanitised(harness: Harness) -> None:
    replies = await harness.exchange(
        headers_msg(extra=[("x-vsr-debug", "true")]), body_msg(chat("find the bug")), response_headers_msg()
    )
    client = set_headers(replies[2].response_headers.response.header_mutation)
    trace = client["x-vsr-trace"]
    assert "d[jailbreak_block=f code_security_review=t general=f]" in trace
    assert "code_present=matched:1.00" in trace and "\n" not in trace
    # the debug header itself is a client x-vsr-* header: stripped before the upstream sees it
    assert "x-vsr-debug" in replies[0].request_headers.response.header_mutation.remove_headers


async def test_debug_header_ignored_when_settings_disable_it() -> None:
    server, channel = await start(debug=False)
    try:
        h = Harness(server, channel)
        replies = await h.exchange(
            headers_msg(extra=[("x-vsr-debug", "true")]), body_msg(chat("hi")), response_headers_msg()
        )
        assert "x-vsr-trace" not in set_headers(replies[2].response_headers.response.header_mutation)
    finally:
        await channel.close()
        await server.stop()


def crash_on_route(router: CountingRouter) -> None:
    async def boom(
        body: bytes, *, path: str = CHAT, request_id: str | None = None, received: float | None = None
    ) -> RoutingOutcome:
        raise RuntimeError("boom")

    router.route = boom  # type: ignore[method-assign]


async def test_router_crash_is_a_500_openai_error() -> None:
    server, channel = await start(adapt=crash_on_route)
    try:
        replies = await Harness(server, channel).exchange(headers_msg(), body_msg(chat("hi")))
        immediate = replies[-1].immediate_response
        assert immediate.status.code == 500
        assert json.loads(immediate.body)["error"]["code"] == "internal_error"
    finally:
        await channel.close()
        await server.stop()


async def test_health_not_serving_until_loaded_then_503_then_serving() -> None:
    server, channel = await start(load=False)
    h = Harness(server, channel)
    try:
        assert await h.status() == health_pb2.HealthCheckResponse.NOT_SERVING
        replies = await h.exchange(headers_msg(), body_msg(chat("hi")))
        assert replies[-1].immediate_response.status.code == 503
        await server.load()
        assert await h.status() == health_pb2.HealthCheckResponse.SERVING
    finally:
        await channel.close()
        await server.stop()


async def test_large_image_sized_body_round_trips() -> None:
    server, channel = await start()
    try:
        big = chat("x" * (12 * 1024 * 1024))
        replies = await Harness(server, channel).exchange(headers_msg(), body_msg(big))
        assert len(replies[1].request_body.response.body_mutation.body) >= 12 * 1024 * 1024
    finally:
        await channel.close()
        await server.stop()


def slow_down(router: CountingRouter) -> None:
    real = router.route

    async def slow(
        body: bytes, *, path: str = CHAT, request_id: str | None = None, received: float | None = None
    ) -> RoutingOutcome:
        await asyncio.sleep(0.5)
        return await real(body, path=path, request_id=request_id, received=received)

    router.route = slow  # type: ignore[method-assign]


async def test_shutdown_drains_in_flight_streams() -> None:
    server, channel = await start(adapt=slow_down)
    h = Harness(server, channel)
    try:
        in_flight = asyncio.create_task(h.exchange(headers_msg(), body_msg(chat("hi"))))
        await asyncio.sleep(0.2)  # the router is now busy with it
        stopping = asyncio.create_task(server.stop())
        replies = await in_flight
        await stopping
        assert replies[1].request_body.response.body_mutation.body  # finished, not cut off
    finally:
        await channel.close()


# -- the one-message flow: only the buffered body, with Envoy's attributes -----------------------


def body_only_msg(body: bytes, path: str = CHAT, request_id: str = "rid-7", debug: str | None = None) -> Any:
    from google.protobuf import struct_pb2

    message = ep.ProcessingRequest(request_body=ep.HttpBody(body=body, end_of_stream=True))
    attributes = struct_pb2.Struct()
    attributes.update({"request.path": path, "request.method": "POST", "request.id": request_id})
    message.attributes["envoy.filters.http.ext_proc"].CopyFrom(attributes)
    if debug is not None:
        message.metadata_context.filter_metadata["vsr.request"].update({"debug": debug})
    return message


def decision_of(reply: Any) -> dict[str, Any]:
    from google.protobuf import json_format

    metadata: dict[str, Any] = json_format.MessageToDict(reply.dynamic_metadata)
    return metadata["vsr"]


async def test_one_message_routes_with_decision_metadata(harness: Harness) -> None:
    replies = await harness.exchange(body_only_msg(chat("find the bug")))
    assert [r.WhichOneof("response") for r in replies] == ["request_body"]
    common = replies[0].request_body.response
    assert common.clear_route_cache
    assert json.loads(common.body_mutation.body)["model"] == "Qwen/Qwen2.5-VL-32B-Instruct"
    assert decision_of(replies[0]) == {
        "cluster": "code_security",
        "decision": "code_security_review",
        "model": "code-security",
        "signals": "code_present,code_review_words",
    }
    router = harness.server.service.router
    assert isinstance(router, CountingRouter) and router.calls == [CHAT]


async def test_one_message_reads_the_api_from_the_path_attribute(harness: Harness) -> None:
    responses_body = json.dumps({"model": "auto", "input": "find the bug"}).encode()
    replies = await harness.exchange(body_only_msg(responses_body, path="/v1/responses/"))
    assert decision_of(replies[0])["decision"] == "code_security_review"
    router = harness.server.service.router
    assert isinstance(router, CountingRouter) and router.calls == ["/v1/responses"]  # canonical


async def test_one_message_debug_trace_comes_from_client_metadata(harness: Harness) -> None:
    traced = await harness.exchange(body_only_msg(chat("find the bug"), debug="true"))
    assert "code_security_review=t" in decision_of(traced[0])["trace"]
    plain = await harness.exchange(body_only_msg(chat("find the bug")))
    assert "trace" not in decision_of(plain[0])


async def test_one_message_debug_ignored_when_settings_disable_it() -> None:
    server, channel = await start(debug=False)
    try:
        replies = await Harness(server, channel).exchange(body_only_msg(chat("find the bug"), debug="true"))
        assert "trace" not in decision_of(replies[0])
    finally:
        await channel.close()
        await server.stop()


async def test_one_message_reject_is_immediate(harness: Harness) -> None:
    replies = await harness.exchange(body_only_msg(chat("jailbreak please")))
    immediate = replies[0].immediate_response
    assert immediate.status.code == 403
    assert set_headers(immediate.headers)["x-vsr-decision"] == "jailbreak_block"


async def test_one_message_for_a_path_we_do_not_route_is_left_untouched(harness: Harness) -> None:
    replies = await harness.exchange(body_only_msg(b'{"input": "x"}', path="/v1/embeddings"))
    common = replies[0].request_body.response
    assert not common.HasField("body_mutation") and not common.HasField("header_mutation")
    assert not replies[0].HasField("dynamic_metadata")
    router = harness.server.service.router
    assert isinstance(router, CountingRouter) and router.calls == []


async def test_a_settle_asked_for_while_streams_run_waits_for_the_last_to_end(harness: Harness) -> None:
    """A model loaded on first use, or a reload, asks for the heap to be frozen; freezing while
    requests are in flight would make their cyclic garbage immortal, so it waits."""
    import gc

    try:
        harness.server.settler.request("model test loaded")
        call = harness.stub.Process()
        await call.write(body_only_msg(chat("hello")))
        assert (await call.read()).HasField("request_body")
        assert harness.server.settler.pending == "model test loaded"  # a stream is still open
        await call.done_writing()
        assert await call.read() is grpc.aio.EOF
        for _ in range(100):
            if harness.server.settler.pending is None:
                break
            await asyncio.sleep(0.02)
        assert harness.server.settler.pending is None and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
