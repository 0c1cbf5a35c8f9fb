"""Faults in the core: signals that raise, hang or are slow; a missing model directory; reload
storms. Safety signals fail closed by default; routing signals fail open (unknown, not false)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from extproc.policy.load import PolicyError
from extproc.router import Router
from extproc.server import wire
from extproc.settings import Settings
from extproc.signals.base import SignalStatus

MODELS = """
version: 1
models:
  - {name: safe, cluster: safe_cluster, modalities: [text, image]}
  - {name: general, cluster: general_cluster, modalities: [text, image]}
"""


@pytest.fixture
def router_for(make_router: Callable[..., Router]) -> Callable[..., Router]:
    """`(body, deadline_ms=2000.0) -> Router`: MODELS and `body`, with the fake signals."""

    def build(body: str, deadline_ms: float = 2000.0) -> Router:
        settings = Settings.load(None, environ={"VSR_DISPATCH__REQUEST_DEADLINE_MS": str(deadline_ms)})
        return make_router(body, settings, base=MODELS)

    return build


def chat(text: str = "hello") -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()


def guard_policy(behaviour: str, extra: str = "", kind: str = "fake_safety") -> str:
    return f"""
signal_timeout_ms: 150
signals:
  - {{name: guard, type: {kind}, behaviour: {behaviour}{extra}}}
decisions:
  - {{name: blocked, priority: 10, when: {{signal: guard}}, action: {{type: reject, status: 403, message: blocked, code: blocked}}}}
default: {{name: general, action: {{type: route, models: [general]}}}}
"""


@pytest.mark.parametrize("behaviour", ["raise", "hang", "unavailable"])
async def test_safety_signal_fails_closed_by_default(behaviour: str, router_for: Callable[..., Router]) -> None:
    router = router_for(guard_policy(behaviour))
    try:
        started = time.perf_counter()
        outcome = await router.route(chat())
        assert time.perf_counter() - started < 1.0  # a hang is cut at the 150 ms signal timeout
        assert (outcome.action, outcome.decision, outcome.status) == ("reject", "blocked", 403)
        guard = outcome.signals[0]
        assert guard.status in (SignalStatus.ERROR, SignalStatus.TIMEOUT, SignalStatus.UNAVAILABLE)
        assert not guard.known
    finally:
        router.close()


@pytest.mark.parametrize("behaviour", ["raise", "hang", "unavailable"])
async def test_routing_signal_fails_open_unknown_not_false(behaviour: str, router_for: Callable[..., Router]) -> None:
    """A routing signal that cannot answer is unknown: neither its rule nor a `not` over it fires."""
    body = f"""
signal_timeout_ms: 150
signals:
  - {{name: topic, type: fake, behaviour: {behaviour}}}
decisions:
  - {{name: on_topic, priority: 20, when: {{signal: topic}}, action: {{type: route, models: [safe]}}}}
  - {{name: off_topic, priority: 10, when: {{not: {{signal: topic}}}}, action: {{type: reject, status: 400, message: "off", code: "off"}}}}
default: {{name: general, action: {{type: route, models: [general]}}}}
"""
    router = router_for(body)
    try:
        outcome = await router.route(chat())
        assert (outcome.action, outcome.decision) == ("route", "general")
        assert [t.value.name for t in outcome.trace[:2]] == ["UNKNOWN", "UNKNOWN"]
    finally:
        router.close()


async def test_on_error_reject_answers_503_when_the_signal_fails(router_for: Callable[..., Router]) -> None:
    router = router_for(guard_policy("raise", ", on_error: reject"))
    try:
        outcome = await router.route(chat())
        assert (outcome.action, outcome.status) == ("reject", 503)
        assert outcome.decision == "signal_failure:guard"
        assert wire.immediate_response(outcome).status == 503
    finally:
        router.close()


async def test_slow_signal_times_out_and_the_request_deadline_bounds_everything(
    router_for: Callable[..., Router],
) -> None:
    """Per-signal timeout 150 ms; the request deadline (300 ms) cuts a signal allowed 10 s."""
    body = """
