"""OpenTelemetry traces of the ext_proc streams: the real servicer over a real in-process gRPC channel
with a real Router over a small keyword policy (as tests/server/test_grpc_service.py), spans caught
by the SDK's in-memory exporter; one test against a real OTLP/gRPC receiver, one through Envoy."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from extproc.observability.tracing import ROOT_SPAN, build_tracer
from extproc.ops.envoy_config import EnvoyTracing
from extproc.server.app import ExtProcServer
from extproc.settings import Settings, TracingSettings
from tests.server.test_grpc_service import (
    POLICY,
    body_msg,
    body_only_msg,
    chat,
    crash_on_route,
    headers_msg,
    response_headers_msg,
    start,
)

REPO = Path(__file__).resolve().parents[2]
# Words no attribute may carry: the prompt's own text (a "bug" report with a key-like string).
SECRET_WORDS = ("zebra-quartz", "AKIAQ7Z3X5R2LMNPT4VW", "find the bug")
PROMPT = "find the bug near zebra-quartz AKIAQ7Z3X5R2LMNPT4VW"
CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
ENVOY_SPAN = "00f067aa0ba902b7"


def traceparent(span: str = CLIENT_SPAN, trace: str = CLIENT_TRACE, flags: str = "01") -> str:
    return f"00-{trace}-{span}-{flags}"


class Traced:
    """A server whose servicer traces into an in-memory exporter, and a raw ext_proc client."""

    def __init__(self, server: ExtProcServer, channel: grpc.aio.Channel, exporter: InMemorySpanExporter) -> None:
        self.server = server
        self.channel = channel
        self.exporter = exporter

    async def exchange(self, *messages: Any, metadata: Sequence[tuple[str, str]] = ()) -> list[Any]:
        """Like Envoy: one message at a time, each after the previous answer; then the stream closes."""
        from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc

        call = ep_grpc.ExternalProcessorStub(self.channel).Process(metadata=tuple(metadata) or None)
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
        assert await call.code() == grpc.StatusCode.OK  # the stream is over: the server has emitted its spans
        return replies

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


async def traced_server(**tracing: Any) -> Traced:
    server, channel = await start()
    exporter = InMemorySpanExporter()
    tracer = build_tracer(TracingSettings(enabled=True, **tracing), exporter=exporter)
    server.tracer = server.service.tracer = tracer
    return Traced(server, channel, exporter)


@pytest.fixture
async def traced() -> AsyncIterator[Traced]:
    t = await traced_server()
    yield t
    await t.channel.close()
    await t.server.stop()


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in spans}


def root_of(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    [root] = [s for s in spans if s.name == ROOT_SPAN]
    return root


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def assert_no_request_content(spans: Sequence[ReadableSpan]) -> None:
    for span in spans:
        texts = [span.name] + [
            item
            for value in (span.attributes or {}).values()
            for item in (value if isinstance(value, tuple) else (value,))
        ]
        texts += [e.name for e in span.events] + [str(v) for e in span.events for v in (e.attributes or {}).values()]
        for text in texts:
            for word in SECRET_WORDS:
                assert word.lower() not in str(text).lower(), (span.name, text)


# -- one routed request ---------------------------------------------------------------------------


async def test_routed_request_is_one_root_span_with_stage_and_signal_children(traced: Traced) -> None:
    replies = await traced.exchange(body_only_msg(chat(PROMPT)))
    assert json.loads(replies[0].request_body.response.body_mutation.body)["model"] == "Qwen/Qwen2.5-VL-32B-Instruct"
    spans = traced.spans()
    root = root_of(spans)
    names = by_name(spans)
    assert set(names) == {
        ROOT_SPAN,
        "vsr.parse",
        "vsr.signals",
        "vsr.decide",
        "vsr.signal jailbreak",
        "vsr.signal code_present",
        "vsr.signal code_review_words",
    }
    assert len(spans) == len(names)  # one of each: one stream, one root
    assert root.parent is None and root.kind is SpanKind.SERVER  # no context supplied: a new trace
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    for stage in ("vsr.parse", "vsr.signals", "vsr.decide"):
        assert parent_id(names[stage]) == root.context.span_id
    for signal in ("jailbreak", "code_present", "code_review_words"):
        assert parent_id(names[f"vsr.signal {signal}"]) == names["vsr.signals"].context.span_id

    router = traced.server.service.router
    assert router is not None
    attrs = dict(root.attributes or {})
    assert attrs["vsr.decision"] == "code_security_review"
    assert attrs["vsr.action"] == "route"
    assert attrs["vsr.model"] == "code-security"
    assert attrs["vsr.cluster"] == "code_security"
    assert attrs["vsr.policy_version"] == router.policy.version
    assert attrs["vsr.status"] == 200
    assert attrs["vsr.flow"] == "one_message"
    assert attrs["vsr.request_id"] == "rid-7"
    assert attrs["vsr.api_path"] == "/v1/chat/completions"
    assert tuple(attrs["vsr.signals.matched"]) == ("code_present", "code_review_words")  # type: ignore[arg-type]
    assert root.status.status_code is StatusCode.UNSET

    matched = dict(names["vsr.signal code_present"].attributes or {})
    assert matched["vsr.signal.status"] == "matched" and matched["vsr.signal.score"] == 1.0
    assert matched["vsr.signal.type"] == "keyword"
    unmatched = dict(names["vsr.signal jailbreak"].attributes or {})
    assert unmatched["vsr.signal.status"] == "not_matched" and unmatched["vsr.signal.score"] == 0.0
    assert dict(names["vsr.decide"].attributes or {})["vsr.decision"] == "code_security_review"

    # The stages lie end to end inside the root; each signal inside its stage.
    assert root.start_time is not None and root.end_time is not None
    order = [names[s] for s in ("vsr.parse", "vsr.signals", "vsr.decide")]
    assert root.start_time <= order[0].start_time  # type: ignore[operator]
    for earlier, later in itertools.pairwise(order):
        assert earlier.end_time == later.start_time
    assert order[-1].end_time <= root.end_time  # type: ignore[operator]
    signals = names["vsr.signals"]
    for signal in ("jailbreak", "code_present", "code_review_words"):
        span = names[f"vsr.signal {signal}"]
        assert span.start_time == signals.start_time and span.end_time <= signals.end_time  # type: ignore[operator]

    assert_no_request_content(spans)


async def test_three_message_stage_spans_come_after_the_decision_the_root_at_stream_close(traced: Traced) -> None:
    from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc

    call = ep_grpc.ExternalProcessorStub(traced.channel).Process()
    for message in (headers_msg(), body_msg(chat("find the bug"))):
        await call.write(message)
        await call.read()
    # The decision is out; the upstream is still answering. The router's spans are done (and the
    # outcome, with the request body, let go); the stream's span is not.
    for _ in range(100):
        if "vsr.decide" in by_name(traced.spans()):
            break
        await asyncio.sleep(0.01)
    assert set(by_name(traced.spans())) >= {"vsr.parse", "vsr.signals", "vsr.decide"}
    assert ROOT_SPAN not in by_name(traced.spans())
    await call.write(response_headers_msg())
    await call.read()
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK
    spans = traced.spans()
    root = root_of(spans)
    assert dict(root.attributes or {})["vsr.decision"] == "code_security_review"
    assert by_name(spans)["vsr.decide"].end_time <= root.end_time  # type: ignore[operator]
    assert parent_id(by_name(spans)["vsr.decide"]) == root.context.span_id


async def test_no_request_content_in_any_attribute_for_every_outcome(traced: Traced) -> None:
    await traced.exchange(headers_msg(), body_msg(chat(PROMPT)), response_headers_msg())  # routed, three messages
    await traced.exchange(body_only_msg(chat("jailbreak " + PROMPT)))  # rejected
    await traced.exchange(body_only_msg(b'{"model": "auto", "messages": "' + PROMPT.encode() + b'"'))  # malformed
    spans = traced.spans()
    assert len([s for s in spans if s.name == ROOT_SPAN]) == 3
    assert_no_request_content(spans)


async def test_reject_and_malformed_requests(traced: Traced) -> None:
    await traced.exchange(body_only_msg(chat("jailbreak please")))
    rejected = root_of(traced.spans())
    attrs = dict(rejected.attributes or {})
    assert (attrs["vsr.action"], attrs["vsr.decision"], attrs["vsr.status"]) == ("reject", "jailbreak_block", 403)
    assert rejected.status.status_code is StatusCode.UNSET  # a policy refusal is not a server fault
    traced.exporter.clear()

    await traced.exchange(body_only_msg(b"{nope"))
    spans = traced.spans()
    malformed = root_of(spans)
    attrs = dict(malformed.attributes or {})
    assert (attrs["vsr.action"], attrs["vsr.status"], attrs["vsr.error_code"]) == ("error", 400, "invalid_json")
    assert {s.name for s in spans} == {ROOT_SPAN, "vsr.route"}  # no stages ran: one span for the attempt


async def test_a_router_crash_marks_the_root_span_as_an_error() -> None:
    server, channel = await start(adapt=crash_on_route)
    exporter = InMemorySpanExporter()
    server.tracer = server.service.tracer = build_tracer(TracingSettings(enabled=True), exporter=exporter)
    try:
        await Traced(server, channel, exporter).exchange(body_only_msg(chat("hi")))
        root = root_of(exporter.get_finished_spans())
        assert root.status.status_code is StatusCode.ERROR
        assert dict(root.attributes or {})["vsr.failure"] == "internal_error"
    finally:
        await channel.close()
        await server.stop()


# -- joining the request's trace ------------------------------------------------------------------


async def test_three_message_flow_traceparent_header_is_the_parent(traced: Traced) -> None:
    extra = [("traceparent", traceparent()), ("tracestate", "vendor=abc")]
    await traced.exchange(headers_msg(extra=extra), body_msg(chat("find the bug")), response_headers_msg())
    spans = traced.spans()
    root = root_of(spans)
    assert root.parent is not None and root.parent.is_remote
    assert root.parent.span_id == int(CLIENT_SPAN, 16)
    assert {s.context.trace_id for s in spans} == {int(CLIENT_TRACE, 16)}
    assert root.context.trace_state.get("vendor") == "abc"
    assert dict(root.attributes or {})["vsr.flow"] == "three_messages"


async def test_one_message_flow_vsr_request_metadata_traceparent_is_the_parent(traced: Traced) -> None:
    message = body_only_msg(chat("find the bug"))
    message.metadata_context.filter_metadata["vsr.request"].update({"traceparent": traceparent()})
    await traced.exchange(message)
    root = root_of(traced.spans())
    assert root.parent is not None and root.parent.span_id == int(CLIENT_SPAN, 16)
    assert root.context.trace_id == int(CLIENT_TRACE, 16)


async def test_envoy_grpc_metadata_traceparent_is_the_parent_and_wins_over_the_client(traced: Traced) -> None:
    # Envoy, tracing, sends its ext_proc span's context on the gRPC call (a child of the client's).
    envoy = [("traceparent", traceparent(ENVOY_SPAN)), ("tracestate", "")]
    await traced.exchange(body_only_msg(chat("find the bug")), metadata=envoy)
    root = root_of(traced.spans())
    assert root.parent is not None and root.parent.span_id == int(ENVOY_SPAN, 16)
    traced.exporter.clear()

    client = [("traceparent", traceparent(CLIENT_SPAN))]
    await traced.exchange(
        headers_msg(extra=client), body_msg(chat("find the bug")), response_headers_msg(), metadata=envoy
    )
    root = root_of(traced.spans())
    assert root.parent is not None and root.parent.span_id == int(ENVOY_SPAN, 16)


async def test_an_unsampled_parent_records_nothing_and_a_malformed_one_starts_a_trace(traced: Traced) -> None:
    await traced.exchange(body_only_msg(chat("find the bug")), metadata=[("traceparent", traceparent(flags="00"))])
    assert traced.spans() == []
    await traced.exchange(body_only_msg(chat("find the bug")), metadata=[("traceparent", "00-nonsense")])
    root = root_of(traced.spans())
    assert root.parent is None


async def test_sample_ratio_zero_records_new_traces_never_but_follows_a_sampled_parent() -> None:
    t = await traced_server(sample_ratio=0.0)
    try:
        await t.exchange(body_only_msg(chat("find the bug")))
        assert t.spans() == []
        await t.exchange(body_only_msg(chat("find the bug")), metadata=[("traceparent", traceparent())])
        assert root_of(t.spans()).context.trace_id == int(CLIENT_TRACE, 16)
    finally:
        await t.channel.close()
        await t.server.stop()


# -- settings -------------------------------------------------------------------------------------


def test_settings_section_and_service_name(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings.load(None, environ={})
    assert settings.tracing.enabled is False and build_tracer(settings.tracing) is None
    loaded = Settings.load(
        None,
        environ={
            "VSR_TRACING__ENABLED": "true",
            "VSR_TRACING__EXPORTER": "otlp_http",
            "VSR_TRACING__ENDPOINT": "http://collector:4318/v1/traces",
            "VSR_TRACING__SAMPLE_RATIO": "0.25",
        },
    )
    assert loaded.tracing == TracingSettings(
        enabled=True, exporter="otlp_http", endpoint="http://collector:4318/v1/traces", sample_ratio=0.25
    )

    def service_name(**fields: Any) -> str:
        exporter = InMemorySpanExporter()
        tracer = build_tracer(TracingSettings(enabled=True, **fields), exporter=exporter)
        assert tracer is not None
        tracer.finish(tracer.begin(None), path="", request_id=None)
        [span] = exporter.get_finished_spans()
        return str(span.resource.attributes["service.name"])

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    assert service_name() == "vsr-extproc"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    assert service_name() == "from-env"
    assert service_name(service_name="from-settings") == "from-settings"


TRACING_OFF_SCRIPT = """
import asyncio, sys
from tests.server.test_grpc_service import Harness, body_only_msg, chat, start

