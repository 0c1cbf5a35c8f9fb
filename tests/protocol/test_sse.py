"""Server-sent events read in one place: names, multi-line data, every line-end convention."""

from __future__ import annotations

import pytest

from extproc.protocol import sse


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_events_split_on_blank_lines_of_any_line_end(end: str) -> None:
    body = f"event: a{end}data: 1{end}data: 2{end}{end}: comment{end}{end}data: [DONE]{end}{end}"
    assert sse.events(body.encode()) == [("a", "1\n2"), (None, "[DONE]")]


def test_one_event_without_data_or_name() -> None:
    assert sse.event("event: ping") == ("ping", "")
    assert sse.event("data:no-space\ndata:  two") == (None, "no-space\ntwo")  # leading spaces dropped


def _split_everywhere(body: bytes) -> list[list[bytes]]:
    """The events an EventSplitter gives for `body` fed whole, in two pieces at every cut, and byte by byte."""
    results = [sse.EventSplitter().feed(body, end=True)]
    for cut in range(len(body) + 1):
        splitter = sse.EventSplitter()
        results.append(splitter.feed(body[:cut]) + splitter.feed(body[cut:], end=True))
    splitter = sse.EventSplitter()
    results.append(
        [event for i in range(len(body)) for event in splitter.feed(body[i : i + 1])] + splitter.feed(b"", end=True)
    )
    return results


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_splitter_gives_whole_events_byte_for_byte_wherever_the_chunks_split(end: bytes) -> None:
    body = b"event: a" + end + b"data: 1" + end + end + b"data: caf\xc3\xa9" + end + end + b"data: [DONE]" + end + end
    expected = [
        b"event: a" + end + b"data: 1" + end + end,
        b"data: caf\xc3\xa9" + end + end,
        b"data: [DONE]" + end + end,
    ]
    for events in _split_everywhere(body):
        assert events == expected


def test_splitter_waits_for_a_trailing_cr_and_mixes_line_ends() -> None:
    splitter = sse.EventSplitter()
    assert splitter.feed(b"data: 1\r\n\r") == []  # that CR may be half of a CRLF
    assert splitter.feed(b"\ndata: 2\n\r\n") == [b"data: 1\r\n\r\n", b"data: 2\n\r\n"]
    assert splitter.feed(b"data: 3", end=True) == [b"data: 3"]  # a cut-off last event comes as it is
