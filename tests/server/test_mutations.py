from __future__ import annotations

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
