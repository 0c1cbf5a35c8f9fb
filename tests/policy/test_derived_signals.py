"""Derived signals: scores with bands and partitions, lazy and Kleene-aware, through the Router."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from extproc.policy.load import PolicyError
from extproc.router import Router
from extproc.signals.base import SignalStatus


def chat(text: str = "hello") -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()


def policy(signals: str, decisions: str) -> str:
    return (
        f"signal_timeout_ms: 500\nsignals:\n{signals}\ndecisions:\n{decisions}\n"
        "default:\n  name: general\n  action: {type: route, models: [text-model]}\n"
    )


RISK = """
  - name: risk
    type: score
    inputs:
      - {signal: cheap_a, weight: 0.5}
      - {signal: cheap_b, weight: 0.3, value: confidence}
      - {signal: costly, weight: 0.4}
    bands:
      - {name: low, lt: 0.6}
      - {name: high, gte: 0.6}
"""
RISK_RULES = (
    "  - {name: risky, priority: 2, when: {signal: risk, label: high}, action: {type: route, models: [big-text]}}\n"
    "  - {name: calm, priority: 1, when: {signal: risk, label: low}, action: {type: route, models: [vlm]}}\n"
)


def inputs(a: str, b: str, costly: str, b_score: float = 1.0) -> str:
    return (
        f"  - {{name: cheap_a, type: fake_inline, behaviour: {a}}}\n"
        f"  - {{name: cheap_b, type: fake_inline, behaviour: {b}, score: {b_score}}}\n"
        f"  - {{name: costly, type: fake, behaviour: {costly}}}\n"
    )


async def test_the_band_decided_by_cheap_inputs_never_runs_the_expensive_one(
    make_router: Callable[..., Router],
) -> None:
    # 0.5 + 0.3 = 0.8 >= 0.6 whatever `costly` says: it must not run (it would raise).
    router = make_router(policy(inputs("match", "match", "raise") + RISK, RISK_RULES))
    outcome = await router.route(chat())
    assert outcome.decision == "risky"
    ran = {s.name for s in outcome.signals if s.type != "score"}
    assert ran == {"cheap_a", "cheap_b"}
    risk = next(s for s in outcome.signals if s.name == "risk")
    assert risk.status is SignalStatus.MATCHED and risk.labels == {"high": 1.0}
    # each input's contribution is in the evidence, the one not run as a range
    assert any("cheap_a: 1.000 x 0.5 = +0.500" in e for e in risk.evidence)
    assert any("costly: not run [+0.000, +0.400]" in e for e in risk.evidence)
    # the outcome (what the decision log, the console and explain show) carries the same breakdown
    logged = next(s for s in outcome.to_dict()["signals"] if s["name"] == "risk")
    assert logged["labels"] == {"high": 1.0} and "cheap_b: 1.000 x 0.3 = +0.300" in logged["evidence"]


async def test_an_undecided_band_runs_the_expensive_input(make_router: Callable[..., Router]) -> None:
    # 0.5 alone: the band depends on `costly` (0.5 or 0.9), so it runs.
    router = make_router(policy(inputs("match", "no_match", "match") + RISK, RISK_RULES))
    outcome = await router.route(chat())
    assert "costly" in {s.name for s in outcome.signals}
    assert outcome.decision == "risky"
    router = make_router(policy(inputs("match", "no_match", "no_match") + RISK, RISK_RULES))
    assert (await router.route(chat())).decision == "calm"


async def test_confidence_reads_the_inputs_score(make_router: Callable[..., Router]) -> None:
    # cheap_b matched with confidence 0.2: 0.5 + 0.06 = 0.56 < 0.6 without costly
    router = make_router(policy(inputs("match", "match", "no_match", b_score=0.2) + RISK, RISK_RULES))
    outcome = await router.route(chat())
    assert outcome.decision == "calm"
    risk = next(s for s in outcome.signals if s.name == "risk")
    assert risk.score == pytest.approx(0.56)


async def test_an_unknown_input_leaves_an_undecided_band_unknown(make_router: Callable[..., Router]) -> None:
    # costly fails: the score lies in [0.5, 0.9], across the 0.6 boundary -> neither band is known
    router = make_router(policy(inputs("match", "no_match", "raise") + RISK, RISK_RULES))
    outcome = await router.route(chat())
    assert outcome.decision == "general"
    risk = next(s for s in outcome.signals if s.name == "risk")
    assert risk.status is SignalStatus.UNAVAILABLE and "undecided" in (risk.error or "")
    # ... and `not high` is unknown too, never true (Kleene)
    negated = "  - {name: safe, priority: 3, when: {not: {signal: risk, label: high}}, action: {type: route, models: [vlm]}}\n"
    router = make_router(policy(inputs("match", "no_match", "raise") + RISK, negated + RISK_RULES))
    assert (await router.route(chat())).decision == "general"


async def test_if_unknown_says_what_a_failed_input_counts_as(make_router: Callable[..., Router]) -> None:
    spec = RISK.replace("{signal: costly, weight: 0.4}", "{signal: costly, weight: 0.4, if_unknown: 1.0}")
    router = make_router(policy(inputs("match", "no_match", "raise") + spec, RISK_RULES))
    outcome = await router.route(chat())
    assert outcome.decision == "risky"
    risk = next(s for s in outcome.signals if s.name == "risk")
    assert any("(assumed)" in e for e in risk.evidence)


async def test_a_failed_safety_input_fails_closed(make_router: Callable[..., Router]) -> None:
    signals = (
        "  - {name: cheap_a, type: fake_inline, behaviour: match}\n"
        "  - {name: cheap_b, type: fake_inline, behaviour: no_match}\n"
        "  - {name: costly, type: fake_safety, behaviour: raise}\n"
    )
    router = make_router(policy(signals + RISK, RISK_RULES))
    assert (await router.route(chat())).decision == "risky"


async def test_threshold_and_min_score_on_a_score(make_router: Callable[..., Router]) -> None:
    spec = """
  - name: s
    type: score
    threshold: 0.4
    inputs:
      - {signal: cheap_a, weight: 0.5}
      - {signal: cheap_b, weight: -0.3}