async def main():
    server, channel = await start()
    assert server.tracer is None and server.service.tracer is None
    replies = await Harness(server, channel).exchange(body_only_msg(chat("find the bug")))
    assert replies[0].request_body.response.body_mutation.body
    await channel.close()
    await server.stop()

asyncio.run(main())
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
print("OTEL_MODULES", loaded)
sys.exit(1 if loaded else 0)
"""


def test_tracing_off_imports_nothing_from_opentelemetry() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(TRACING_OFF_SCRIPT)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OTEL_MODULES []" in proc.stdout


# -- a real OTLP/gRPC receiver --------------------------------------------------------------------


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """A tiny OTLP/gRPC collector: keeps (service name, span name, trace id, span id, parent id)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str, str, str]] = []
        self.lock = threading.Lock()

    def Export(self, request: Any, context: Any) -> Any:
        with self.lock:
            for resource_spans in request.resource_spans:
                service = next(
                    (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
                )
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            (service, span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex())
                        )
        return trace_service_pb2.ExportTraceServiceResponse()

    def wait_for(self, predicate: Any, timeout: float) -> list[tuple[str, str, str, str, str]]:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                spans = list(self.spans)
            if predicate(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.1)


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, int]]:
    servicer = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(0)


async def test_spans_reach_a_real_otlp_grpc_receiver(receiver: tuple[Receiver, int]) -> None:
    collector, port = receiver
    server, channel = await start()
    settings = TracingSettings(
        enabled=True, exporter="otlp_grpc", endpoint=f"http://127.0.0.1:{port}", service_name="vsr-test"
    )
    server.tracer = server.service.tracer = build_tracer(settings)  # batched, exported in the background
    try:
        exchange = Traced(server, channel, InMemorySpanExporter()).exchange
        await exchange(body_only_msg(chat("find the bug")), metadata=[("traceparent", traceparent())])
    finally:
        await channel.close()
        await server.stop()  # flushes the batch
    spans = collector.wait_for(lambda s: len(s) >= 7, timeout=10)
    assert {name for _, name, *_ in spans} >= {ROOT_SPAN, "vsr.parse", "vsr.signals", "vsr.decide"}
    assert {service for service, *_ in spans} == {"vsr-test"}
    assert {trace for _, _, trace, *_ in spans} == {CLIENT_TRACE}
    [root] = [s for s in spans if s[1] == ROOT_SPAN]
    assert root[4] == CLIENT_SPAN


