"""What the demo upstream received, said back: the system prompt (the policy's `system_prompt`
plugin inserts or replaces it) and the request headers that are not routine (the policy's
`set_headers`, the decision Envoy's route copies on), so a curl through the router shows what
was sent upstream without a capture server.

Two response headers carry it whole, as ASCII JSON: `x-demo-received-system` (a string; `null`
when the request had none) and `x-demo-received-headers` (an object). Credentials are never
echoed: `authorization`, `x-api-key`, `cookie` and `proxy-authorization` show as `<redacted>`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

SYSTEM_HEADER = "x-demo-received-system"
HEADERS_HEADER = "x-demo-received-headers"
MAX_ECHO = 2000  # characters of each header: a long system prompt is cut, with a mark

# Headers every request carries (HTTP itself, Envoy's own, the demo's script headers): not echoed.
_ROUTINE = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "accept",
        "accept-encoding",
        "user-agent",
        "connection",
        "transfer-encoding",
        "x-request-id",
        "x-demo-reply",
        "x-demo-error",
    }
)
_ROUTINE_PREFIXES = ("x-envoy-", "x-forwarded-", ":")
_SECRETS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})


def system_text(payload: Mapping[str, Any]) -> str | None:
    """The system prompt of a Chat (system and developer messages), Responses (`instructions` and
    system input items) or Messages (`system`) body; None when it has none."""
    parts: list[str] = []
    system = payload.get("system")
    if system is not None:
        parts.append(_content_text(system))
    instructions = payload.get("instructions")
    if isinstance(instructions, str):
        parts.append(instructions)
    for key in ("messages", "input"):
        items = payload.get(key)
        if isinstance(items, list):
            parts.extend(
                _content_text(item.get("content"))
                for item in items
                if isinstance(item, dict) and item.get("role") in ("system", "developer")
            )
    return "\n\n".join(parts) if parts else None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p)
    return ""


def received_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request's headers that are not routine, by lower-cased name, credentials redacted."""
    shown: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        if key in _ROUTINE or key.startswith(_ROUTINE_PREFIXES):
            continue
        shown[key] = "<redacted>" if key in _SECRETS else value
    return dict(sorted(shown.items()))


def echo_headers(payload: Mapping[str, Any], headers: Mapping[str, str]) -> dict[str, str]:
    """The two response headers that say what this request brought."""
    system = system_text(payload)
    if system is not None and len(system) > MAX_ECHO:
        system = system[: MAX_ECHO - 3] + "..."
    return {
        SYSTEM_HEADER: json.dumps(system),
        HEADERS_HEADER: json.dumps(received_headers(headers), separators=(",", ":"))[:MAX_ECHO],
    }


def short_system(payload: Mapping[str, Any], limit: int = 60) -> str:
    """The system prompt for the reply text: quoted and shortened, `-` when there is none."""
    system = system_text(payload)
    if system is None:
        return "-"
    system = " ".join(system.split())
    return json.dumps(system if len(system) <= limit else system[: limit - 3] + "...", ensure_ascii=False)
