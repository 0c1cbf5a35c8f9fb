"""Requests through the default policy as `make run` serves it, for the tests that pin its routes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from extproc.outcome import RoutingOutcome
from extproc.router import Router
from extproc.settings import Settings
from extproc.signals.base import SignalResult
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


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON-lines file (a dev set), blank lines skipped."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
