"""Server-sent events, as OpenAI-style and MCP streams carry them: one place that reads them
(`events` for a whole body, `EventSplitter` for a stream as its chunks come)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_END = re.compile(rb"\r\n|\r|\n")


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


@dataclass(slots=True)
class EventSplitter:
    """Splits a byte stream into its events as the chunks come. Each event comes whole, with the
    blank line that ends it, byte for byte as it came (a stray blank line comes alone), so a
    caller can pass the bytes on unchanged. The split is on bytes, never decoded: a UTF-8
    character cut across chunks is whole again before its event is read. A line ends at LF,
    CRLF or CR; a CR that ends a chunk waits for the next one (it may be half a CRLF)."""

    _pending: bytes = b""  # the event not yet ended
    _line_start: int = 0  # where its current line starts
    _scanned: int = 0  # how far it was searched for line ends

    def feed(self, chunk: bytes, end: bool = False) -> list[bytes]:
        data = self._pending + chunk
        events: list[bytes] = []
        start, line_start, scanned = 0, self._line_start, len(data)
        for match in _LINE_END.finditer(data, self._scanned):
            if match.end() == len(data) and match.group() == b"\r" and not end:
                scanned = match.start()  # read it again with the next chunk
                break
            if match.start() == line_start:  # an empty line: the event ends with it
                events.append(data[start : match.end()])
                start = match.end()
            line_start = match.end()
        if end:
            if start < len(data):
                events.append(data[start:])
            self._pending, self._line_start, self._scanned = b"", 0, 0
        else:
            self._pending, self._line_start, self._scanned = data[start:], line_start - start, scanned - start
        return events
