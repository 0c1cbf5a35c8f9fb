"""Envoy's ext_proc messages <-> the server's plain values, in one place: the core's outcome ->
`ProcessingResponse` messages, and what the phases read from a `ProcessingRequest` (header
values, the response status, dynamic metadata, attributes).

Wire messages are `xds-protos`' generated classes (upb backend): parsing and building them
costs about a microsecond, where the betterproto2 dataclasses cost ~150 us a message.
Every header we set uses OVERWRITE_IF_EXISTS_OR_ADD, never append: a client must not be able
to smuggle a second value of a routing header past us.

The one-message flow (the shipped Envoy config sends only the buffered body): Envoy has already
let the request headers pass, so a header mutation in the body response cannot be applied. The
routing decision travels as dynamic metadata in the `vsr` namespace instead (`cluster`,
`decision`, `model`, `signals`, `trace`, and the decision's plugin `headers`); Envoy's routes
match `vsr.cluster` and copy the rest onto the upstream request and the client's response. A
header mutation is still sent: Envoy applies it when it did send headers (the three-message
flow) and, in Envoy 1.40, only a response carrying one clears the route cache, which the route
re-selection on `vsr.cluster` needs. Only this server can write `vsr`: the filter accepts that
namespace from us (`receiving_namespaces`), and nothing a client sends reaches it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from envoy.type.v3 import http_status_pb2
from google.protobuf import json_format, struct_pb2

from extproc import headers as vsr

_OVERWRITE = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD

# Headers Envoy will not let an ext_proc server change, or that must not cross into an
# immediate response: dropped rather than sent and rejected.
_RESERVED = frozenset({"host", ":authority", ":method", ":path", ":scheme", ":status", "transfer-encoding"})

# A mode override for requests we do not route: no body, no response headers.
PASS_THROUGH_MODE = processing_mode_pb2.ProcessingMode(
    request_body_mode=processing_mode_pb2.ProcessingMode.NONE,
    response_header_mode=processing_mode_pb2.ProcessingMode.SKIP,
    response_body_mode=processing_mode_pb2.ProcessingMode.NONE,
    request_trailer_mode=processing_mode_pb2.ProcessingMode.SKIP,
    response_trailer_mode=processing_mode_pb2.ProcessingMode.SKIP,
)


def header_mutation(set_headers: Mapping[str, str] | None = None, remove: Iterable[str] = ()) -> ep.HeaderMutation:
    """Set (overwrite) and remove headers. Header names are lower-cased, as Envoy keeps them."""
    mutation = ep.HeaderMutation()
    if set_headers:
        for key, value in set_headers.items():
            name = key.lower()
            if name in _RESERVED:
                continue
            mutation.set_headers.append(
                base_pb2.HeaderValueOption(
                    header=base_pb2.HeaderValue(key=name, raw_value=_clean(value).encode()),
                    append_action=_OVERWRITE,
                )
            )
    mutation.remove_headers.extend(remove)
    return mutation


def _clean(value: str) -> str:
    """A header value Envoy accepts: no control characters (CR/LF would be refused)."""
    if value.isprintable():
        return value
    return "".join(ch if ch.isprintable() else " " for ch in value)


def continue_request_headers(
    remove: Iterable[str] = (), *, clear_route_cache: bool = False, pass_through: bool = False
) -> ep.ProcessingResponse:
    """Let the request go on after its headers; strip `remove`; optionally stop processing it."""
    common = ep.CommonResponse()
    removed = list(remove)
    if removed:
        common.header_mutation.CopyFrom(header_mutation(remove=removed))
    if clear_route_cache:
        common.clear_route_cache = True
    response = ep.ProcessingResponse(request_headers=ep.HeadersResponse(response=common))
    if pass_through:
        response.mode_override.CopyFrom(PASS_THROUGH_MODE)
    return response


def route_request_headers(set_headers: Mapping[str, str], remove: Iterable[str] = ()) -> ep.ProcessingResponse:
    """Route a request that has no body: set the routing headers at the headers phase."""
    common = ep.CommonResponse(header_mutation=header_mutation(set_headers, remove), clear_route_cache=True)
    return ep.ProcessingResponse(request_headers=ep.HeadersResponse(response=common))


def route_request_body(
    set_headers: Mapping[str, str], body: bytes, decision: Mapping[str, object] | None = None
) -> ep.ProcessingResponse:
    """Route a buffered body: routing headers (three-message flow) and the decision as dynamic
    metadata (one-message flow), the rewritten body with its new length, a new route."""
    headers = dict(set_headers)
    headers["content-length"] = str(len(body))
    common = ep.CommonResponse(
        header_mutation=header_mutation(headers),
        body_mutation=ep.BodyMutation(body=body),
        clear_route_cache=True,
    )
    response = ep.ProcessingResponse(request_body=ep.BodyResponse(response=common))
    if decision:
        response.dynamic_metadata.CopyFrom(metadata_struct(decision))
    return response


def metadata_struct(decision: Mapping[str, object]) -> struct_pb2.Struct:
    """`{vsr: decision}` as Envoy's dynamic metadata; string values cleaned like header values."""
    cleaned = {
        key: ({k: _clean(str(v)) for k, v in value.items()} if isinstance(value, Mapping) else _clean(str(value)))
        for key, value in decision.items()
    }
    metadata = struct_pb2.Struct()
    metadata.update({vsr.DECISION_NAMESPACE: cleaned})
    return metadata


