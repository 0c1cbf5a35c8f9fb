"""Hot reload: validate fully before swapping, keep the last good policy, watch the file."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from extproc.router import Router
from extproc.server.reload import PolicyReloader, ReloadResult
from extproc.settings import Settings
from extproc.signals.registry import SignalCatalog
from tests.conftest import CHANGED, chat
from tests.suite_env import SUITE_ENVIRON

INVALID = CHANGED.replace("{signal: poetry}", "{signal: poetri}")


async def test_invalid_file_keeps_the_last_good_policy_and_a_valid_one_swaps(router: Router, policy_file: Path) -> None:
    results: list[ReloadResult] = []
    swapped = []
    reloader = PolicyReloader(router, policy_file, on_result=results.append, on_swap=swapped.append)
    original = router.policy.version
    body = chat("write a poem")

    policy_file.write_text(INVALID)
    result = await reloader.reload("test")
    assert result.result == "failure" and result.version == original
    assert any("poetri" in e and "policy.yaml" in e for e in result.errors)
    assert router.policy.version == original
    outcome = await router.route(body)
    assert (outcome.decision, outcome.policy_version) == ("general", original)

    policy_file.write_text(CHANGED)
    result = await reloader.reload("test")
    assert result.result == "success" and result.previous == original and result.version != original
    assert router.policy.version == result.version and swapped == [router.policy]
    outcome = await router.route(body)
    assert (outcome.decision, outcome.model.name if outcome.model else None) == ("poetry", "vlm")

    result = await reloader.reload("test")
    assert result.result == "unchanged"
    assert [r.result for r in results] == ["failure", "success", "unchanged"]
    assert reloader.counts == {"failure": 1, "success": 1, "unchanged": 1}


async def test_a_model_that_cannot_load_is_reported_not_hidden(router: Router, policy_file: Path) -> None:
    from tests.conftest import VISION

    policy_file.write_text(VISION)
    result = await PolicyReloader(router, policy_file).reload("test")
    assert result.result == "success"
    assert "scan" in result.unavailable_signals and "vision" in result.unavailable_signals["scan"]
    assert any(not s.loaded and s.name == "vision" for s in router.models.statuses())


async def test_in_flight_requests_finish_on_the_policy_they_started_with(
    tmp_path: Path, fake_catalog: SignalCatalog
) -> None:
    slow = """\
version: 1
models:
  - {name: a, cluster: a, modalities: [text]}
  - {name: b, cluster: b, modalities: [text]}
signals:
  - {name: slow, type: fake, delay_ms: 300}
decisions:
  - {name: d, priority: 10, when: {signal: slow}, action: {type: route, models: [a]}}
default: {name: general, action: {type: route, models: [a]}}
"""
    path = tmp_path / "slow.yaml"
    path.write_text(slow)
    settings = Settings.load(None, environ=SUITE_ENVIRON).model_copy(update={"policy_path": path})
    router = Router.from_settings(settings, catalog=fake_catalog)
    try:
        old = router.policy.version
        in_flight = [asyncio.create_task(router.route(chat("hi"))) for _ in range(5)]
        await asyncio.sleep(0.05)
        path.write_text(slow.replace("models: [a]}}\ndefault", "models: [b]}}\ndefault"))
        result = await PolicyReloader(router, path).reload("test")
        assert result.result == "success"
        outcomes = await asyncio.gather(*in_flight)
        assert {(o.policy_version, o.model.name if o.model else None) for o in outcomes} == {(old, "a")}
        after = await router.route(chat("hi"))
        assert (after.policy_version, after.model.name if after.model else None) == (result.version, "b")
    finally:
        router.close()


async def test_watcher_reloads_on_content_change_and_ignores_touch(router: Router, policy_file: Path) -> None:
    reloader = PolicyReloader(router, policy_file, interval_s=0.02)
    reloader.start()
    try:
        await asyncio.sleep(0.1)
        assert reloader.counts == {}
        now = time.time() + 5
        os.utime(policy_file, (now, now))  # touched, same content: no reload
        await asyncio.sleep(0.1)
        assert reloader.counts == {}
        policy_file.write_text(CHANGED)
        for _ in range(200):
            if reloader.counts:
                break
            await asyncio.sleep(0.02)
        assert reloader.counts == {"success": 1}
        policy_file.write_text(INVALID)
        for _ in range(200):
            if "failure" in reloader.counts:
                break
            await asyncio.sleep(0.02)
        assert reloader.counts == {"success": 1, "failure": 1}
        await asyncio.sleep(0.1)  # the same invalid content is not retried on every poll
        assert reloader.counts == {"success": 1, "failure": 1}
        assert (await router.route(chat("a poem"))).decision == "poetry"
    finally:
        await reloader.stop()


async def test_a_reload_that_needs_a_new_envoy_config_says_so(
    router: Router, policy_file: Path, caplog: object
) -> None:
    import logging

    import pytest

    assert isinstance(caplog, pytest.LogCaptureFixture)
    counted: list[str] = []
    reloader = PolicyReloader(router, policy_file, on_result=lambda r: counted.append(r.result))
    base = policy_file.read_text()
    # the policy is applied, but Envoy (rendered at start) does not pass the new session header
    policy_file.write_text(base + "\nconversations: {session_header: x-session-id}\n")
    with caplog.at_level(logging.WARNING, logger="extproc.server.reload"):
        result = await reloader.reload("test")
    assert result.result == "envoy_stale" and router.policy.version == result.version
    assert result.envoy_changes == ["session header: none -> x-session-id"]
    assert any("extproc envoy-config" in r.getMessage() and "x-session-id" in r.getMessage() for r in caplog.records)
    assert counted == ["envoy_stale"] and reloader.counts == {"envoy_stale": 1}
    # a change Envoy does not read (a decision's rule) is a plain success
    policy_file.write_text(CHANGED + "\nconversations: {session_header: x-session-id}\n")
    assert (await reloader.reload("test")).result == "success"
