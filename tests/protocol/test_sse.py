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
