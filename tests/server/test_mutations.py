from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from google.protobuf import struct_pb2

from extproc import headers as vsr
from extproc.server import mutations


def test_header_values_are_cleaned_and_reserved_headers_dropped() -> None:
    mutation = mutations.header_mutation({"X-VSR-Trace": "a\r\nb", "host": "evil", ":path": "/x"})
    assert [(o.header.key, o.header.raw_value) for o in mutation.set_headers] == [("x-vsr-trace", b"a  b")]


def test_route_body_sets_content_length() -> None:
    reply = mutations.route_request_body({"x-vsr-cluster": "c"}, b"12345")
    common = reply.request_body.response
    headers = {o.header.key: o.header.raw_value for o in common.header_mutation.set_headers}
    assert headers == {"x-vsr-cluster": b"c", "content-length": b"5"}
    assert common.clear_route_cache
    assert common.body_mutation.body == b"12345"


def test_immediate_defaults_content_type_and_never_sets_length() -> None:
    reply = mutations.immediate(403, {"Content-Length": "3", "x-vsr-decision": "d"}, b"abc", details="vsr reject!")
    immediate = reply.immediate_response
    keys = {o.header.key for o in immediate.headers.set_headers}
    assert keys == {"content-type", "x-vsr-decision"}
    assert immediate.details == "vsr_reject_"


def test_continue_phase_answers_every_phase() -> None:
    for phase in ("request_trailers", "response_trailers", "response_body", "request_body"):
        assert mutations.continue_phase(phase).WhichOneof("response") == phase


# -- reading Envoy's messages ---------------------------------------------------------------------


def _response_headers(*pairs: tuple[str, str]) -> ep.HttpHeaders:
    return ep.HttpHeaders(headers=base_pb2.HeaderMap(headers=[base_pb2.HeaderValue(key=k, value=v) for k, v in pairs]))


def test_header_value_prefers_raw_value_and_falls_back_to_value() -> None:
    assert mutations.header_value(base_pb2.HeaderValue(key="k", raw_value="é".encode())) == "é"
    assert mutations.header_value(base_pb2.HeaderValue(key="k", value="old")) == "old"


def test_status_and_type_from_response_headers() -> None:
    headers = _response_headers((":status", "404"), ("Content-Type", "Text/Event-Stream"))
    assert mutations.status_and_type(headers) == (404, "text/event-stream")
    assert mutations.status_and_type(_response_headers()) == (0, "")


def test_metadata_strings_reads_one_namespace() -> None:
    request = ep.ProcessingRequest()
    request.metadata_context.filter_metadata[vsr.DECISION_NAMESPACE].update({vsr.RESPOND_KEY: "json"})
    assert mutations.metadata_strings(request, vsr.DECISION_NAMESPACE) == {vsr.RESPOND_KEY: "json"}
    assert mutations.metadata_strings(request, vsr.CLIENT_NAMESPACE) == {}
    assert mutations.metadata_fields(request, vsr.CLIENT_NAMESPACE) is None


def test_request_attributes_path_and_id() -> None:
    request = ep.ProcessingRequest()
    assert mutations.request_attributes(request) == (None, None)
    attributes = struct_pb2.Struct()
    attributes.update({vsr.REQUEST_PATH: "/v1/chat/completions", vsr.REQUEST_ID_ATTRIBUTE: ""})
    request.attributes[vsr.ATTRIBUTES_NAMESPACE].CopyFrom(attributes)
    assert mutations.request_attributes(request) == ("/v1/chat/completions", None)  # an empty id is none


def test_response_status_attribute_as_number_or_text() -> None:
    request = ep.ProcessingRequest()
    assert mutations.response_status_attribute(request) == 0
    for value, status in ((200, 200), ("503", 503), ("x", 0)):
        request.attributes[vsr.ATTRIBUTES_NAMESPACE].update({vsr.RESPONSE_CODE: value})
        assert mutations.response_status_attribute(request) == status


def test_every_immediate_answer_names_the_server_in_its_details() -> None:
    # Envoy's local-reply mappers rewrite every local reply without the prefix as Envoy's own.
    assert mutations.immediate(503, {}, b"{}", details="not_ready").immediate_response.details == "vsr_not_ready"
    assert mutations.immediate(200, {}, b"{}").immediate_response.details == "vsr_answer"
    assert mutations.immediate(403, {}, b"{}", details="vsr_reject").immediate_response.details == "vsr_reject"
