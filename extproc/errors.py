"""Typed request errors, each carrying its HTTP status and an OpenAI-style body.

Every edge (gRPC servicer, admin HTTP, CLI) maps failures through this one module, so a
malformed request gets the same status and body wherever it arrives.
"""

from __future__ import annotations

import json
from typing import Any


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
        return error_body(self.message, self.error_type, self.code, self.param)

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


def error_body(
    message: str, error_type: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The OpenAI error envelope: {"error": {"message", "type", "code", "param"}}."""
    return {"error": {"message": message, "type": error_type, "code": code, "param": param}}