signal_timeout_ms: 150
signals:
  - {name: slow, type: fake, delay_ms: 400}
  - {name: patient, type: fake, behaviour: hang, timeout_ms: 10000}
  - {name: quick, type: fake}
  - {name: guard, type: fake_safety, delay_ms: 5000, timeout_ms: 10000}
decisions:
  - {name: guarded, priority: 30, when: {signal: guard}, action: {type: route, models: [safe]}}
  - {name: slow_rule, priority: 20, when: {signal: slow}, action: {type: route, models: [general]}}
  - {name: other_rule, priority: 10, when: {any: [{signal: patient}, {not: {signal: quick}}]}, action: {type: route, models: [general]}}
default: {name: general, action: {type: route, models: [general]}}
"""
    router = router_for(body, deadline_ms=300)
    try:
        started = time.perf_counter()
        outcome = await router.route(chat())
        elapsed = time.perf_counter() - started
        assert elapsed < 0.8, f"{elapsed:.3f}s"
        status = {s.name: s.status for s in outcome.signals}
        # The guard hit the request deadline and failed closed, which decided the request: the
        # signals only lower-priority rules need were never started (lazy dispatch).
        assert status == {"guard": SignalStatus.TIMEOUT}
        assert (outcome.decision, outcome.model.name if outcome.model else None) == ("guarded", "safe")  # fail closed
        # With the guard answering "no" at once, the rest run under what is left of the deadline.
        router.policy.signals["guard"] = router.policy.signals["quick"].__class__(
            router.policy.signals["guard"].spec.model_copy(update={"delay_ms": 0.0, "behaviour": "no_match"})
        )
        started = time.perf_counter()
        outcome = await router.route(chat())
        assert time.perf_counter() - started < 0.8
        status = {s.name: s.status for s in outcome.signals}
        assert status == {
            "guard": SignalStatus.NOT_MATCHED,
            "slow": SignalStatus.TIMEOUT,
            "patient": SignalStatus.TIMEOUT,
            "quick": SignalStatus.MATCHED,
        }
        assert outcome.decision == "general"
    finally:
        router.close()


async def test_no_tasks_leak_after_many_hanging_signals(router_for: Callable[..., Router]) -> None:
    router = router_for(guard_policy("hang"))
    try:
        before = len(asyncio.all_tasks())
        outcomes = await asyncio.gather(*(router.route(chat(f"r{i}")) for i in range(200)))
        assert {o.decision for o in outcomes} == {"blocked"}
        await asyncio.sleep(0)
        assert len(asyncio.all_tasks()) <= before
    finally:
        router.close()


def vision_policy(strict: bool) -> str:
    strict_signal = (
        '  - {name: strict_scan, type: image_labels, labels: {xray: ["a chest x-ray"], car: ["a photo of a car"]}, on_error: reject}\n'
        if strict
        else ""
    )
    strict_rule = (
        "  - {name: strict, priority: 10, when: {signal: strict_scan, label: car}, action: {type: route, models: [safe]}}\n"
        if strict
        else ""
    )
    return (
        MODELS
        + "signals:\n"
        + '  - {name: scan, type: image_labels, labels: {xray: ["a chest x-ray"], car: ["a photo of a car"]}}\n'
        + strict_signal
        + "  - {name: has_image, type: modality}\n"
        + "decisions:\n"
        + "  - {name: medical, priority: 30, when: {signal: scan, label: xray}, action: {type: route, models: [safe]}}\n"
        + "  - {name: not_medical, priority: 20, when: {all: [{signal: has_image}, {not: {signal: scan, label: xray}}]}, action: {type: reject, status: 400, message: not medical, code: x}}\n"
        + strict_rule
        + "default: {name: general, action: {type: route, models: [general]}}\n"
    )


@pytest.mark.parametrize("strict", [False, True])
def test_vision_model_directory_missing_at_start_leaves_image_signals_unknown(tmp_path: Path, strict: bool) -> None:
    """The router starts; the image-label signal is unavailable; a rule over it never fires,
    not even through `not` (the request falls to the default); with on_error: reject the
    request is refused with 503 instead."""
    from tests.hardening.imagegen import chat as chat_body
    from tests.hardening.imagegen import data_uri, image_part, small

    policy = tmp_path / "vision.yaml"
    policy.write_text(vision_policy(strict))
    settings = Settings.load(
        None, environ={"VSR_POLICY_PATH": str(policy), "VSR_VISION__MODEL_DIR": str(tmp_path / "no-such-model")}
    )
    router = Router.from_settings(settings)
    try:
        assert router.policy.signals["scan"].unavailable_reason()
        body = json.dumps(
            chat_body({"type": "text", "text": "what is this?"}, image_part(data_uri(small("PNG"))))
        ).encode()
        outcome = asyncio.run(router.route(body))
        if strict:
            assert (outcome.action, outcome.status, outcome.decision) == ("reject", 503, "signal_failure:strict_scan")
        else:
            assert (outcome.action, outcome.decision) == ("route", "general")
            trace = {t.name: t.value.name for t in outcome.trace}
            assert trace["medical"] == "UNKNOWN" and trace["not_medical"] == "UNKNOWN"
    finally:
        router.close()


def valid_policy(version: int) -> str:
    return (
        MODELS
        + f"""
