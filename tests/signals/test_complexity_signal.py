"""The `complexity` signal: hard / medium / easy from the margin of similarity to the policy's
examples, the thresholds, the length and structure cues, the newest user turn only, the embedding
cache shared with other signals, and unknown without MiniLM."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from extproc.models.lru import LruCache, text_key
from extproc.models.registry import ModelRegistry
from extproc.models.text_embedder import EMBEDDER_MODEL_NAME
from extproc.protocol.openai import parse_request
from extproc.settings import EmbedderSettings
from extproc.signals.base import BuildContext, SignalContext
from extproc.signals.complexity import ComplexityCues, ComplexitySignal, ComplexitySpec, cue_shift

HARD = ["prove the theorem", "derive the equation"]
EASY = ["what is two plus two", "what is a cat"]


class AxisEmbedder:
    """'prove'/'derive' -> axis 0, 'what is' -> axis 1, anything else halfway; a real LruCache."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.cache: LruCache[np.ndarray[Any, Any]] = LruCache(64)

    def vector(self, text: str) -> np.ndarray[Any, Any]:
        v = np.zeros(384, dtype=np.float32)
        if "prove" in text or "derive" in text:
            v[0] = 1.0
        elif "what is" in text:
            v[1] = 1.0
        else:
            v[0] = v[1] = np.float32(np.sqrt(0.5))
        return v

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        self.calls.append(list(texts))
        rows = [self.vector(t) for t in texts]
        for t, r in zip(texts, rows, strict=True):
            self.cache.put(text_key(t), r)
        return np.stack(rows)


def spec(**kw: Any) -> ComplexitySpec:
    kw.setdefault("hard", HARD)
    kw.setdefault("easy", EASY)
    return ComplexitySpec(name="difficulty", type="complexity", **kw)


def chat(*messages: tuple[str, str]) -> Any:
    return parse_request({"model": "auto", "messages": [{"role": r, "content": c} for r, c in messages]})


@pytest.fixture
def embedder() -> AxisEmbedder:
    return AxisEmbedder()


@pytest.fixture
def ctx(build_ctx: BuildContext, embedder: AxisEmbedder) -> BuildContext:
    build_ctx.models.put(EMBEDDER_MODEL_NAME, embedder)
    return build_ctx


async def run(signal: ComplexitySignal, request: Any, ctx: BuildContext) -> Any:
    return await signal.evaluate(request, SignalContext(executor=ctx.executor, deadline=time.monotonic() + 10))


async def test_margin_decides_hard_easy_medium(ctx: BuildContext) -> None:
    signal = ComplexitySignal.build(spec(), ctx)
    assert signal.known_labels() == frozenset({"easy", "medium", "hard"})
    hard = await run(signal, chat(("user", "please prove this")), ctx)
    assert set(hard.labels) == {"hard"} and hard.labels["hard"] == pytest.approx(1.0)
    easy = await run(signal, chat(("user", "what is seven")), ctx)
    assert set(easy.labels) == {"easy"}
    medium = await run(signal, chat(("user", "tell me a story")), ctx)
    assert set(medium.labels) == {"medium"} and "margin +0.000" in medium.evidence[0]
    # Wider thresholds: the clear cases stay, the tie stays medium.
    wide = ComplexitySignal.build(spec(thresholds={"hard": 1.5, "easy": 1.5}), ctx)
    assert set((await run(wide, chat(("user", "please prove this")), ctx)).labels) == {"medium"}


