"""Requests through the default policy as `make run` serves it, for the tests that pin its routes."""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from typing import Any

import yaml

from extproc.outcome import RoutingOutcome
from extproc.router import Router
from extproc.settings import Settings
from extproc.signals.base import SignalResult
from extproc.signals.keyword import KeywordSignal, KeywordSpec
from tests.suite_env import SUITE_ENVIRON


def default_router() -> Router:
    """The router the default settings build (the packaged default policy, the shipped models)."""
    return Router.from_settings(Settings.load(None, environ=SUITE_ENVIRON))


def route_text(router: Router, text: str) -> RoutingOutcome:
    """One user message routed, as an OpenAI Chat request asking the router to choose."""
    body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
    return asyncio.run(router.route(body))


def signal(outcome: RoutingOutcome, name: str) -> SignalResult:
    """The named signal's result in a routed outcome."""
    return next(s for s in outcome.signals if s.name == name)


def matched_labels(outcome: RoutingOutcome, names: tuple[str, ...]) -> list[str]:
    """The labels of the named signals that matched, in the outcome's signal order."""
    return [label for s in outcome.signals if s.name in names and s.matched for label in s.labels]


# The decisions that refuse a harmful request (a jailbreak may be what a harmful text reads as first).
REFUSALS = ("harmful_request", "jailbreak_block")


def _matched_signals(outcome: RoutingOutcome) -> str:
    """The signals that matched, each with its labels: what a failed refusal check reports."""
    named = [f"{s.name}[{', '.join(s.labels)}]" if s.labels else s.name for s in outcome.signals if s.matched]
    return "; ".join(named) or "none"


def assert_refused(router: Router, text: str) -> RoutingOutcome:
    """Routes `text` and checks that a refusal decides it; returns the outcome for further checks."""
    outcome = route_text(router, text)
    assert outcome.decision in REFUSALS, (
        f"expected a refusal of {text!r}, got decision {outcome.decision!r}; "
        f"signals matched: {_matched_signals(outcome)}"
    )
    return outcome


def assert_answered(router: Router, text: str) -> RoutingOutcome:
    """Routes `text` and checks that no refusal decides it; returns the outcome for further checks."""
    outcome = route_text(router, text)
    assert outcome.decision not in REFUSALS, (
        f"expected {text!r} answered, got decision {outcome.decision!r}; signals matched: {_matched_signals(outcome)}"
    )
    return outcome


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON-lines file (a dev set), blank lines skipped."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


POLICY = Path(__file__).resolve().parents[2] / "extproc" / "data" / "policies" / "default.yaml"


@functools.cache
def _policy_signal(name: str) -> dict[str, Any]:
    specs: list[dict[str, Any]] = yaml.safe_load(POLICY.read_text(encoding="utf-8"))["signals"]
    return next(s for s in specs if s["name"] == name)


def excuse_words(text: str) -> list[str]:
    """The game, film, story or prop words of harmful_howto's `excuse_in_sentence` that `text` holds
    anywhere (the pattern signals read them in a match's own sentence only)."""
    words = {
        "name": "excuse",
        "type": "keyword",
        "regex": True,
        "keywords": _policy_signal("harmful_howto")["excuse_in_sentence"],
    }
    return KeywordSignal(KeywordSpec.model_validate(words)).found(text)


def keyword_signal(name: str, **overrides: Any) -> KeywordSignal:
    """The default policy's keyword signal `name` built on its own (the policy read once), with
    any spec fields replaced by `overrides` (e.g. `prefilter=[]` for the ungated patterns)."""
    return KeywordSignal(KeywordSpec.model_validate({**_policy_signal(name), **overrides}))


def without_excuse(name: str) -> KeywordSignal:
    """The named pattern signal with its `excuse_in_sentence` dropped: what its patterns name
    before a game or film word excuses them."""
    return keyword_signal(name, excuse_in_sentence=[])
