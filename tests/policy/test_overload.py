"""Overload: a decision that a timed-out signal left undecided is shed (429 + Retry-After) or taken
fail-safe, never silently decided on unknowns when the policy says otherwise; and the heavy
executor refuses work that cannot finish before its request's deadline."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import pytest

from extproc.models.executor import REQUEST_DEADLINE, HeavyExecutor, Overloaded
from extproc.router import Router
from extproc.server import wire
from extproc.signals.base import SignalStatus


def chat(text: str = "hello") -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()


def policy(*, overload: str = "", fail_safe: bool = False, extra_leaf: str = "") -> str:
    leaf = "{signal: slow}" if not extra_leaf else f"{{all: [{{signal: slow}}, {extra_leaf}]}}"
    return f"""
signal_timeout_ms: 100
{overload}
signals:
  - {{name: slow, type: fake, behaviour: hang}}
  - {{name: never, type: fake_inline, behaviour: no_match}}
  - {{name: always, type: fake_inline, behaviour: match}}
decisions:
  - name: restricted
    priority: 10
    fail_safe: {str(fail_safe).lower()}
    when: {leaf}
    action: {{type: route, models: [vlm]}}
default:
  name: general
  action: {{type: route, models: [text-model, vlm]}}
"""


async def test_a_fail_safe_decision_takes_the_request_its_timed_out_signal_left_undecided(
    make_router: Callable[..., Router],
) -> None:
    outcome = await make_router(policy(fail_safe=True)).route(chat())
    assert (outcome.action, outcome.decision, outcome.model.name if outcome.model else None) == (
        "route",
        "restricted",
        "vlm",
    )
    assert outcome.result.fail_safe and not outcome.result.shed
    assert {s.name: s.status for s in outcome.signals}["slow"] is SignalStatus.TIMEOUT
    assert any("fail-safe" in note for note in outcome.notes)
    assert outcome.to_dict()["overload"] == "fail_safe"


async def test_shed_answers_429_with_retry_after(make_router: Callable[..., Router]) -> None:
    outcome = await make_router(policy(overload="overload: {action: shed, retry_after_s: 7}")).route(chat())
    assert (outcome.action, outcome.status, outcome.code) == ("reject", 429, "overloaded")
    assert outcome.result.shed and outcome.decision == "overloaded:restricted"
    reply = wire.immediate_response(outcome)
    assert reply.status == 429 and reply.headers["retry-after"] == "7"
    body = json.loads(reply.body)["error"]
    assert (body["type"], body["code"]) == ("rate_limit_error", "overloaded")


async def test_a_skip_decision_is_passed_over_instead_of_shedding(make_router: Callable[..., Router]) -> None:
    text = policy(overload="overload: {action: shed}").replace("    fail_safe: false\n", "    on_overload: skip\n")
    assert "on_overload: skip" in text
    outcome = await make_router(text).route(chat())
    assert (outcome.action, outcome.decision, outcome.result.shed) == ("route", "general", False)
    assert {s.name: s.status for s in outcome.signals}["slow"] is SignalStatus.TIMEOUT


async def test_fail_safe_wins_over_shed(make_router: Callable[..., Router]) -> None:
    outcome = await make_router(policy(overload="overload: {action: shed}", fail_safe=True)).route(chat())
    assert outcome.decision == "restricted" and outcome.result.fail_safe


async def test_decide_keeps_the_old_behaviour_unknown_is_not_a_match(make_router: Callable[..., Router]) -> None:
    outcome = await make_router(policy()).route(chat())
    assert (outcome.decision, outcome.result.shed, outcome.result.fail_safe) == ("general", False, False)


async def test_a_timeout_that_cannot_change_the_decision_is_not_overload(make_router: Callable[..., Router]) -> None:
    # all: [slow, never]: `never` is false, so the decision is false whatever `slow` would say.
    router = make_router(policy(overload="overload: {action: shed}", extra_leaf="{signal: never}"))
    outcome = await router.route(chat())
    assert outcome.decision == "general" and not outcome.result.shed


async def test_fail_safe_needs_the_rest_of_the_rule_to_hold(make_router: Callable[..., Router]) -> None:
    # all: [slow, never] with fail_safe: the timed-out leaf counts as a match, `never` still fails.
    outcome = await make_router(policy(fail_safe=True, extra_leaf="{signal: never}")).route(chat())
    assert outcome.decision == "general" and not outcome.result.fail_safe
    matched = await make_router(policy(fail_safe=True, extra_leaf="{signal: always}")).route(chat())
    assert matched.decision == "restricted" and matched.result.fail_safe


def test_the_default_policy_sheds_and_routes_identity_fail_safe(settings: object) -> None:
    import yaml

    from extproc.settings import DEFAULT_POLICY

    data = yaml.safe_load(DEFAULT_POLICY.read_text(encoding="utf-8"))
    assert data["overload"]["action"] == "shed"
    (identity,) = [d for d in data["decisions"] if d["name"] == "identity_document"]
    assert identity["fail_safe"] is True


# -- admission on the heavy executor ------------------------------------------------------------


async def test_the_executor_refuses_work_that_cannot_finish_before_the_deadline() -> None:
    executor = HeavyExecutor(1, None)
    try:
        assert await executor.run(time.sleep, 0.05) is None  # learns the job time (~50 ms)
        assert executor.job_s > 0.0
        executor.job_s = 5.0  # a stale, pessimistic estimate ...
        REQUEST_DEADLINE.set(time.monotonic() + 0.5)
        await executor.run(time.sleep, 0.0)  # ... never refuses a job when nothing is queued ahead
        executor.job_s = 0.05
        REQUEST_DEADLINE.set(time.monotonic() + 10.0)
        blockers = [asyncio.ensure_future(executor.run(time.sleep, 0.05)) for _ in range(4)]
        await asyncio.sleep(0)  # the four are queued: ~200 ms of work ahead
        REQUEST_DEADLINE.set(time.monotonic() + 0.1)
        with pytest.raises(Overloaded):
            await executor.run(time.sleep, 0.05)
        assert executor.refused == 1
        REQUEST_DEADLINE.set(None)  # no deadline in force (load-time work): always admitted
        await executor.run(time.sleep, 0.0)
        await asyncio.gather(*blockers)
        assert executor.pending == 0
    finally:
        executor.shutdown()


async def test_an_overloaded_executor_makes_the_signal_a_timeout(make_router: Callable[..., Router]) -> None:
    router = make_router(
        """
