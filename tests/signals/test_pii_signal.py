"""PII signal: labels, allow-list, min_score, roles, redacted evidence, validation."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from extproc.detectors.pii import PII_KINDS
from extproc.protocol.request import ApiKind, Role, RoutingRequest, TextSegment
from extproc.signals.pii import PiiSignal, PiiSpec


def req(*parts: tuple[Role, str]) -> RoutingRequest:
    texts = [TextSegment(role=role, text=text, message_index=i) for i, (role, text) in enumerate(parts)]
    return RoutingRequest(api=ApiKind.CHAT, model="auto", stream=False, texts=texts, turn_count=1)


def user(text: str) -> RoutingRequest:
    return req((Role.USER, text))


def signal(**kw: Any) -> PiiSignal:
    return PiiSignal(PiiSpec(type="pii", name="pii", **kw))


TEXT = "Card 4111 1111 1111 1111, mail jane@example.com"


def test_matches_with_labels_and_redacted_evidence() -> None:
    ev = signal().compute(user(TEXT))
    assert ev.matched
    assert ev.labels == {"credit_card": 0.95, "email": 0.95}
    assert ev.score == 0.95
    assert "credit_card ****1111" in ev.evidence
    assert not any("4111 1111" in e or "jane@example.com" in e for e in ev.evidence)


def test_no_pii() -> None:
    ev = signal().compute(user("What is the capital of France? Version 3.11.2 released 2024-01-05."))
    assert not ev.matched and ev.score == 0.0 and ev.labels == {}


def test_entities_subset() -> None:
    s = signal(entities=["email"])
    ev = s.compute(user(TEXT))
    assert ev.labels == {"email": 0.95}
    assert s.known_labels() == frozenset({"email"})
    assert not signal(entities=["iban"]).compute(user(TEXT)).matched


def test_allowed_kinds_are_reported_but_do_not_match() -> None:
    s = signal(allow=["email"])
    ev = s.compute(user("mail jane@example.com"))
    assert not ev.matched
    assert ev.labels == {"email": 0.95}
    assert ev.evidence[0].endswith("(allowed)")
    assert s.compute(user(TEXT)).matched  # the card still counts


def test_min_score() -> None:
    text = "call 06 12 34 56 78"  # national format: lower confidence
    assert signal().compute(user(text)).matched
    ev = signal(min_score=0.9).compute(user(text))
    assert not ev.matched and ev.labels == {}


def test_roles() -> None:
    r = req((Role.SYSTEM, "support line +1 415 555 2671"), (Role.TOOL, TEXT), (Role.USER, "hi"))
    assert not signal().compute(r).matched
    assert signal(roles=["tool"]).compute(r).labels.keys() == {"credit_card", "email"}
    assert signal(roles=["system", "user"]).compute(r).labels.keys() == {"phone"}


def test_safety_defaults() -> None:
    s = signal()
    assert s.safety and s.inline and s.on_error == "match" and s.type == "pii"
    assert s.known_labels() == frozenset(PII_KINDS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"entities": ["dna"]}, "unknown PII kind"),
        ({"allow": ["shoe_size"]}, "unknown PII kind"),
        ({"entities": []}, "at least 1"),
        ({"entities": ["email"], "allow": ["email"]}, "could never match"),
        ({"min_score": 1.5}, "min_score"),
    ],
)
def test_spec_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PiiSpec(type="pii", name="pii", **kwargs)