"""
    signals = "  - {name: cheap_a, type: fake_inline}\n  - {name: cheap_b, type: fake_inline, behaviour: match}\n"
    rules = "  - {name: hit, priority: 1, when: {signal: s}, action: {type: route, models: [big-text]}}\n"
    assert (await make_router(policy(signals + spec, rules)).route(chat())).decision == "general"  # 0.2 < 0.4
    signals = signals.replace("behaviour: match", "behaviour: no_match")
    assert (await make_router(policy(signals + spec, rules)).route(chat())).decision == "hit"  # 0.5


async def test_partition_picks_one_winner(make_router: Callable[..., Router]) -> None:
    spec = """
  - name: subject
    type: partition
    temperature: 0.1
    members:
      - {signal: math, weight: 1, value: score}
      - {signal: code, weight: 1, value: score}
      - {signal: law, weight: 1, value: score}
"""
    signals = (
        "  - {name: math, type: fake_inline, score: 0.4}\n"
        "  - {name: code, type: fake_inline, score: 0.7}\n"
        "  - {name: law, type: fake, score: 0.2}\n"
    )
    rules = (
        "  - {name: to_code, priority: 2, when: {signal: subject, label: code}, action: {type: route, models: [big-text]}}\n"
        "  - {name: to_math, priority: 1, when: {signal: subject, label: math}, action: {type: route, models: [vlm]}}\n"
    )
    outcome = await make_router(policy(signals + spec, rules)).route(chat())
    assert outcome.decision == "to_code"
    subject = next(s for s in outcome.signals if s.name == "subject")
    assert set(subject.labels) == {"code"} and subject.labels["code"] == pytest.approx(0.9465, abs=1e-3)


async def test_a_score_over_a_score(make_router: Callable[..., Router]) -> None:
    spec = (
        RISK
        + """
  - name: outer
    type: score
    threshold: 0.5
    inputs:
      - {signal: risk, weight: 1.0, label: high}
"""
    )
    rules = "  - {name: hit, priority: 1, when: {signal: outer}, action: {type: route, models: [big-text]}}\n"
    outcome = await make_router(policy(inputs("match", "match", "raise") + spec, rules)).route(chat())
    assert outcome.decision == "hit"
    assert "costly" not in {s.name for s in outcome.signals}


def test_check_reports_unknown_inputs_cycles_labels_and_weights(policy_errors: Callable[..., list[str]]) -> None:
    signals = """
  - {name: codename, type: fake_inline}
  - name: a
    type: score
    threshold: 0.5
    inputs: [{signal: b, weight: 1}, {signal: codenam, weight: 1}]
  - name: b
    type: score
    threshold: 0.5
    inputs: [{signal: a, weight: 1}]
  - name: zero
    type: score
    threshold: 0.5
    inputs: [{signal: codename, weight: 0}]
  - name: c
    type: score
    threshold: 0.5
    inputs: [{signal: a, weight: 1, label: nope}]
"""
    rules = (
        "  - {name: x, priority: 3, when: {signal: a}, action: {type: route, models: [big-text]}}\n"
        "  - {name: y, priority: 2, when: {signal: zero}, action: {type: route, models: [big-text]}}\n"
        "  - {name: z, priority: 1, when: {signal: c}, action: {type: route, models: [big-text]}}\n"
    )
    errors = "\n".join(policy_errors(policy(signals, rules)))
    assert "unknown signal 'codenam'; did you mean 'codename'?" in errors
    assert "cycle: a -> b -> a" in errors
    assert "every weight is zero" in errors
    assert "has no label 'nope'" in errors


def test_overlapping_bands_are_refused(compile_policy: Callable[..., object]) -> None:
    spec = RISK.replace("{name: high, gte: 0.6}", "{name: high, gte: 0.5}")
    with pytest.raises(PolicyError, match="overlap"):
        compile_policy(policy(inputs("match", "match", "match") + spec, RISK_RULES))


def test_a_band_out_of_reach_is_warned_about(policy_diagnostics: Callable[..., list[object]]) -> None:
    spec = RISK.replace("{name: high, gte: 0.6}", "{name: high, gte: 1.5}").replace("lt: 0.6", "lt: 1.5")
    found = [
        str(getattr(d, "message", ""))
        for d in policy_diagnostics(policy(inputs("match", "match", "match") + spec, RISK_RULES))
    ]
    assert any("out of reach" in m for m in found)