signal_timeout_ms: 2000
overload: {action: shed}
signals:
  - {name: heavy, type: executor_work, work_ms: 60}
decisions:
  - {name: restricted, priority: 10, when: {signal: heavy}, action: {type: route, models: [vlm]}}
default: {name: general, action: {type: route, models: [text-model, vlm]}}
"""
    )
    await router.route(chat())  # one job teaches the executor its cost
    router.executor.job_s = 1.0  # as if each job took a second: nothing new fits a 2 s deadline behind a queue
    router.executor.pending = 3
    outcome = await router.route(chat())
    heavy = {s.name: s for s in outcome.signals}["heavy"]
    assert heavy.status is SignalStatus.TIMEOUT and "overloaded" in (heavy.error or "")
    assert outcome.status == 429 and outcome.result.shed
    router.executor.pending = 0


async def test_the_request_deadline_counts_from_the_messages_arrival(make_router: Callable[..., Router]) -> None:
    # A long signal timeout and request deadline: a request that arrived a deadline ago has no time
    # left, so its hanging signal times out at once and the policy's overload answer goes out,
    # rather than the full deadline again after the late start.
    from extproc.settings import Settings

    settings = Settings.load(None, environ={"VSR_DISPATCH__REQUEST_DEADLINE_MS": "60000"})
    body = policy(overload="overload: {action: shed}").replace("signal_timeout_ms: 100", "signal_timeout_ms: 60000")
    router = make_router(body, settings)
    arrived = time.monotonic() - 60.0
    outcome = await asyncio.wait_for(router.route(chat(), received=arrived), timeout=30)
    assert {s.name: s.status for s in outcome.signals}["slow"] is SignalStatus.TIMEOUT
    assert (outcome.status, outcome.code) == (429, "overloaded")
    # Without `received` the deadline starts now: the same request is still being checked 0.3 s on.
    pending = asyncio.ensure_future(router.route(chat()))
    done, _ = await asyncio.wait({pending}, timeout=0.3)
    assert not done
    pending.cancel()
