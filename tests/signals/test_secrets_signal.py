"""Secrets signal: kinds, roles, redacted evidence, validation."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from extproc.protocol.request import ApiKind, Role, RoutingRequest, TextSegment
from extproc.signals.secrets import SecretsSignal, SecretsSpec

KEY = "AKIAIOSFODNN7EXAMPLE"
TOKEN = "ghp_aBcD1234EfGh5678IjKl9012MnOp3456QrSt"


def req(*parts: tuple[Role, str]) -> RoutingRequest:
    texts = [TextSegment(role=role, text=text, message_index=i) for i, (role, text) in enumerate(parts)]
    return RoutingRequest(api=ApiKind.CHAT, model="auto", stream=False, texts=texts, turn_count=1)


def signal(**kw: Any) -> SecretsSignal:
    return SecretsSignal(SecretsSpec(type="secrets", name="secrets", **kw))


def test_matches_with_redacted_evidence() -> None:
    ev = signal().compute(req((Role.USER, f"why does boto fail with {KEY}? also {TOKEN}")))
    assert ev.matched
    assert set(ev.labels) == {"aws_access_key", "github_token"}
    assert ev.score == 0.95
    assert not any(KEY in e or TOKEN in e for e in ev.evidence)


def test_no_secret_in_code() -> None:
    code = "```python\npassword = getpass.getpass()\nsha = '3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a'\n```"
    ev = signal().compute(req((Role.USER, code)))
    assert not ev.matched and ev.labels == {}


def test_kinds_subset() -> None:
    s = signal(kinds=["github_token"])
    ev = s.compute(req((Role.USER, f"{KEY} {TOKEN}")))
    assert set(ev.labels) == {"github_token"}
    assert s.known_labels() == frozenset({"github_token"})


def test_roles() -> None:
    r = req((Role.SYSTEM, f"internal key {KEY}"), (Role.USER, "hello"))
    assert not signal().compute(r).matched
    assert signal(roles=["system"]).compute(r).matched


def test_safety_defaults() -> None:
    s = signal()
    assert s.safety and s.inline and s.on_error == "match"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"kinds": ["password"]}, "unknown secret kind"), ({"kinds": []}, "at least 1"), ({"min_score": -1}, "min_score")],
)
def test_spec_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SecretsSpec(type="secrets", name="secrets", **kwargs)
