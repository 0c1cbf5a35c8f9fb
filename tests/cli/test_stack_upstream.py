"""`extproc stack --upstream CLUSTER=HOST:PORT` names a running server: no demo upstream for it."""

from __future__ import annotations

import argparse

import pytest

from extproc.cli import demo, stack_cmd
from extproc.ops.stack import StackConfig
from tests.integration.conftest import POLICY


def test_stack_upstream_marks_the_cluster_external(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[StackConfig] = []
    monkeypatch.setattr(stack_cmd, "run_foreground", lambda config: seen.append(config) or 0)
    parser = argparse.ArgumentParser()
    stack_cmd.add_parser(parser.add_subparsers())
    args = parser.parse_args(["stack", "--policy", str(POLICY), "--upstream", "general=127.0.0.1:18080"])
    assert stack_cmd.run(args) == 0
    [config] = seen
    assert config.upstream_overrides == {"general": "127.0.0.1:18080"}
    assert config.external_upstreams == ("general",)


def test_demo_upstream_skips_the_external_clusters() -> None:
    everything = {u.cluster for u in demo.demo_upstreams(POLICY, {})}
    served = {u.cluster for u in demo.demo_upstreams(POLICY, {}, skip=frozenset({"general"}))}
    assert "general" in everything and served == everything - {"general"}