signals:
  - {{name: kw, type: keyword, keywords: [v{version}]}}
decisions:
  - {{name: d{version}, priority: 10, when: {{signal: kw}}, action: {{type: route, models: [safe]}}}}
default: {{name: general, action: {{type: route, models: [general]}}}}
"""
    )


INVALID = [
    "this: [is not: valid yaml",
    MODELS
    + "signals: []\ndecisions:\n  - {name: a, priority: 1, when: {signal: missing}, action: {type: route, models: [safe]}}\ndefault: {name: g, action: {type: route, models: [general]}}\n",
    MODELS
    + "signals:\n  - {name: k, type: keyword, keywords: [x]}\ndecisions:\n  - {name: a, priority: 1, when: {signal: k}, action: {type: route, models: [safe]}}\n  - {name: b, priority: 1, when: {signal: k}, action: {type: route, models: [safe]}}\ndefault: {name: g, action: {type: route, models: [general]}}\n",
    "",
    "\x00\x01binary",
]


async def test_reload_storm_keeps_the_last_good_policy_serving(tmp_path: Path) -> None:
    """Alternate valid and invalid policy files 60 times while requests keep flowing:
    every invalid file raises PolicyError and changes nothing; every request gets an outcome
    from one whole policy (never a mix); the last good policy is the one serving at the end."""
    path = tmp_path / "policy.yaml"
    path.write_text(valid_policy(0))
    settings = Settings.load(None, environ={"VSR_POLICY_PATH": str(path)})
    router = Router.from_settings(settings)
    rng = random.Random(7)
    stop = asyncio.Event()
    seen: list[tuple[str, str | None]] = []

    async def traffic() -> None:
        i = 0
        while not stop.is_set() and i < 5000:
            i += 1
            outcome = await router.route(chat(f"v{i % 40} hello"))
            assert outcome.action == "route"
            seen.append((outcome.policy_version, outcome.decision))
            await asyncio.sleep(0)

    clients = [asyncio.create_task(traffic()) for _ in range(4)]
    good_version = router.policy.version
    last_good = 0
    refused = 0
    try:
        for round_ in range(60):
            if round_ % 2:
                path.write_text(rng.choice(INVALID))
                with pytest.raises(PolicyError):
                    router.load(path)
                refused += 1
            else:
                last_good = round_ // 2 + 1
                path.write_text(valid_policy(last_good))
                good_version = router.load(path).version
                router.swap(router.load(path))
            assert router.policy.version == good_version
            await asyncio.sleep(0.005)
    finally:
        stop.set()
        await asyncio.gather(*clients)
        router.close()
    assert refused == 30 and len(seen) > 100
    final = await router.route(chat(f"v{last_good}"))
    assert final.decision == f"d{last_good}"
    for _, decision in seen:  # every decision is one a whole valid policy could make
        assert decision == "general" or (decision or "").startswith("d")
