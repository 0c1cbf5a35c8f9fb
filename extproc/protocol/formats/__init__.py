"""The API formats, one module each, behind one registry: `FORMATS` is the only list of the
APIs the router speaks (a new API is one module, one line here and its tests).

Each format (`base.ApiFormat`) owns its paths, its parser, its error envelope, the replies the
router answers itself and their stream events, and where a system prompt goes; its line here
gives it a `Translation` where it may be sent upstream as another format. `error_body` is the one
error body for every edge (the server's answers, Envoy's local replies).
"""

from __future__ import annotations

from typing import Any

from extproc.protocol.formats.base import ApiFormat, Translation
from extproc.protocol.formats.chat import ChatFormat
from extproc.protocol.formats.completions import CompletionsFormat
from extproc.protocol.formats.messages import MessagesFormat
from extproc.protocol.formats.messages_chat import MessagesToChat
from extproc.protocol.formats.responses import ResponsesFormat
from extproc.protocol.request import ApiKind

# In the order a body on a path that names no API is guessed by its `body_key`.
FORMATS: dict[ApiKind, ApiFormat] = {
    fmt.kind: fmt
    for fmt in (
        ChatFormat(),
        ResponsesFormat(),
        CompletionsFormat(),
        MessagesFormat(translation=MessagesToChat()),
    )
}


def translations_by_target(formats: dict[ApiKind, ApiFormat]) -> dict[ApiKind, Translation]:
    """Each translation by the format it sends upstream. The decision metadata names only that
    format (`api`) and that the answer goes back (`translate`), so two formats translated to
    the same one would be ambiguous: refused here, at import."""
    found: dict[ApiKind, Translation] = {}
    for fmt in formats.values():
        if fmt.translation is None:
            continue
        target = fmt.translation.target
        if target in found:
            raise ValueError(f"two API formats are translated to {target.value}; the answer's way back is ambiguous")
        found[target] = fmt.translation
    return found


TRANSLATIONS: dict[ApiKind, Translation] = translations_by_target(FORMATS)


# The inference paths and the API each speaks: the only definition (settings, the servicer,
# the parser and Envoy's config read it).
API_PATHS: dict[str, ApiKind] = {path: fmt.kind for fmt in FORMATS.values() for path in fmt.paths}


def format_for(api: ApiKind) -> ApiFormat:
    return FORMATS[api]


def translation_back(upstream_api: ApiKind) -> Translation:
    """The translation that brings an answer in `upstream_api` back to its client's format."""
    return TRANSLATIONS[upstream_api]


def guessed_format(data: dict[str, Any]) -> ApiFormat | None:
    """The format a body on a path that names no API has, by its top-level keys (None: none)."""
    return next((f for f in FORMATS.values() if f.body_key is not None and f.body_key in data), None)


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
