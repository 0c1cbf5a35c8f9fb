"""Typed request errors, each carrying its HTTP status, and the one status-to-error-type table.

Every edge (gRPC servicer, admin HTTP, CLI) maps failures through this one module, so a
malformed request gets the same status and body wherever it arrives. The body a client gets is
its API's shape (`extproc.protocol.formats.error_body`); a RequestError's own `to_body` is the
OpenAI envelope, which the explain object and the OpenAI APIs use.
"""

from __future__ import annotations

import json
from typing import Any, Literal, NamedTuple

ErrorFamily = Literal["openai", "anthropic"]


class ErrorTypes(NamedTuple):
    """An HTTP status's error type in each envelope family."""

    openai: str
    anthropic: str


# The one status-to-error-type table, every envelope's column (Anthropic's from
# https://docs.anthropic.com/en/api/errors). A status not here: the 5xx or 4xx fallback.
ERROR_TYPES: dict[int, ErrorTypes] = {
    400: ErrorTypes("invalid_request_error", "invalid_request_error"),
    401: ErrorTypes("invalid_request_error", "authentication_error"),
    403: ErrorTypes("permission_error", "permission_error"),
    404: ErrorTypes("invalid_request_error", "not_found_error"),
    413: ErrorTypes("invalid_request_error", "request_too_large"),
    429: ErrorTypes("rate_limit_error", "rate_limit_error"),
    500: ErrorTypes("service_unavailable", "api_error"),
    # Not one of Anthropic's own; what an OpenAI server answers when it is overloaded.
    503: ErrorTypes("service_unavailable", "overloaded_error"),
    529: ErrorTypes("service_unavailable", "overloaded_error"),
}
_SERVER_FALLBACK = ErrorTypes("service_unavailable", "api_error")
_CLIENT_FALLBACK = ErrorTypes("invalid_request_error", "invalid_request_error")
# OpenAI's type for the server's own failures (not loaded, routing raised), whatever the status.
SERVER_ERROR = "server_error"


def error_type(status: int, family: ErrorFamily) -> str:
    """The error type a status gets in an envelope family."""
    types = ERROR_TYPES.get(status) or (_SERVER_FALLBACK if status >= 500 else _CLIENT_FALLBACK)
    return types.openai if family == "openai" else types.anthropic


class RequestError(Exception):
    """A client-side problem with the request; never a server crash."""

    status: int = 400
    error_type: str = "invalid_request_error"
    code: str = "invalid_request"

    def __init__(self, message: str, *, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.param = param

    def to_body(self) -> dict[str, Any]:
        return openai_envelope(self.message, self.error_type, self.code, self.param)

    def to_json_bytes(self) -> bytes:
        return json.dumps(self.to_body(), separators=(",", ":")).encode()


class MalformedRequest(RequestError):
    """400: not JSON, wrong types, missing required fields, invalid base64."""

    status = 400
    code = "invalid_request"


class PayloadTooLarge(RequestError):
    """413: body, image bytes, pixels, frames or image count over the configured limits."""

    status = 413
    code = "payload_too_large"


class UnsupportedMedia(RequestError):
    """415: an image format or media type we do not accept."""

    status = 415
    code = "unsupported_media_type"


class UnprocessableRequest(RequestError):
    """422: well-formed but cannot be processed (truncated or corrupt image data)."""

    status = 422
    code = "unprocessable_entity"


class ModelNotFound(RequestError):
    """404: the request names a model the policy does not know (OpenAI's answer to an unknown model)."""

    status = 404
    code = "model_not_found"


class NoCapableModel(RequestError):
    """400: the winning decision has no model that can accept this request."""

    status = 400
    code = "no_capable_model"


def openai_envelope(
    message: str, error_type: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The OpenAI error envelope: {"error": {"message", "type", "code", "param"}}."""
    return {"error": {"message": message, "type": error_type, "code": code, "param": param}}