# -- through Envoy: its ext_proc span is the server's parent --------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_envoy_tracing_joins_the_server_spans_to_the_request_trace(
    tmp_path: Path, receiver: tuple[Receiver, int]
) -> None:
    from tests.integration.conftest import running_stack, stack_config

    collector, port = receiver
    policy = tmp_path / "keywords.yaml"
    policy.write_text(POLICY.replace("upstream_model:", "address: '127.0.0.1:9', upstream_model:"))  # overridden
    config = stack_config(
        policy,
        VSR_TRACING__ENABLED="true",
        VSR_TRACING__ENDPOINT=f"http://127.0.0.1:{port}",
        VSR_TRACING__SERVICE_NAME="vsr-extproc",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    config.envoy = dataclasses.replace(config.envoy, tracing=EnvoyTracing(collector_port=port))
    with running_stack(config) as stack:
        reply = httpx.post(
            stack.base_url + "/v1/chat/completions",
            content=chat("find the bug"),
            headers={"content-type": "application/json", "traceparent": traceparent()},
            timeout=30,
        )
        assert reply.status_code == 200 and reply.headers["x-vsr-decision"] == "code_security_review"

        def complete(spans: list[tuple[str, str, str, str, str]]) -> bool:
            names = {name for _, name, *_ in spans}
            return ROOT_SPAN in names and any("ExternalProcessor" in n and "egress" in n for n in names)

        spans = collector.wait_for(complete, timeout=20)  # Envoy flushes its spans every 5 s
    assert complete(spans), spans
    ours = {s[3]: s for s in spans if s[0] == "vsr-extproc"}
    envoy = {s[3]: s for s in spans if s[0] == "envoy"}
    [root] = [s for s in ours.values() if s[1] == ROOT_SPAN]
    egress = envoy[root[4]]  # the server's root hangs under Envoy's ext_proc client span
    assert "ExternalProcessor" in egress[1]
    ingress = envoy[egress[4]]  # which hangs under Envoy's request span
    assert ingress[4] == CLIENT_SPAN  # which continues the client's trace
    assert {s[2] for s in (root, egress, ingress)} == {CLIENT_TRACE}


@pytest.mark.integration
@pytest.mark.slow
def test_the_standard_otel_variables_alone_trace_a_stack_under_the_callers_trace(
    tmp_path: Path, receiver: tuple[Receiver, int]
) -> None:
    """What an operator does: the OTEL_* variables on a stack started like `make run` (default
    render options, no Envoy tracing, no VSR_TRACING__*), and a client that sends traceparent."""
    from tests.integration.conftest import running_stack, stack_config

    collector, port = receiver
    policy = tmp_path / "keywords.yaml"
    policy.write_text(POLICY.replace("upstream_model:", "address: '127.0.0.1:9', upstream_model:"))  # overridden
    config = stack_config(
        policy,
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_SERVICE_NAME="vsr-otel-env",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    assert config.envoy.tracing is None and not any(k.startswith("VSR_TRACING") for k in config.env)
    with running_stack(config) as stack:
        reply = httpx.post(
            stack.base_url + "/v1/chat/completions",
            content=chat("find the bug"),
            headers={"content-type": "application/json", "traceparent": traceparent()},
            timeout=30,
        )
        assert reply.status_code == 200 and reply.headers["x-vsr-decision"] == "code_security_review"
        spans = collector.wait_for(lambda s: any(span[1] == ROOT_SPAN for span in s), timeout=20)
    ours = [s for s in spans if s[0] == "vsr-otel-env"]
    [root] = [s for s in ours if s[1] == ROOT_SPAN]
    assert root[2] == CLIENT_TRACE and root[4] == CLIENT_SPAN  # hangs under the caller's span
    assert {name for _, name, *_ in ours} >= {ROOT_SPAN, "vsr.parse", "vsr.signals", "vsr.decide"}


@pytest.mark.parametrize(
    ("environ", "enabled", "exporter"),
    [
        ({}, False, "otlp_grpc"),  # nothing set: off, as before
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True, "otlp_grpc"),  # the Python SDK's default protocol
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, True, "otlp_http"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, True, "otlp_grpc"),
        (
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            True,
            "otlp_http",
        ),  # the traces-specific variable wins
        ({"OTEL_TRACES_EXPORTER": "console"}, True, "console"),
        # Off switches win over everything, ours included.
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False, "otlp_grpc"),
        ({"VSR_TRACING__ENABLED": "true", "OTEL_SDK_DISABLED": "TRUE"}, False, "otlp_grpc"),
        ({"VSR_TRACING__ENABLED": "true", "OTEL_TRACES_EXPORTER": "none"}, False, "otlp_grpc"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_TRACES_EXPORTER": "none"}, False, "otlp_grpc"),
        # What our settings say explicitly wins over the OTEL_* defaults.
        ({"OTEL_TRACES_EXPORTER": "otlp", "VSR_TRACING__ENABLED": "false"}, False, "otlp_grpc"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "VSR_TRACING__EXPORTER": "console"}, True, "console"),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, True, "otlp_grpc"),
    ],
)
def test_the_standard_otel_variables_turn_tracing_on_and_off(
    environ: dict[str, str], enabled: bool, exporter: str
) -> None:
    tracing = Settings.load(None, environ=environ).tracing
    assert (tracing.enabled, tracing.exporter) == (enabled, exporter)
    if not enabled:
        assert build_tracer(tracing) is None  # off: no tracer, nothing of OpenTelemetry imported for it


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER='zipkin'"),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "OTEL_TRACES_EXPORTER='otlp,console'"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
    ],
)
def test_an_otel_variable_we_cannot_honour_is_a_clear_error(environ: dict[str, str], named: str) -> None:
    from extproc.settings import SettingsError

    with pytest.raises(SettingsError, match=named.replace("(", r"\(")) as caught:
        Settings.load(None, environ=environ)
    assert "Traceback" not in str(caught.value)


