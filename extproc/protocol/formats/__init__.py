"""The API formats, one module each, behind one registry: `FORMATS` is the only list of the
APIs the router speaks (a new API is one module, one line here and its tests).

Each format (`base.ApiFormat`) owns its paths, its parser, its error envelope, the replies the
router answers itself and their stream events, and where a system prompt goes. `error_body` is
the one error body for every edge (the server's answers, Envoy's local replies).
"""

from __future__ import annotations

from typing import Any

from extproc.protocol.formats.base import ApiFormat
from extproc.protocol.formats.chat import ChatFormat
from extproc.protocol.formats.completions import CompletionsFormat
from extproc.protocol.formats.messages import MessagesFormat
from extproc.protocol.formats.responses import ResponsesFormat
from extproc.protocol.request import ApiKind

FORMATS: dict[ApiKind, ApiFormat] = {
    fmt.kind: fmt for fmt in (ChatFormat(), ResponsesFormat(), CompletionsFormat(), MessagesFormat())
}


# The inference paths and the API each speaks: the only definition (settings, the servicer,
# the parser and Envoy's config read it).
API_PATHS: dict[str, ApiKind] = {path: fmt.kind for fmt in FORMATS.values() for path in fmt.paths}


def format_for(api: ApiKind) -> ApiFormat:
    return FORMATS[api]


def format_for_path(path: str) -> ApiFormat | None:
    """The format an inference path speaks (None for any other path)."""
    api = API_PATHS.get(path)
    return FORMATS[api] if api is not None else None


def error_body(
    api: ApiKind,
    status: int,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
    kind: str | None = None,
) -> dict[str, Any]:
    """The error a client of `api` gets: its format's envelope, typed by `status` through the one
    table (`extproc.errors.ERROR_TYPES`) unless `kind` names OpenAI's type."""
    return FORMATS[api].error_envelope(status, message, code=code, param=param, kind=kind)