async def test_top_k_averages_the_nearest_examples_of_each_side(ctx: BuildContext) -> None:
    # One hard example looks like an ordinary request ("tell me a joke" sits halfway): nearest
    # against nearest, that one example makes "tell me a story" hard; the mean of the two nearest
    # a side does not.
    hard = ["prove the theorem", "tell me a joke"]
    nearest = ComplexitySignal.build(spec(hard=hard, thresholds={"hard": 0.2, "easy": 0.2}), ctx)
    averaged = ComplexitySignal.build(spec(hard=hard, thresholds={"hard": 0.2, "easy": 0.2}, top_k=2), ctx)
    story = chat(("user", "tell me a story"))
    assert set((await run(nearest, story, ctx)).labels) == {"hard"}
    ev = await run(averaged, story, ctx)
    assert set(ev.labels) == {"medium"} and "margin +0.146" in ev.evidence[0]
    # A clearly hard request stays hard; top_k above a side's size uses all of that side.
    assert set((await run(averaged, chat(("user", "please prove this")), ctx)).labels) == {"hard"}
    wide = ComplexitySignal.build(spec(hard=hard, top_k=16), ctx)
    assert set((await run(wide, chat(("user", "please prove this")), ctx)).labels) == {"hard"}
    with pytest.raises(ValidationError):
        spec(top_k=0)


async def test_only_the_newest_user_turn_counts(ctx: BuildContext, embedder: AxisEmbedder) -> None:
    signal = ComplexitySignal.build(spec(), ctx)
    request = chat(("system", "prove everything"), ("user", "prove it"), ("assistant", "ok"), ("user", "what is it"))
    ev = await run(signal, request, ctx)
    assert set(ev.labels) == {"easy"} and embedder.calls[-1] == ["what is it"]


async def test_a_cached_embedding_answers_without_a_hop(ctx: BuildContext, embedder: AxisEmbedder) -> None:
    signal = ComplexitySignal.build(spec(), ctx)
    request = chat(("user", "derive this"))
    assert signal.answer_now(request) is None
    embedder.embed(["derive this"])  # another signal (domain's second stage, semantic) embedded it
    calls = len(embedder.calls)
    ev = signal.answer_now(request)
    assert ev is not None and set(ev.labels) == {"hard"} and len(embedder.calls) == calls


def test_cues() -> None:
    cues = ComplexityCues(long_chars=80, length_weight=0.1, structure_weight=0.2)
    assert cue_shift("x" * 100, cues)[0] == pytest.approx(0.1)
    assert cue_shift("hi", cues)[0] == pytest.approx(-0.1)
    shift, why = cue_shift("Show that x^2 = 4 has two roots, and justify it fully here", cues)
    assert shift == pytest.approx(0.2) and why == ["structure (+0.2)"]
    assert cue_shift("1) first part 2) second part and then some words", cues)[0] == pytest.approx(0.2)
    assert cue_shift("x" * 100, ComplexityCues())[0] == 0.0  # no weights: no cue
    # What a demanding problem asks for, in other languages too (MiniLM reads English only)
    for demanding in (
        "Beweisen Sie, dass die Folge konvergiert",
        "Démontrer que f est continue sur R tout entier",
        "Demuestra que la suma es finita para todo n",
        "Докажите, что граф связен всегда",
        "证明这个数列收敛，并给出过程和每一步的理由",
        "この式を導出してください、途中の計算も全部",
    ):
        assert cue_shift(demanding, cues)[1] == ["structure (+0.2)"], demanding
    assert cue_shift("Wie lange muss ein Kuchen bei 180 Grad backen?", cues)[1] == []


async def test_cues_move_a_tie(ctx: BuildContext) -> None:
    signal = ComplexitySignal.build(spec(cues={"long_chars": 40, "length_weight": 0.1}), ctx)
    ev = await run(signal, chat(("user", "tell me a long story about many things, with detail")), ctx)
    assert set(ev.labels) == {"hard"} and "long (+0.1)" in ev.evidence[0]


def test_validation_and_without_minilm(build_ctx: BuildContext) -> None:
    with pytest.raises(ValidationError):
        spec(hard=[])
    with pytest.raises(ValidationError, match="newest turn only"):
        spec(roles=["system"])
    settings = build_ctx.settings.model_copy(update={"embedder": EmbedderSettings(model_dir=Path("/nonexistent"))})
    ctx = BuildContext(settings=settings, executor=build_ctx.executor, models=ModelRegistry())
    signal = ComplexitySignal.build(spec(), ctx)
    assert signal.unavailable_reason() is not None and signal.answer_now(chat(("user", "x"))) is None
