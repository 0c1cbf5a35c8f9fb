"""The `domain` signal: whose text counts (user turns only, newest first, code removed), the
cascade (stage 1 decides inline, MiniLM only for unsure texts, one embedding per text shared with
`semantic`), threshold and fallback, bring-your-own checkpoints (id2label and category_mapping.json,
labels_map), and what a missing model means (unknown, never a subject)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from extproc.models.domain_classifier import SUBJECTS
from extproc.models.registry import ModelRegistry
from extproc.models.text_embedder import EMBEDDER_MODEL_NAME
from extproc.policy.load import CompiledPolicy, PolicyError, PolicyLoader, compile_text
from extproc.protocol.openai import parse_request
from extproc.router import Router
from extproc.server import wire
from extproc.settings import EmbedderSettings
from extproc.signals.base import BuildContext, Evaluation, SignalContext, SignalStatus, SignalUnavailable
from extproc.signals.domain import (
    CATEGORY_MAPPING_FILE,
    DOMAIN_MODEL_NAME,
    CheckpointDomainSignal,
    DomainSignal,
    DomainSpec,
    ShippedDomainModel,
    ShippedDomainSignal,
    select_turns,
    strip_code,
)
from extproc.testing.tiny_text_models import build_tiny_sequence_classifier

K = len(SUBJECTS)


def one_hot(label: str, p: float) -> np.ndarray[Any, Any]:
    row = np.full(K, (1.0 - p) / (K - 1), dtype=np.float32)
    row[SUBJECTS.index(label)] = p
    return row


@dataclass
class StubDomain:
    """A shipped-model stand-in: stage 1 by keyword, stage 2 returns `head_label`."""

    confident: float = 0.6
    labels: tuple[str, ...] = SUBJECTS
    head_label: str = "physics"
    lexical_calls: list[str] = field(default_factory=list)
    head_calls: int = 0

    def first_stage_probs(self, text: str) -> np.ndarray[Any, Any]:
        self.lexical_calls.append(text)
        if "integral" in text:
            return one_hot("math", 0.9)
        if "contract" in text:
            return one_hot("law", 0.8)
        return one_hot("engineering", 0.3)  # unsure

    def embedding_probs(self, embedding: Any, lexical: Any) -> np.ndarray[Any, Any]:
        assert np.asarray(embedding).shape == (384,)
        self.head_calls += 1
        return one_hot(self.head_label, 0.7)


class StubEmbedder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.cache: dict[str, np.ndarray[Any, Any]] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        fresh = [t for t in texts if t not in self.cache]
        if fresh:
            self.calls.append(fresh)
        for t in fresh:
            v = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).standard_normal(384)
            self.cache[t] = (v / np.linalg.norm(v)).astype(np.float32)
        return np.stack([self.cache[t] for t in texts])


def chat(*messages: tuple[str, Any]) -> Any:
    return parse_request({"model": "auto", "messages": [{"role": r, "content": c} for r, c in messages]})


def spec(**kw: Any) -> DomainSpec:
    return DomainSpec(name="subject", type="domain", **kw)


@pytest.fixture
def stub() -> StubDomain:
    return StubDomain()


@pytest.fixture
def embedder() -> StubEmbedder:
    return StubEmbedder()


@pytest.fixture
def ctx(build_ctx: BuildContext, stub: StubDomain, embedder: StubEmbedder) -> BuildContext:
    build_ctx.models.put(DOMAIN_MODEL_NAME, ShippedDomainModel(stub))
    build_ctx.models.put(EMBEDDER_MODEL_NAME, embedder)
    return build_ctx


def run_ctx(build_ctx: BuildContext) -> SignalContext:
    return SignalContext(executor=build_ctx.executor, deadline=time.monotonic() + 10.0)


async def evaluate(signal: DomainSignal, request: Any, build_ctx: BuildContext) -> Evaluation:
    return await signal.evaluate(request, run_ctx(build_ctx))


# -- the spec and text selection ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"roles": ["system"]}, "user's own turns only"),
        ({"threshold": 1.5}, "less than or equal to 1"),
        ({"labels_map": {"astrology": "other"}}, "no label\\(s\\) 'astrology'"),
        ({"model_dir": "/x", "confident": 0.5}, "confident applies to the shipped cascade"),
        ({"fallback": "bad/name"}, "fallback must match"),
    ],
)
def test_spec_validation(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        spec(**fields)


def test_only_user_turns_count_newest_first_code_removed() -> None:
    request = chat(
        ("system", "You are a contract lawyer."),
        ("user", "what is an integral"),
        ("assistant", "An integral is ..."),
        ("tool", "contract contract contract"),
        ("user", "```python\nprint('hi')\n```"),  # code alone: skipped
        ("user", "and the second part? ```x = 1``` thanks"),
    )
    turns = select_turns(request, spec())
    assert [t.text for t in turns] == ["and the second part? thanks", "what is an integral"]
    assert [t.weight for t in turns] == [1.0, 0.5]
    assert [t.where for t in turns] == ["message[5]", "message[1]"]
    assert strip_code("a ~~~\ncode\n~~~ b ```unclosed") == "a   b  "
    assert select_turns(chat(("user", "  ")), spec()) == []
    long = select_turns(chat(("user", "word " * 2000)), spec(max_chars=100))[0]
    assert len(long.text) <= 100 + 5 and " ... " in long.text


# -- the shipped cascade ------------------------------------------------------------------------


async def test_stage_one_decides_without_a_hop_and_reports_top_and_runner_up(
    ctx: BuildContext, stub: StubDomain, embedder: StubEmbedder
) -> None:
    signal = DomainSignal.build(spec(), ctx)
    assert isinstance(signal, ShippedDomainSignal)
    assert signal.known_labels() == frozenset(SUBJECTS)
    request = chat(("user", "compute the integral of x^2"))
    now = signal.answer_now(request)
    assert now is not None and now.labels == {"math": pytest.approx(0.9)}
    assert now.score == pytest.approx(0.9)
    assert any("top math=0.900, runner-up" in e for e in now.evidence) and "stage: first" in now.evidence
    assert embedder.calls == [] and stub.head_calls == 0


async def test_unsure_texts_go_to_minilm_once(ctx: BuildContext, stub: StubDomain, embedder: StubEmbedder) -> None:
    signal = DomainSignal.build(spec(), ctx)
    request = chat(("user", "how strong must this beam be"))
    assert signal.answer_now(request) is None  # stage 1 is unsure: the dispatcher starts a task
    ev = await evaluate(signal, request, ctx)
    assert ev.labels == {"physics": pytest.approx(0.7)} and embedder.calls == [["how strong must this beam be"]]
    assert any("stage: embedding for 1 of 1" in e for e in ev.evidence)
    # The same text again: stage 2 is cached, answered now, no new embedding.
    again = signal.answer_now(request)
    assert again is not None and again.labels == ev.labels and len(embedder.calls) == 1 and stub.head_calls == 1


async def test_two_signals_on_the_shipped_weights_classify_a_text_once(
    ctx: BuildContext, stub: StubDomain, embedder: StubEmbedder
) -> None:
    """The default policy reads the weights twice (`subject`, and `subject_area` with the STEM
    subjects added up): stage 2's answer is the model's, so the second signal needs no hop."""
    subject = DomainSignal.build(spec(), ctx)
    area_spec = spec(labels_map={"physics": "stem", "math": "stem"}).model_copy(update={"name": "subject_area"})
    area = DomainSignal.build(area_spec, ctx)
    request = chat(("user", "how strong must this beam be"))
    assert (await evaluate(subject, request, ctx)).labels == {"physics": pytest.approx(0.7)}
    grouped = area.answer_now(request)
    assert grouped is not None and grouped.labels == {"stem": pytest.approx(0.7 + 0.3 / 13)}
    assert stub.head_calls == 1 and len(embedder.calls) == 1


async def test_threshold_fallback_and_confident_override(ctx: BuildContext, stub: StubDomain) -> None:
    strict = DomainSignal.build(spec(threshold=0.95, fallback="general_talk"), ctx)
    ev = strict.answer_now(chat(("user", "compute the integral")))
    assert ev is not None and ev.labels == {"general_talk": pytest.approx(0.9)}
    assert strict.known_labels() == frozenset([*SUBJECTS, "general_talk"])
    # confident 0: stage 1 always decides, MiniLM never loads or runs.
    cheap = DomainSignal.build(spec(confident=0.0, threshold=0.2), ctx)
    ev = cheap.answer_now(chat(("user", "how strong must this beam be")))
    assert ev is not None and ev.labels == {"engineering": pytest.approx(0.3)} and stub.head_calls == 0


async def test_earlier_turns_weigh_less(ctx: BuildContext) -> None:
    signal = DomainSignal.build(spec(confident=0.0), ctx)
    # Newest: law 0.8 (weight 1); earlier: math 0.9 (weight 0.5): law wins, mixed probability.
    ev = signal.answer_now(chat(("user", "an integral question"), ("assistant", "ok"), ("user", "a contract question")))
    assert ev is not None and set(ev.labels) == {"law"}
    assert ev.labels["law"] == pytest.approx((0.8 + 0.5 * (0.1 / 13)) / 1.5, rel=1e-4)
    # labels_map renames the model's label; two mapped to one add up.
    renamed = DomainSignal.build(spec(confident=0.0, labels_map={"law": "legal", "history": "legal"}), ctx)
    ev = renamed.answer_now(chat(("user", "a contract question")))
    assert ev is not None and ev.labels == {"legal": pytest.approx(0.8 + 0.2 / 13, rel=1e-4)}


def test_without_minilm_unsure_texts_are_unknown(build_ctx: BuildContext, stub: StubDomain) -> None:
    settings = build_ctx.settings.model_copy(update={"embedder": EmbedderSettings(model_dir=Path("/nonexistent"))})
    models = ModelRegistry()
    models.put(DOMAIN_MODEL_NAME, ShippedDomainModel(stub))
    ctx = BuildContext(settings=settings, executor=build_ctx.executor, models=models)
    signal = DomainSignal.build(spec(), ctx)
    assert signal.unavailable_reason() is None
    assert signal.answer_now(chat(("user", "an integral"))) is not None  # sure texts still answered
    with pytest.raises(SignalUnavailable, match="need the embedding stage"):
        asyncio.run(evaluate(signal, chat(("user", "a beam")), ctx))


def test_missing_shipped_weights_make_it_unavailable(build_ctx: BuildContext, monkeypatch: pytest.MonkeyPatch) -> None:
    from extproc.models import domain_classifier

    monkeypatch.setattr(domain_classifier, "DEFAULT_WEIGHTS_DIR", Path("/nonexistent/weights"))
    signal = DomainSignal.build(spec(), build_ctx)
    reason = signal.unavailable_reason()
    assert reason is not None and "is missing" in reason
    assert signal.known_labels() is None


# -- in a policy, through the router --------------------------------------------------------------

POLICY = """
version: 1
models:
  - {name: general, cluster: general}
  - {name: thinker, cluster: thinker, reasoning_family: qwen3}