def continue_request_body() -> ep.ProcessingResponse:
    return ep.ProcessingResponse(request_body=ep.BodyResponse(response=ep.CommonResponse()))


def response_headers(set_headers: Mapping[str, str], remove: Iterable[str] = ()) -> ep.ProcessingResponse:
    """Add our headers to what the client gets back from the upstream (and drop `remove`)."""
    common = ep.CommonResponse()
    if set_headers or remove:
        common.header_mutation.CopyFrom(header_mutation(set_headers, remove))
    return ep.ProcessingResponse(response_headers=ep.HeadersResponse(response=common))


def response_headers_replacing_body(set_headers: Mapping[str, str], body: bytes) -> ep.ProcessingResponse:
    """Answer an upstream response that has headers only with a body of ours (CONTINUE_AND_REPLACE)."""
    common = ep.CommonResponse(status=ep.CommonResponse.CONTINUE_AND_REPLACE)
    common.header_mutation.CopyFrom(header_mutation({**set_headers, "content-length": str(len(body))}))
    common.body_mutation.CopyFrom(ep.BodyMutation(body=body))
    return ep.ProcessingResponse(response_headers=ep.HeadersResponse(response=common))


def continue_phase(phase: str) -> ep.ProcessingResponse:
    """A no-op answer for a phase we did not ask for (trailers, bodies) so Envoy never waits."""
    response = ep.ProcessingResponse()
    if phase in ("request_headers", "response_headers"):
        getattr(response, phase).CopyFrom(ep.HeadersResponse())
    elif phase in ("request_body", "response_body"):
        getattr(response, phase).CopyFrom(ep.BodyResponse())
    elif phase in ("request_trailers", "response_trailers"):
        getattr(response, phase).CopyFrom(ep.TrailersResponse())
    return response


def immediate(status: int, headers: Mapping[str, str], body: bytes, details: str = "") -> ep.ProcessingResponse:
    """Answer the client ourselves (reject, clarify, request errors); the upstream is never called."""
    headers = {k.lower(): v for k, v in headers.items()}
    headers.setdefault("content-type", "application/json")
    headers.pop("content-length", None)  # Envoy sets it from the body
    return ep.ProcessingResponse(
        immediate_response=ep.ImmediateResponse(
            status=http_status_pb2.HttpStatus(code=status),
            headers=header_mutation(headers),
            body=body,
            details=_details(details),
        )
    )


def _details(text: str) -> str:
    """Envoy puts `details` in its access log's response-code-details: one token, no spaces, and
    always `vsr_`-prefixed, which is how Envoy's local-reply mappers tell our answers from its own."""
    token = "".join(ch if ch.isalnum() or ch in "_-." else "_" for ch in text)
    if not token.startswith(vsr.SERVER_DETAILS_PREFIX):
        token = vsr.SERVER_DETAILS_PREFIX + (token or "answer")
    return token[:64]


def response_body(
    body: bytes | None, set_headers: Mapping[str, str] | None = None, *, clear: bool = False
) -> ep.ProcessingResponse:
    """Answer one response-body message (tool rules): leave it (None), replace it, or, in a
    stream, hold it (`clear`: the chunk's bytes are not passed on now). Headers only apply
    while the response headers are still held (the buffered mode)."""
    common = ep.CommonResponse()
    if clear:
        common.body_mutation.CopyFrom(ep.BodyMutation(clear_body=True))
    elif body is not None:
        common.body_mutation.CopyFrom(ep.BodyMutation(body=body))
    if set_headers:
        common.header_mutation.CopyFrom(header_mutation(set_headers))
    return ep.ProcessingResponse(response_body=ep.BodyResponse(response=common))


