"""`complexity`'s optional first stage: the static reading answers clearly hard and clearly easy
turns without calling MiniLM, embeds the unsure ones, defers to a cached MiniLM embedding, still
answers sure turns without MiniLM, and rejects a malformed band with a clear error."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from extproc.models.registry import ModelRegistry
from extproc.models.text_embedder import EMBEDDER_MODEL_NAME
from extproc.settings import EmbedderSettings
from extproc.signals.base import BuildContext, SignalContext, SignalUnavailable
from extproc.signals.complexity import ComplexitySignal
from extproc.signals.domain import DOMAIN_MODEL_NAME
from tests.signals.test_complexity_signal import AxisEmbedder, chat, spec

BAND = {"model": "static", "hard": 0.5, "easy": 0.5}


class AxisStatic:
    """'prove'/'derive' -> axis 0, 'what is' -> axis 1, anything else halfway (margin 0: unsure)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def vector(self, text: str) -> np.ndarray[Any, Any]:
        self.texts.append(text)
        return AxisEmbedder().vector(text)


@pytest.fixture
def embedder() -> AxisEmbedder:
    return AxisEmbedder()


@pytest.fixture
def static() -> AxisStatic:
    return AxisStatic()


@pytest.fixture
def ctx(build_ctx: BuildContext, embedder: AxisEmbedder, static: AxisStatic) -> BuildContext:
    build_ctx.models.put(EMBEDDER_MODEL_NAME, embedder)
    build_ctx.models.put(DOMAIN_MODEL_NAME, SimpleNamespace(inner=SimpleNamespace(static=static)))
    return build_ctx


async def run(signal: ComplexitySignal, request: Any, ctx: BuildContext) -> Any:
    return await signal.evaluate(request, SignalContext(executor=ctx.executor, deadline=time.monotonic() + 10))


async def test_sure_turns_are_decided_without_the_encoder(ctx: BuildContext, embedder: AxisEmbedder) -> None:
    signal = ComplexitySignal.build(spec(first_stage=BAND), ctx)
    calls = len(embedder.calls)  # the examples, embedded once at build
    hard = await run(signal, chat(("user", "prove that it holds")), ctx)
    easy = signal.answer_now(chat(("user", "what is a dog")))
    assert set(hard.labels) == {"hard"} and "stage: first" in hard.evidence[0]
    assert easy is not None and set(easy.labels) == {"easy"} and "static margin -2.000" in easy.evidence[0]
    assert len(embedder.calls) == calls


async def test_unsure_turns_still_embed(ctx: BuildContext, embedder: AxisEmbedder, static: AxisStatic) -> None:
    signal = ComplexitySignal.build(spec(first_stage=BAND), ctx)
    request = chat(("user", "tell me about it"))
    assert signal.answer_now(request) is None  # margin 0, inside the band: a hop to MiniLM
    ev = await run(signal, request, ctx)
    assert set(ev.labels) == {"medium"} and embedder.calls[-1] == ["tell me about it"]
    assert "stage: first" not in ev.evidence[0] and "tell me about it" in static.texts


async def test_without_first_stage_every_turn_embeds(ctx: BuildContext, embedder: AxisEmbedder) -> None:
    plain = ComplexitySignal.build(spec(), ctx)
    calls = len(embedder.calls)
    assert plain.answer_now(chat(("user", "prove that it holds"))) is None
    assert set((await run(plain, chat(("user", "prove that it holds")), ctx)).labels) == {"hard"}
    assert len(embedder.calls) == calls + 1


async def test_a_cached_embedding_comes_before_the_first_stage(
    ctx: BuildContext, embedder: AxisEmbedder, static: AxisStatic
) -> None:
    signal = ComplexitySignal.build(spec(first_stage=BAND), ctx)
    embedder.embed(["what is the derivative"])  # domain's second stage embedded it already
    static.texts.clear()
    ev = signal.answer_now(chat(("user", "what is the derivative")))
    assert ev is not None and "stage: first" not in ev.evidence[0] and static.texts == []


async def test_without_minilm_sure_turns_are_answered_and_others_unknown(
    build_ctx: BuildContext, static: AxisStatic
) -> None:
    settings = build_ctx.settings.model_copy(update={"embedder": EmbedderSettings(model_dir=Path("/nonexistent"))})
    models = ModelRegistry()
    models.put(DOMAIN_MODEL_NAME, SimpleNamespace(inner=SimpleNamespace(static=static)))
    ctx = BuildContext(settings=settings, executor=build_ctx.executor, models=models)
    signal = ComplexitySignal.build(spec(first_stage=BAND), ctx)
    assert signal.unavailable_reason() is None
    ev = await run(signal, chat(("user", "derive the formula")), ctx)
    assert set(ev.labels) == {"hard"}
    with pytest.raises(SignalUnavailable, match="text embedder"):
        await run(signal, chat(("user", "tell me about it")), ctx)


def test_first_stage_config_errors_are_clear() -> None:
    with pytest.raises(ValidationError, match=r"first_stage\.hard"):
        spec(first_stage={"easy": 0.05})
    with pytest.raises(ValidationError, match=r"first_stage\.easy\n.*greater than 0"):
        spec(first_stage={"hard": 0.1, "easy": 0})
    with pytest.raises(ValidationError, match=r"first_stage\.model"):
        spec(first_stage={"model": "minilm", "hard": 0.1, "easy": 0.05})
    with pytest.raises(ValidationError, match=r"first_stage\.margin\n.*Extra inputs"):
        spec(first_stage={"hard": 0.1, "easy": 0.05, "margin": 0.1})