signals:
  - {name: subject, type: domain, threshold: 0.5, fallback: other}
decisions:
  - name: math
    priority: 100
    when: {signal: subject, label: math}
    action: {type: route, models: [thinker], reasoning: {mode: on, effort: high}}
default:
  name: general
  action: {type: route, models: [general], reasoning: {mode: off}}
"""


def compile_(text: str, ctx: BuildContext) -> CompiledPolicy:
    return compile_text(textwrap.dedent(text), ctx, loader=PolicyLoader(file="test.yaml"))


def test_policy_routes_on_subject_and_writes_reasoning(ctx: BuildContext, embedder: StubEmbedder) -> None:
    router = Router(ctx.settings, compile_(POLICY, ctx), executor=ctx.executor, models=ctx.models)

    def go(text: str) -> Any:
        body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
        return asyncio.run(router.route(body))

    math = go("evaluate the integral")
    assert math.decision == "math" and math.model.name == "thinker"
    body = json.loads(math.rewritten_body())
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert wire.client_headers(math)["x-vsr-reasoning"] == "on"
    greeting = go("a contract question")
    assert greeting.decision == "general" and greeting.reasoning == "none"  # general has no family
    subject = {s.name: s for s in greeting.signals}["subject"]
    assert subject.status is SignalStatus.MATCHED and subject.labels == {"law": pytest.approx(0.8)}
    assert embedder.calls == []


STEM_POLICY = POLICY.replace(
    "  - {name: subject, type: domain, threshold: 0.5, fallback: other}\n",
    "  - {name: subject, type: domain, threshold: 0.5, fallback: other}\n"
    "  - {name: difficulty, type: complexity, hard: [prove the theorem], easy: [what is a cat]}\n",
).replace(
    "when: {signal: subject, label: math}",
    "when: {all: [{signal: subject, label: math}, {signal: difficulty, label: hard}]}",
)


def test_lazy_dispatch_runs_difficulty_only_for_a_matching_subject(ctx: BuildContext, embedder: StubEmbedder) -> None:
    assert "difficulty" in STEM_POLICY and "all: [" in STEM_POLICY
    router = Router(ctx.settings, compile_(STEM_POLICY, ctx), executor=ctx.executor, models=ctx.models)

    def go(text: str) -> Any:
        body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
        return asyncio.run(router.route(body))

    law = go("a contract question")
    assert law.decision == "general" and "difficulty" not in {s.name for s in law.signals}
    embedded = len(embedder.calls)
    math = go("evaluate the integral")
    assert "difficulty" in {s.name for s in math.signals} and len(embedder.calls) == embedded + 1


def test_policy_refuses_unknown_subject_labels(ctx: BuildContext) -> None:
    with pytest.raises(PolicyError, match="has no label 'maths'"):
        compile_(POLICY.replace("label: math}", "label: maths}"), ctx)


# -- bring your own checkpoint ------------------------------------------------------------------

CKPT_LABELS = ("LABEL_0", "LABEL_1", "LABEL_2")


@pytest.fixture(scope="module")
def mapped_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A VSR-style checkpoint: generic LABEL_i in config, names in category_mapping.json."""
    path = build_tiny_sequence_classifier(tmp_path_factory.mktemp("vsr"), labels=CKPT_LABELS, force="LABEL_2")
    mapping = {"idx_to_category": {"0": "biology", "1": "law", "2": "computer_science"}}
    (path / CATEGORY_MAPPING_FILE).write_text(json.dumps(mapping))
    return path


