"""PII with an NER model: entity kinds mapped from a token classifier, merged with the pattern
findings, redacted evidence, a policy error for unknown entity types, unknown without the model."""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from extproc.policy.load import PolicyError, PolicyLoader, compile_text
from extproc.protocol.request import ApiKind, Role, RoutingRequest, TextSegment
from extproc.router import Router
from extproc.signals.base import BuildContext, Evaluation, Signal, SignalContext, SignalStatus
from extproc.signals.dispatch import Dispatcher
from extproc.signals.pii import PiiNerSignal, PiiSignal, PiiSpec
from extproc.testing.tiny_text_models import build_tiny_token_classifier

ENTITY_WORDS = {"john": "B-PER", "smith": "I-PER", "anna": "B-PER", "paris": "B-LOC", "london": "B-LOC"}
TEXT = "My name is John Smith, mail jane@example.com; I live in Paris."


@pytest.fixture(scope="module")
def ner_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_token_classifier(tmp_path_factory.mktemp("ner"), entity_words=ENTITY_WORDS)


def user(text: str) -> RoutingRequest:
    return RoutingRequest(api=ApiKind.CHAT, model="auto", stream=False, texts=[TextSegment(Role.USER, text, 0)])


def spec(model: Path | str, **kw: Any) -> PiiSpec:
    ner = {"model": str(model), "labels": {"PER": "person_name", "LOC": "location"}} | kw.pop("ner", {})
    return PiiSpec(name="pii", type="pii", ner=ner, **kw)


def build(s: PiiSpec, ctx: BuildContext) -> Signal:
    return PiiSignal.build(s, ctx)


async def evaluate(signal: Signal, text: str, ctx: BuildContext) -> Evaluation:
    return await signal.evaluate(user(text), SignalContext(executor=ctx.executor, deadline=time.monotonic() + 10))


def test_spec_validation(ner_dir: Path) -> None:
    with pytest.raises(ValidationError, match="lower_snake_case"):
        spec(ner_dir, ner={"labels": {"PER": "Person Name"}})
    with pytest.raises(ValidationError, match="none of its kinds is in `entities`"):
        spec(ner_dir, entities=["email"])
    with pytest.raises(ValidationError, match="unknown PII kind"):
        PiiSpec(name="pii", type="pii", entities=["person_name"])  # an NER kind needs an NER model
    s = spec(ner_dir, entities=["person_name", "email"], allow=["location"])
    assert s.known_kinds()[-2:] == ("person_name", "location")


def test_without_ner_the_signal_stays_inline(build_ctx: BuildContext) -> None:
    signal = build(PiiSpec(name="pii", type="pii"), build_ctx)
    assert type(signal) is PiiSignal and signal.inline


async def test_entities_merge_with_patterns_and_are_redacted(build_ctx: BuildContext, ner_dir: Path) -> None:
    signal = build(spec(ner_dir), build_ctx)
    assert isinstance(signal, PiiNerSignal)
    assert not signal.inline and signal.safety and signal.on_error == "match"
    assert signal.known_labels() >= {"email", "credit_card", "person_name", "location"}
    ev = await evaluate(signal, TEXT, build_ctx)
    assert ev.matched
    assert set(ev.labels) == {"person_name", "email", "location"}
    assert ev.labels["person_name"] > 0.99
    assert "person_name ******** (10 chars)" in ev.evidence  # "John Smith": no character of it shown
    assert "location ***** (5 chars)" in ev.evidence
    joined = " ".join(ev.evidence)
    assert "John" not in joined and "Smith" not in joined and "Paris" not in joined and "jane@" not in joined


