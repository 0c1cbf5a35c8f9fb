"""The stack supervisor's own parts: port choice and what a child's death reports."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from extproc.ops.stack import Stack, StackConfig, StackError, _ephemeral_range, free_port


def test_free_ports_are_distinct_bindable_and_outside_the_ephemeral_range() -> None:
    low, high = _ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    for port in ports:
        assert not low <= port <= high, port  # an outgoing connection can't be handed it meanwhile
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_a_child_that_dies_at_startup_is_reported_with_its_last_lines() -> None:
    lines: list[str] = []
    stack = Stack(StackConfig(), sink=lines.append)
    script = "import sys; print('cannot bind 127.0.0.1:1: Address already in use', flush=True); sys.exit(1)"
    stack._spawn("envoy", [sys.executable, "-c", script], env={})
    try:
        with pytest.raises(StackError) as caught:
            stack._wait(time.monotonic() + 10, "Envoy /ready", lambda: False)
    finally:
        stack.stop()
    message = str(caught.value)
    assert "envoy exited with 1" in message
    assert "Address already in use" in message
