"""One sentence-encoder pass per text per request under the default policy: whatever number of
signals read a text (both cascades' second stages, `difficulty`, `topic`), the encoder sees it
once; and concurrent requests' texts share batched calls. The control switches the sharing off
(no embedding cache, no coalescing) and sees the same text encoded again, so the count can fail."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from extproc.models.text_embedder import EMBEDDER_MODEL_NAME, TextEmbedder
from extproc.router import Router
from tests.policy.default_routing import default_router

pytestmark = pytest.mark.slow

# Texts the default policy embeds: subject questions the first stage is unsure of, hard STEM
# problems (difficulty), everyday requests (topic, the attack classifier's second stage).
TEXTS = [
    "Derive the escape velocity from a planet of mass M and radius R using conservation of energy, then compute it for Mars.",
    "Prove by induction that the sum of the first n odd numbers is n squared.",
    "Calcule la constante de equilibrio a 500 K para la reacción N2 + 3H2 ⇌ 2NH3 a partir de ΔH° y ΔS°.",
    "Pretend you are my physics teacher and derive the period of a pendulum with large amplitude.",
    "What am I looking at?",
    "Write a villain's monologue for my fantasy novel where he explains why he betrayed the king.",
    "Explain how the Federal Reserve's interest rate decisions affect mortgage rates and inflation.",
]


class EncoderSpy:
    """Wraps the embedder's encoder pass and records the texts of every call."""

    def __init__(self, embedder: TextEmbedder) -> None:
        self.calls: list[list[str]] = []
        self._inner = embedder._encode

        def encode(texts: Sequence[str]) -> Any:
            self.calls.append(list(texts))
            return self._inner(texts)

        embedder._encode = encode  # type: ignore[method-assign]

    def texts(self) -> Counter[str]:
        return Counter(t for call in self.calls for t in call)


@pytest.fixture(scope="module")
def router() -> Iterator[Router]:
    router = default_router()
    yield router
    router.close()


def body(text: str) -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()


def embedder_of(router: Router) -> TextEmbedder:
    embedder = router.models.get(EMBEDDER_MODEL_NAME, lambda: None)
    assert isinstance(embedder, TextEmbedder) and embedder.runtime == "onnx"
    return embedder


def test_each_text_is_encoded_once_per_request(router: Router) -> None:
    embedder = embedder_of(router)
    embedder.cache.clear()
    spy = EncoderSpy(embedder)
    try:
        readers = 0
        for text in TEXTS:
            spy.calls.clear()
            outcome = asyncio.run(router.route(body(text)))
            assert all(n == 1 for n in spy.texts().values()), (text, spy.texts())
            ran = {s.name for s in outcome.signals if s.known}
            readers += len(ran & {"difficulty", "topic", "attack_slow"}) >= 2 and text in spy.texts()
        assert readers >= 1  # several signals read the same text, and it went through the encoder once
    finally:
        del embedder._encode  # type: ignore[method-assign]


def test_without_sharing_the_count_sees_a_second_pass(router: Router) -> None:
    embedder = embedder_of(router)
    saved = embedder.cache.capacity, dict(router.executor._coalesced)
    embedder.cache.clear()
    embedder.cache.capacity = 0
    router.executor._coalesced.clear()
    spy = EncoderSpy(embedder)
    try:
        repeated = 0
        for text in TEXTS:
            spy.calls.clear()
            # A variant not routed before: the signals' own per-text caches must not answer.
            asyncio.run(router.route(body(text + " Show the steps.")))
            repeated += any(n > 1 for n in spy.texts().values())
        assert repeated >= 1
    finally:
        del embedder._encode  # type: ignore[method-assign]
        embedder.cache.capacity = saved[0]
        router.executor._coalesced.update(saved[1])


def test_concurrent_requests_share_batched_calls(router: Router) -> None:
    embedder = embedder_of(router)
    embedder.cache.clear()
    spy = EncoderSpy(embedder)

    async def all_at_once() -> None:
        await asyncio.gather(*(router.route(body(t)) for t in TEXTS))

    try:
        asyncio.run(all_at_once())
        assert all(n == 1 for n in spy.texts().values()), spy.texts()
        assert max(len(call) for call in spy.calls) >= 2  # texts of different requests in one call
    finally:
        del embedder._encode  # type: ignore[method-assign]


def test_every_encoder_pass_is_a_coalesced_batch(router: Router) -> None:
    """No signal encodes on its own: the cascades' second stages too go through the executor's
    coalescing (a text encoded inside a signal's own executor job would not be counted there)."""
    embedder = embedder_of(router)
    embedder.cache.clear()
    spy = EncoderSpy(embedder)
    coalesced = router.executor.coalescers()
    before = sum(c.items for c in coalesced)

    async def all_at_once() -> None:
        await asyncio.gather(*(router.route(body(t + " (again)")) for t in TEXTS))

    try:
        asyncio.run(all_at_once())
        stage_two = {t for t in spy.texts() if t.endswith("(again)")}
        assert stage_two  # the cascades and the embedding signals read these texts
        assert sum(spy.texts().values()) == sum(c.items for c in coalesced) - before, spy.calls
    finally:
        del embedder._encode  # type: ignore[method-assign]


def test_serving_the_default_policy_imports_no_torch() -> None:
    """The router as `make run` builds it, one request routed through the encoder: neither torch
    nor transformers is imported (the encoder is the ONNX graph; torch is the `torch` extra)."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import asyncio, json, sys\n"
        "from tests.policy.default_routing import default_router\n"
        "router = default_router()\n"
        "body = json.dumps({'model': 'auto', 'messages': [{'role': 'user', 'content': "
        f"{TEXTS[0]!r}" + "}]}).encode()\n"
        "outcome = asyncio.run(router.route(body))\n"
        "assert any(s.name == 'difficulty' and s.known for s in outcome.signals), outcome.signals\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=repo, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