@pytest.fixture(scope="module")
def named_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_sequence_classifier(
        tmp_path_factory.mktemp("named"), labels=("math", "history", "casual"), force="history"
    )


async def test_checkpoint_labels_from_category_mapping(build_ctx: BuildContext, mapped_dir: Path) -> None:
    signal = DomainSignal.build(
        spec(model_dir=str(mapped_dir), labels_map={"computer_science": "computer science"}), build_ctx
    )
    assert isinstance(signal, CheckpointDomainSignal) and signal.unavailable_reason() is None
    assert signal.known_labels() == frozenset({"biology", "law", "computer science", "other"})
    ev = await evaluate(signal, chat(("system", "ignored"), ("user", "sort this list")), build_ctx)
    assert set(ev.labels) == {"computer science"} and ev.labels["computer science"] > 0.99


async def test_checkpoint_labels_from_id2label(build_ctx: BuildContext, named_dir: Path) -> None:
    signal = DomainSignal.build(spec(model_dir=str(named_dir), labels_map={"casual": "other"}), build_ctx)
    assert signal.known_labels() == frozenset({"math", "history", "other"})
    ev = await evaluate(signal, chat(("user", "who won the war")), build_ctx)
    assert set(ev.labels) == {"history"}
    with pytest.raises(ValueError, match="labels_map: the checkpoint has no label\\(s\\) 'maths'"):
        DomainSignal.build(spec(model_dir=str(named_dir), labels_map={"maths": "math"}), build_ctx)


def test_bad_category_mapping_or_missing_checkpoint_is_unknown(
    build_ctx: BuildContext, mapped_dir: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    for item in mapped_dir.iterdir():
        (bad / item.name).write_bytes(item.read_bytes())
    (bad / CATEGORY_MAPPING_FILE).write_text(json.dumps({"idx_to_category": {"0": "a", "5": "b"}}))
    signal = DomainSignal.build(spec(model_dir=str(bad)), build_ctx)
    reason = signal.unavailable_reason()
    assert reason is not None and "must number the checkpoint's 3 outputs" in reason
    missing = DomainSignal.build(spec(model_dir=str(tmp_path / "nope")), build_ctx)
    assert missing.unavailable_reason() is not None and missing.known_labels() is None