async def test_mapping_entities_allow_and_min_score(build_ctx: BuildContext, ner_dir: Path) -> None:
    only_people = build(spec(ner_dir, ner={"labels": {"PER": "person_name"}}), build_ctx)
    assert set((await evaluate(only_people, TEXT, build_ctx)).labels) == {"person_name", "email"}
    names = build(spec(ner_dir, entities=["person_name"]), build_ctx)
    assert (await evaluate(names, TEXT, build_ctx)).labels.keys() == {"person_name"}
    allowed = build(spec(ner_dir, allow=["location"]), build_ctx)
    ev = await evaluate(allowed, "I live in London.", build_ctx)
    assert not ev.matched and set(ev.labels) == {"location"} and ev.evidence[0].endswith("(allowed)")


async def test_patterns_win_where_an_entity_overlaps_them(build_ctx: BuildContext, ner_dir: Path) -> None:
    signal = build(spec(ner_dir), build_ctx)
    ev = await evaluate(signal, "write to anna@example.org", build_ctx)  # the model tags "anna" as PER
    assert set(ev.labels) == {"email"}


async def test_a_random_model_forced_to_one_label(build_ctx: BuildContext, tmp_path: Path) -> None:
    model = build_tiny_token_classifier(tmp_path, force="B-PER")
    ev = await evaluate(build(spec(model), build_ctx), "hello there", build_ctx)
    assert ev.matched and set(ev.labels) == {"person_name"}
    assert len([e for e in ev.evidence if e.startswith("person_name")]) == 2  # each word its own entity
    # Each word's probability is e^4 / (e^4 + 6 e^-4) ~ 0.998: ner.min_score filters on it.
    assert ev.labels["person_name"] == pytest.approx(0.998, abs=5e-4)
    strict = build(spec(model, ner={"min_score": 0.999}), build_ctx)
    assert not (await evaluate(strict, "hello there", build_ctx)).matched


def test_unknown_entity_type_is_a_policy_error(build_ctx: BuildContext, ner_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"no entity type\(s\) 'ORG'; its types are \['DATE', 'LOC', 'PER'\]"):
        build(spec(ner_dir, ner={"labels": {"PER": "person_name", "ORG": "organization"}}), build_ctx)


async def test_missing_model_is_unknown_and_fails_closed(build_ctx: BuildContext, tmp_path: Path) -> None:
    signal = build(spec(tmp_path / "missing"), build_ctx)
    reason = signal.unavailable_reason()
    assert reason is not None and "not a directory" in reason
    results = await Dispatcher(build_ctx.executor, 1000).run([signal], user(TEXT), time.monotonic() + 5)
    assert results["pii"].status is SignalStatus.UNAVAILABLE


POLICY = """\
version: 1
models:
  - {name: general, cluster: general, modalities: [text]}
  - {name: private, cluster: private, modalities: [text]}
signals:
  - name: pii
    type: pii
    ner: {model: "MODEL", labels: {PER: person_name, LOC: location}, min_score: 0.6}
decisions:
  - name: names
    priority: 100
    when: {signal: pii, label: person_name}
    action: {type: route, models: [private]}
default:
  name: general
  action: {type: route, models: [general]}
"""


def route(ctx: BuildContext, model: Path, text: str) -> Any:
    policy = compile_text(textwrap.dedent(POLICY.replace("MODEL", str(model))), ctx, loader=PolicyLoader(file="t.yaml"))
    router = Router(ctx.settings, policy, executor=ctx.executor, models=ctx.models)
    body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
    return asyncio.run(router.route(body))


def test_policy_routes_on_ner_kinds(build_ctx: BuildContext, ner_dir: Path, tmp_path: Path) -> None:
    assert route(build_ctx, ner_dir, "Ask John about it").decision == "names"
    assert route(build_ctx, ner_dir, "Ask about the weather in Paris").decision == "general"
    # Without the model the rule fails closed (pii is a safety signal).
    assert route(build_ctx, tmp_path / "missing", "Ask about the weather").decision == "names"
    bad = POLICY.replace("MODEL", str(ner_dir)).replace("LOC: location", "ORG: organization")
    with pytest.raises(PolicyError, match=r"signal 'pii' could not be built: ner\.labels: the model has no entity type"):
        compile_text(textwrap.dedent(bad), build_ctx, loader=PolicyLoader(file="t.yaml"))