def test_tracing_settings_reject_a_bad_ratio() -> None:
    from extproc.settings import SettingsError

    with pytest.raises(SettingsError, match=r"tracing\.sample_ratio"):
        Settings.load(None, environ={"VSR_TRACING__SAMPLE_RATIO": "2"})


async def test_finish_never_raises(traced: Traced) -> None:
    tracer = traced.server.service.tracer
    assert tracer is not None
    stream = tracer.begin(None)
    stream.started_ns = -1  # nonsense times: the SDK may refuse them; the request must not notice
    stream.outcome = "not an outcome"  # type: ignore[assignment]
    tracer.finish(stream, path="/x", request_id=None)
    await asyncio.sleep(0)


# -- the Envoy option -----------------------------------------------------------------------------


def _copied_trace_rules(full: str) -> dict[str, Any]:
    import yaml

    hcm = yaml.safe_load(full)["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    rules = hcm["http_filters"][0]["typed_config"]["request_rules"]
    return {r["header"]: r for r in rules if r["header"] in ("traceparent", "tracestate")}


def test_envoy_tracing_option_renders_a_valid_config_and_is_off_by_default(tmp_path: Path) -> None:
    import yaml

    from extproc.ops.envoy_config import EnvoyOptions, envoy_binary, render

    policy = REPO / "policies" / "default.yaml"
    plain, plain_snippet = render(policy)
    assert "tracing" not in plain and "otel_collector" not in plain
    assert "tracing" not in plain_snippet
    # The client's trace context reaches the server by default (no render option), copied: the
    # upstream still gets the headers. Off on request.
    copied = _copied_trace_rules(plain)
    assert set(copied) == {"traceparent", "tracestate"} and all(not r.get("remove") for r in copied.values())
    assert _copied_trace_rules(render(policy, EnvoyOptions(forward_trace_context=False))[0]) == {}

    options = EnvoyOptions(
        tracing=EnvoyTracing(collector_host="otel.observability", collector_port=4317, sample_percent=10.0),
        forward_trace_context=True,
    )
    full, snippet = render(policy, options)
    doc = yaml.safe_load(full)
    hcm = doc["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    provider = hcm["tracing"]["provider"]
    assert provider["name"] == "envoy.tracers.opentelemetry"
    assert provider["typed_config"]["grpc_service"]["envoy_grpc"]["cluster_name"] == "otel_collector"
    assert hcm["tracing"]["random_sampling"]["value"] == 10.0
    [collector] = [c for c in doc["static_resources"]["clusters"] if c["name"] == "otel_collector"]
    assert collector["type"] == "STRICT_DNS"  # a hostname
    rules = hcm["http_filters"][0]["typed_config"]["request_rules"]
    copied = {r["header"]: r for r in rules if r["header"] in ("traceparent", "tracestate")}
    assert set(copied) == {"traceparent", "tracestate"}
    assert all(not r.get("remove", False) for r in copied.values())  # copied: the upstream still gets them
    assert copied["traceparent"]["on_header_present"]["metadata_namespace"] == "vsr.request"
    snippet_doc = yaml.safe_load(snippet)
    assert snippet_doc["tracing"] == hcm["tracing"]
    assert collector in snippet_doc["clusters"]

    path = tmp_path / "envoy.yaml"
    path.write_text(full)
    proc = subprocess.run(
        [str(envoy_binary()), "--mode", "validate", "-c", str(path), "--use-dynamic-base-id", "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("exporter", ["otlp_grpc", "otlp_http", "console", "none"])
def test_every_exporter_kind_builds_and_shuts_down(exporter: str) -> None:
    tracer = build_tracer(TracingSettings(enabled=True, exporter=exporter, endpoint=None))
    assert tracer is not None
    tracer.shutdown()  # nothing queued: no network
