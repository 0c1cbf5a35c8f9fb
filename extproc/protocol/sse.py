"""Server-sent events, as OpenAI-style and MCP streams carry them: one place that reads them."""

from __future__ import annotations


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # LF, CRLF and CR are all legal


def event(block: str) -> tuple[str | None, str]:
    """One event's name (None when it has no `event:` line) and its data, data lines joined by LF."""
    name: str | None = None
    data: list[str] = []
    for line in _lines(block):
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
    return name, "\n".join(data)


def events(body: bytes | str) -> list[tuple[str | None, str]]:
    """(name, data) of every event of a whole stream that carries data."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    found = [event(block) for block in "\n".join(_lines(text)).split("\n\n")]
    return [(name, data) for name, data in found if data]