# -- reading Envoy's messages ---------------------------------------------------------------------


def header_value(header: Any) -> str:
    """Envoy sends header values in `raw_value` (bytes); older versions in `value`."""
    raw: bytes = header.raw_value
    return raw.decode("utf-8", "replace") if raw else str(header.value)


def status_and_type(headers: Any) -> tuple[int, str]:
    """The upstream response's status and (lower-cased) content type, from a response-headers message."""
    status, content_type = 0, ""
    for header in headers.headers.headers:
        key = header.key.lower()
        if key == ":status":
            status = int(header_value(header) or 0)
        elif key == "content-type":
            content_type = header_value(header).lower()
    return status, content_type


def metadata_fields(request: Any, namespace: str) -> Mapping[str, Any] | None:
    """A dynamic-metadata namespace Envoy sent with the message (a Struct's fields); None when absent."""
    meta = request.metadata_context.filter_metadata.get(namespace)
    return meta.fields if meta is not None else None


def metadata_strings(request: Any, namespace: str) -> dict[str, str]:
    """A dynamic-metadata namespace's values as strings ({} when Envoy sent none)."""
    fields = metadata_fields(request, namespace)
    return {key: value.string_value for key, value in fields.items()} if fields is not None else {}


def request_attributes(request: Any) -> tuple[str | None, str | None]:
    """The raw request path and the request id from the attributes the one-message filter asks
    for; None where Envoy did not send one (an empty id reads as None)."""
    if vsr.ATTRIBUTES_NAMESPACE not in request.attributes:
        return None, None
    fields = request.attributes[vsr.ATTRIBUTES_NAMESPACE].fields
    path = fields[vsr.REQUEST_PATH].string_value if vsr.REQUEST_PATH in fields else None
    request_id = None
    if vsr.REQUEST_ID_ATTRIBUTE in fields:
        request_id = fields[vsr.REQUEST_ID_ATTRIBUTE].string_value or None
    return path, request_id


def attribute_text(request: Any, name: str) -> str:
    """An attribute the filter asked for, as text ("" when absent; numbers without a fraction)."""
    if vsr.ATTRIBUTES_NAMESPACE not in request.attributes:
        return ""
    value = request.attributes[vsr.ATTRIBUTES_NAMESPACE].fields.get(name)
    if value is None:
        return ""
    if value.HasField("number_value"):
        number = value.number_value
        return str(int(number)) if number == int(number) else str(number)
    return str(value.string_value)


def response_status_attribute(request: Any) -> int:
    """The upstream response's status from the attributes the one-message store filter asks for
    (0 when absent)."""
    if vsr.ATTRIBUTES_NAMESPACE not in request.attributes:
        return 0
    value = request.attributes[vsr.ATTRIBUTES_NAMESPACE].fields.get(vsr.RESPONSE_CODE)
    if value is None:
        return 0
    if value.HasField("number_value"):
        return int(value.number_value)
    text = value.string_value
    return int(text) if text.isdigit() else 0


def describe(response: ep.ProcessingResponse) -> dict[str, Any]:
    """A ProcessingResponse as a reader wants it (`extproc explain`): the immediate answer, or the
    phase's header and body mutations and the dynamic metadata, bodies as text."""
    kind = response.WhichOneof("response")
    if kind == "immediate_response":
        answer = response.immediate_response
        return {
            "kind": kind,
            "status": answer.status.code,
            "headers": {o.header.key: header_value(o.header) for o in answer.headers.set_headers},
            "body": answer.body.decode("utf-8", "replace"),
            "details": answer.details,
        }
    common = getattr(response, kind).response if kind else ep.CommonResponse()
    described: dict[str, Any] = {
        "kind": kind,
        "set_headers": {o.header.key: header_value(o.header) for o in common.header_mutation.set_headers},
        "remove_headers": list(common.header_mutation.remove_headers),
        "body": common.body_mutation.body.decode("utf-8", "replace") if common.HasField("body_mutation") else None,
        "clear_route_cache": common.clear_route_cache,
    }
    if response.HasField("dynamic_metadata"):
        described["dynamic_metadata"] = json_format.MessageToDict(response.dynamic_metadata)
    return described
