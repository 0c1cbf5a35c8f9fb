"""Envoy's own answers on the inference paths, in the API's shape.

Some answers a client can get are Envoy's, not the server's: a body over the buffer limit (413
"Payload Too Large", text/plain), the ext_proc server down (503, empty) or stalled past the
message timeout (504, empty), a model cluster down or timing out (503 / 504 with Envoy's text).
The connection manager's local reply mappers rewrite those into the error JSON of the API the
path speaks: Anthropic's envelope on `/v1/messages`, OpenAI's on the others, with the bodies
built by the same functions the server's own errors use.

The server's immediate answers are local replies to Envoy as well; their response-code details
all start with `vsr_` (`server.mutations.immediate`), and the mappers leave those alone. The
first mapper turns a body-less POST to an inference path (routed to the host-less undecided
cluster, so Envoy says "no healthy upstream") into a 400.
"""

from __future__ import annotations

import re
from typing import Any

from extproc.headers import SERVER_DETAILS_PREFIX
from extproc.ops.envoy_config.messages import quiet_library_imports, typed
from extproc.ops.envoy_config.options import DECISION_NAMESPACE, INFERENCE_PATH_REGEX
from extproc.protocol.formats import FORMATS, error_body
from extproc.protocol.request import ApiKind

with quiet_library_imports():
    from envoy_data_plane.envoy.config.accesslog.v3 import (
        AccessLogFilter,
        AndFilter,
        ExtensionFilter,
        HeaderFilter,
        MetadataFilter,
        ResponseFlagFilter,
    )
    from envoy_data_plane.envoy.config.core.v3 import SubstitutionFormatString
    from envoy_data_plane.envoy.config.route.v3 import HeaderMatcher
    from envoy_data_plane.envoy.extensions.access_loggers.filters.cel.v3 import ExpressionFilter
    from envoy_data_plane.envoy.extensions.filters.network.http_connection_manager.v3 import (
        LocalReplyConfig,
        ResponseMapper,
    )
    from envoy_data_plane.envoy.type.matcher.v3 import (
        MetadataMatcher,
        MetadataMatcherPathSegment,
        RegexMatcher,
        StringMatcher,
        ValueMatcher,
    )
    from envoy_data_plane.google.protobuf import Struct


def paths_regex(paths: tuple[str, ...]) -> str:
    return "^(" + "|".join(re.escape(p) for p in paths) + ")/*$"


# Envoy's local replies by status: the client's message and OpenAI's (type, code). A status not
# here gets the last entry's wording, with its own status in the Anthropic type.
ENVOY_REPLIES: dict[int | None, tuple[str, str, str]] = {
    413: (
        "The request body is larger than this gateway accepts.",
        "invalid_request_error",
        "payload_too_large",
    ),
    503: (
        "The router or the model behind it is unavailable; retry later.",
        "server_error",
        "service_unavailable",
    ),
    504: (
        "The router or the model behind it did not answer in time; retry later.",
        "server_error",
        "gateway_timeout",
    ),
    None: ("The gateway could not complete the request.", "server_error", "gateway_error"),
}


# Envoy's own text follows ours ("upstream connect error or disconnect/reset before headers...",
# "Payload Too Large"); it is empty where Envoy had none (the ext_proc server down or stalled).
ENVOY_TEXT = "%LOCAL_REPLY_BODY%"


def reply_body(api: ApiKind, status: int | None) -> dict[str, Any]:
    """The error JSON a client of `api` gets for Envoy's local reply with `status` (None: any other)."""
    ours, error_type, code = ENVOY_REPLIES.get(status, ENVOY_REPLIES[None])
    message = f"{ours} {ENVOY_TEXT}"
    return error_body(api, status or 500, message, code=code, kind=error_type)


def _path_filter(regex: str) -> AccessLogFilter:
    return AccessLogFilter(
        header_filter=HeaderFilter(
            header=HeaderMatcher(name=":path", string_match=StringMatcher(safe_regex=RegexMatcher(regex=regex)))
        )
    )


def _cel(expression: str) -> AccessLogFilter:
    config = typed(ExpressionFilter(expression=expression))
    return AccessLogFilter(
        extension_filter=ExtensionFilter(name="envoy.access_loggers.extension_filters.cel", typed_config=config)
    )


def _envoy_reply(status: int | None) -> AccessLogFilter:
    """A local reply of Envoy's own (not the server's) with this status (None: any error status)."""
    condition = f"response.code == {status}" if status is not None else "response.code >= 400"
    return _cel(f"{condition} && !response.code_details.startsWith('{SERVER_DETAILS_PREFIX}')")


def _undecided(on_path: AccessLogFilter) -> AccessLogFilter:
    """A POST to an inference path that reached no decision: routed to the host-less cluster."""
    return AccessLogFilter(
        and_filter=AndFilter(
            filters=[
                AccessLogFilter(response_flag_filter=ResponseFlagFilter(flags=["UH"])),
                AccessLogFilter(
                    metadata_filter=MetadataFilter(
                        matcher=MetadataMatcher(
                            filter=DECISION_NAMESPACE,
                            path=[MetadataMatcherPathSegment(key="cluster")],
                            value=ValueMatcher(present_match=True),
                            invert=True,
                        ),
                        match_if_key_not_found=True,
                    )
                ),
                on_path,
            ]
        )
    )


def undecided_body(api: ApiKind) -> dict[str, Any]:
    message = "An inference request needs a JSON body to route."
    return error_body(api, 400, message, code="body_required", kind="invalid_request_error")


def _json(body: dict[str, Any]) -> SubstitutionFormatString:
    return SubstitutionFormatString(json_format=Struct.from_dict(body))


def local_reply() -> LocalReplyConfig:
    """The connection manager's local reply mappers: first match wins, so the Messages path's come
    before those of every other inference path (which speak OpenAI)."""
    mappers = []
    # Each format whose error envelope is not OpenAI's on its own paths, then OpenAI's on them all.
    own = [(f.kind, paths_regex(f.paths)) for f in FORMATS.values() if f.error_family != "openai"]
    apis = [*own, (ApiKind.CHAT, INFERENCE_PATH_REGEX)]
    for api, regex in apis:
        on_path = _path_filter(regex)
        mappers.append(
            ResponseMapper(filter=_undecided(on_path), status_code=400, body_format_override=_json(undecided_body(api)))
        )
        for status in ENVOY_REPLIES:
            mappers.append(
                ResponseMapper(
                    filter=AccessLogFilter(and_filter=AndFilter(filters=[on_path, _envoy_reply(status)])),
                    body_format_override=_json(reply_body(api, status)),
                )
            )
    return LocalReplyConfig(mappers=mappers)
