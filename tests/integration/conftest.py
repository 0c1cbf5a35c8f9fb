"""A real stack on free loopback ports: demo upstreams, `extproc serve`, Envoy from the wheel."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from extproc.ops.envoy_config import EnvoyOptions
from extproc.ops.stack import Stack, StackConfig, free_port, loopback_overrides

REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "policies" / "default.yaml"


def stack_config(policy: Path = POLICY, **env: str) -> StackConfig:
    return StackConfig(
        policy=policy,
        envoy=EnvoyOptions(listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port()),
        upstream_overrides=loopback_overrides(policy),
        # A free admin port too: several stacks may be up at once within one test run.
        env={
            "VSR_SERVER__DEBUG_HEADERS": "true",
            "VSR_LOGGING__LEVEL": "WARNING",
            "VSR_SERVER__ADMIN_PORT": str(free_port()),
            **env,
        },
        stream_delay_ms=30.0,
        start_timeout_s=180.0,
    )


def fleet_stack_config(policy: Path, clusters: tuple[str, ...], *, cooldown_s: float) -> StackConfig:
    """A stack whose `clusters` are stand-in vLLM servers (not demo upstreams), with Envoy's health
    checks and the fleet's scrape and cooldown fast enough for a test to watch them act."""
    return StackConfig(
        policy=policy,
        envoy=EnvoyOptions(
            listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port(), upstream_health_interval_s=0.5
        ),
        external_upstreams=clusters,
        env={
            "VSR_LOGGING__LEVEL": "WARNING",
            "VSR_SERVER__ADMIN_PORT": str(free_port()),
            "VSR_FLEET__SCRAPE_INTERVAL_S": "0.2",
            "VSR_FLEET__COOLDOWN_S": str(cooldown_s),
            "VSR_FLEET__COOLDOWN_AFTER": "2",
        },
        start_timeout_s=120.0,
    )


class LoggedStack(Stack):
    """A stack that keeps its children's output, shown when a test fails."""

    def __init__(self, config: StackConfig) -> None:
        self.lines: list[str] = []
        super().__init__(config, sink=self.lines.append)


@contextlib.contextmanager
def running_stack(config: StackConfig) -> Iterator[LoggedStack]:
    """Start a stack, show its last output if it fails to come up, always stop it."""
    running = LoggedStack(config)
    try:
        running.start()
    except Exception:
        print("\n".join(running.lines[-60:]))
        running.stop()
        raise
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def stack() -> Iterator[LoggedStack]:
    with running_stack(stack_config()) as running:
        yield running


@pytest.fixture(scope="session")
def policy_models() -> dict[str, dict[str, str]]:
    data = yaml.safe_load(POLICY.read_text())
    return {m["name"]: m for m in data["models"]}
