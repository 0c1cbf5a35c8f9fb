"""bench_envoy's `--floor` stack runs bench/floor_servicer.py as its ext_proc server, whichever way
the stack starts it: a whole-stack start (the servers spawned together) once ran the real router
there, so the "floor" row measured the router against itself."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_envoy import FloorStack

from extproc.ops.stack import Stack, StackConfig


class _Recording:
    """Records what a stack spawns instead of starting it; every wait succeeds at once."""

    def __init__(self) -> None:
        self.spawned: dict[str, list[str]] = {}

    def spawn(self, name: str, cmd: list[str], env: Mapping[str, str] | None = None) -> None:
        self.spawned[name] = cmd


def _start(kind: type[Stack], monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    record = _Recording()
    stack = kind(StackConfig(), sink=lambda line: None)
    monkeypatch.setattr(stack, "_spawn", record.spawn)
    monkeypatch.setattr(stack, "_wait", lambda deadline, what, probe: None)
    monkeypatch.setattr(stack, "stop", lambda: None)
    stack.start()
    return record.spawned


def test_a_floor_stack_start_runs_the_floor_servicer(monkeypatch: pytest.MonkeyPatch) -> None:
    server = _start(FloorStack, monkeypatch)["extproc"]
    assert server[1].endswith("floor_servicer.py"), server
    assert "--cluster" in server


def test_a_plain_stack_start_runs_the_router(monkeypatch: pytest.MonkeyPatch) -> None:
    # The control: the same start on the real stack spawns `python -m extproc serve`.
    server = _start(Stack, monkeypatch)["extproc"]
    assert server[1:3] == ["-m", "extproc"] and server[-1] == "serve", server


def test_a_floor_server_restart_runs_the_floor_servicer_too(monkeypatch: pytest.MonkeyPatch) -> None:
    record = _Recording()
    stack = FloorStack(StackConfig(), sink=lambda line: None)
    monkeypatch.setattr(stack, "_spawn", record.spawn)
    monkeypatch.setattr(stack, "_wait", lambda deadline, what, probe: None)
    stack.start_server()
    assert record.spawned["extproc"][1].endswith("floor_servicer.py")
