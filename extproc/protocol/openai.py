"""Parse a request body of any API format into a RoutingRequest: the JSON read once (size, depth
and type checked), then the format the path names parses it (`extproc.protocol.formats`).

Only what routing needs is extracted; the parsed JSON is kept so the body can be rewritten
(model, system prompt) without re-parsing. Every malformed shape raises a typed RequestError.
"""

from __future__ import annotations

import json
from typing import Any

from extproc.errors import MalformedRequest, PayloadTooLarge
from extproc.images import ImageLimits
from extproc.images import RemoteImage as RemoteImage
from extproc.protocol.formats import API_PATHS, FORMATS, format_for, guessed_format
from extproc.protocol.openai_parser import json_type
from extproc.protocol.request import ApiKind, RoutingRequest


def api_for_path(path: str) -> ApiKind | None:
    """The API a request path speaks (query string ignored), or None for non-inference paths."""
    return API_PATHS.get(path.split("?", 1)[0].rstrip("/") or "/")


def parse_request(
    body: bytes | str | dict[str, Any],
    *,
    path: str = "/v1/chat/completions",
    limits: ImageLimits | None = None,
    max_body_bytes: int | None = None,
    max_depth: int = 64,
) -> RoutingRequest:
    """Parse a request body of the API `path` names (an OpenAI body's own shape when the path
    names none). Raises a RequestError subclass on any bad input."""
    limits = limits or ImageLimits()
    if isinstance(body, dict):
        data = body
    else:
        raw = body.encode() if isinstance(body, str) else body
        if max_body_bytes is not None and len(raw) > max_body_bytes:
            raise PayloadTooLarge(f"request body is {len(raw)} bytes; the limit is {max_body_bytes}")
        data = _load_json(raw, max_depth)
    api = api_for_path(path) or _infer_api(data)
    return format_for(api).parse(data, limits)


def _load_json(raw: bytes, max_depth: int) -> dict[str, Any]:
    if not raw.strip():
        raise MalformedRequest("request body is empty; expected a JSON object", code="invalid_json")
    _check_depth(raw, max_depth)
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise MalformedRequest(f"request body is not UTF-8: {exc.reason}", code="invalid_json") from exc
    except json.JSONDecodeError as exc:
        raise MalformedRequest(
            f"request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", code="invalid_json"
        ) from exc
    except RecursionError as exc:
        raise MalformedRequest("request body nests too deeply", code="invalid_json") from exc
    except ValueError as exc:  # e.g. an integer literal over Python's 4300-digit conversion limit
        raise MalformedRequest(f"request body is not valid JSON: {exc}", code="invalid_json") from exc
    if not isinstance(data, dict):
        raise MalformedRequest(f"request body must be a JSON object, not {json_type(data)}", code="invalid_json")
    return data


def _check_depth(raw: bytes, max_depth: int) -> None:
    """Refuse absurd nesting before json.loads recurses into it (a cheap byte scan, strings skipped)."""
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return
    depth = 0
    in_string = False
    escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > max_depth:
                raise MalformedRequest(f"request body nests deeper than {max_depth} levels", code="invalid_json")
        elif byte in (0x5D, 0x7D):
            depth -= 1


def _infer_api(data: dict[str, Any]) -> ApiKind:
    fmt = guessed_format(data)
    if fmt is not None:
        return fmt.kind
    keys = [repr(f.body_key) for f in FORMATS.values() if f.body_key is not None]
    named = f"{', '.join(keys[:-1])} or {keys[-1]}" if len(keys) > 1 else "".join(keys)
    raise MalformedRequest(f"request has none of {named}", code="missing_field")
