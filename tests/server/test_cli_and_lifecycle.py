"""The commands this package adds, JSON logs, and the real `extproc serve` process lifecycle."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from extproc.cli import build_parser, main
from extproc.ops.envoy_config import EnvoyOptions
from extproc.ops.stack import Stack, StackConfig, free_port
from extproc.server.logs import JsonFormatter

REPO = Path(__file__).resolve().parents[2]


def test_commands_are_registered() -> None:
    parser = build_parser()
    for argv in (["serve"], ["envoy-config"], ["demo-upstream"], ["stack"]):
        assert callable(parser.parse_args(argv).func)


def test_envoy_config_check_passes_on_checked_in_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "envoy-config",
                "--policy",
                str(REPO / "policies" / "default.yaml"),
                "--out-dir",
                str(REPO / "envoy"),
                "--check",
            ]
        )
        == 0
    )


def test_envoy_config_check_fails_on_stale_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "envoy.yaml").write_text("stale\n")
    policy = str(REPO / "policies" / "default.yaml")
    assert main(["envoy-config", "--policy", policy, "--out-dir", str(tmp_path), "--check"]) == 1
    assert "differs" in capsys.readouterr().err


def test_envoy_config_rejects_bad_upstream(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["envoy-config", "--stdout", "--upstream", "general"]) == 2


def test_json_logs_carry_extras() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.jsonlogs")
    logger.addHandler(handler)
    logger.propagate = False
    logger.warning("routed", extra={"request_id": "abc", "decision": "general"})
    entry = json.loads(stream.getvalue())
    assert entry["msg"] == "routed" and entry["request_id"] == "abc" and entry["decision"] == "general"


@pytest.mark.integration
def test_serve_reports_health_and_exits_cleanly_on_sigterm() -> None:
    lines: list[str] = []
    stack = Stack(StackConfig(envoy=EnvoyOptions(ext_proc_port=free_port())), sink=lines.append)
    try:
        stack.start_server(time.monotonic() + 120)
        assert stack.server_serving()
        proc = stack.procs["extproc"]
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert time.monotonic() - started < 15
        time.sleep(0.2)
        assert any('"msg":"stopped"' in line for line in lines), lines[-5:]
    finally:
        stack.stop()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("models: [}\n", "invalid YAML"),
        ("version: 1\nmodels: []\ndefault: {action: {type: route, models: [nope]}}\n", "models"),
    ],
)
def test_serve_exits_1_on_a_bad_policy_with_its_diagnostics(tmp_path: Path, text: str, problem: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    env = {
        **os.environ,
        "VSR_POLICY_PATH": str(bad),
        "VSR_SERVER__GRPC_PORT": str(free_port()),
        "VSR_SERVER__ADMIN_PORT": str(free_port()),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "extproc", "serve"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 1
    output = proc.stdout + proc.stderr
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    invalid = [r for r in records if r.get("msg") == "policy is invalid; not serving"]
    assert invalid and any(problem in p for p in invalid[0]["problems"])
    assert "Traceback" not in output


def test_event_loop_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvloop

    from extproc.server.app import event_loop_factory
    from extproc.settings import Settings, SettingsError

    assert Settings().server.event_loop == "asyncio"  # the default (docs/running.md: memory under load)
    assert event_loop_factory("asyncio") is None
    assert event_loop_factory("auto") is uvloop.new_event_loop
    assert event_loop_factory("uvloop") is uvloop.new_event_loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # not installed
    assert event_loop_factory("auto") is None  # the standard loop, quietly
    with pytest.raises(SettingsError, match="uvloop is not installed"):
        event_loop_factory("uvloop")
