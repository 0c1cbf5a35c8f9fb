"""The image_labels signal: calibrated scores, thresholds, top-k, aggregation, caches, unavailability."""

from __future__ import annotations

import asyncio
import io
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError

from extproc.errors import UnprocessableRequest
from extproc.images import DecodedImage, ImageLimits, RemoteImage, inspect_image
from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.models.siglip import sigmoid_scores
from extproc.protocol.request import ApiKind, RoutingRequest
from extproc.settings import Settings, VisionSettings
from extproc.signals.base import BuildContext, SignalContext, SignalUnavailable
from extproc.signals.image_labels import ImageLabelsSignal, ImageLabelsSpec, decide


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _decoded(data: bytes) -> DecodedImage:
    return inspect_image(data, declared_mime="", limits=ImageLimits(), message_index=0)


def _request(*images: DecodedImage, remote: int = 0) -> RoutingRequest:
    return RoutingRequest(
        api=ApiKind.CHAT,
        model="auto",
        stream=False,
        images=list(images),
        remote_images=[RemoteImage(f"https://example.com/{i}.png", 0) for i in range(remote)],
    )


def _ctx(executor: HeavyExecutor | None = None) -> SignalContext:
    return SignalContext(executor=executor or HeavyExecutor(1, None), deadline=time.monotonic() + 30)


def _spec(**fields: Any) -> ImageLabelsSpec:
    return ImageLabelsSpec.model_validate({"name": "kind", "type": "image_labels", **fields})


# -- spec -------------------------------------------------------------------------------------


def test_spec_validation() -> None:
    spec = _spec(
        labels={"chest_xray": [], "passport": ["a passport", "a passport photo page"]},
        templates=["a photo of {}.", "{}"],
    )
    assert spec.prompts("chest_xray") == ["a photo of chest xray.", "chest xray"]
    assert spec.prompts("passport")[1] == "a passport"
    with pytest.raises(ValidationError, match="exactly once"):
        _spec(labels={"a": []}, templates=["a photo"])
    with pytest.raises(ValidationError, match="unknown label"):
        _spec(labels={"a": []}, thresholds={"b": 0.3})
    with pytest.raises(ValidationError, match="must match"):
        _spec(labels={"a b": []})
    with pytest.raises(ValidationError):
        _spec(labels={})
    with pytest.raises(ValidationError):
        _spec(labels={"a": []}, aggregate="median")


# -- decision logic on controlled probabilities -----------------------------------------------


def test_threshold_and_per_label_thresholds() -> None:
    names = ["passport", "id_card", "car"]
    probs = np.array([[0.40, 0.20, 0.05]])
    assert not decide(_spec(labels={n: [] for n in names}, threshold=0.5), names, probs).matched
    ev = decide(_spec(labels={n: [] for n in names}, threshold=0.5, thresholds={"passport": 0.3}), names, probs)
    assert ev.matched and dict(ev.labels) == {"passport": 0.40} and ev.score == 0.40
    ev = decide(_spec(labels={n: [] for n in names}, threshold=0.1), names, probs)
    assert dict(ev.labels) == {"passport": 0.40, "id_card": 0.20}
    assert ev.evidence[0] == "top: passport=0.400, id_card=0.200, car=0.050"


def test_top_k_limits_which_labels_may_fire() -> None:
    names = ["passport", "id_card", "car"]
    probs = np.array([[0.40, 0.60, 0.05]])
    spec = _spec(labels={n: [] for n in names}, threshold=0.1, top_k=1)
    assert dict(decide(spec, names, probs).labels) == {"id_card": 0.60}
    # the top label under its own threshold: nothing fires, even though another label passes
    spec = _spec(labels={n: [] for n in names}, threshold=0.1, thresholds={"id_card": 0.9}, top_k=1)
    ev = decide(spec, names, probs)
    assert not ev.matched and ev.score == 0.60


def test_aggregation_across_images() -> None:
    names = ["xray", "car"]
    probs = np.array([[0.9, 0.1], [0.1, 0.1]])  # two images: one x-ray, one not
    assert dict(decide(_spec(labels={"xray": [], "car": []}, threshold=0.5), names, probs).labels) == {"xray": 0.9}
    mean = decide(_spec(labels={"xray": [], "car": []}, threshold=0.6, aggregate="mean"), names, probs)
    assert not mean.matched and mean.score == pytest.approx(0.5)
    assert decide(_spec(labels={"xray": [], "car": []}, threshold=0.5, aggregate="mean"), names, probs).matched
    assert "images: 2 (mean)" in mean.evidence


class FakeEncoder:
    """Controlled embeddings: text vectors by prompt, image vectors by content hash."""

    logit_scale = 10.0
    logit_bias = -2.0

    def __init__(self, texts: dict[str, list[float]], images: dict[str, list[float]]) -> None:
        self.texts = {k: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for k, v in texts.items()}
        self.images = {k: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for k, v in images.items()}
        self.decoded = 0

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.texts[t] for t in texts])

    def probabilities(self, image_embeddings: np.ndarray, label_embeddings: np.ndarray) -> np.ndarray:
        return sigmoid_scores(image_embeddings, label_embeddings, self.logit_scale, self.logit_bias)

    def cached_embeddings(self, images: list[DecodedImage]) -> list[np.ndarray | None]:
        return [None for _ in images]

    def embed_decoded(self, images: list[DecodedImage]) -> np.ndarray:
        self.decoded += len(images)
        return np.stack([self.images[i.sha256] for i in images])


async def test_sigmoid_calibration_with_controlled_embeddings(corpus_dir: Path) -> None:
    passport = _decoded((corpus_dir / "grace_hopper.jpg").read_bytes())
    car = _decoded((corpus_dir / "rocket.jpg").read_bytes())
    encoder = FakeEncoder(
        texts={"passport": [1, 0, 0], "car": [0, 1, 0], "truck": [0, 0, 1]},
        images={passport.sha256: [1, 0, 0], car.sha256: [0, 1, 0]},
    )
    spec = _spec(labels={"passport": ["passport"], "vehicle": ["car", "truck"]}, templates=["{}"], threshold=0.5)
    signal = ImageLabelsSignal.with_encoder(spec, encoder)  # type: ignore[arg-type]
    assert signal.known_labels() == frozenset({"passport", "vehicle"})
    ev = await signal.evaluate(_request(passport), _ctx())
    # passport: cos 1 -> sigmoid(10 - 2); vehicle: mean of car+truck prompts, cos 0 -> sigmoid(-2)
    assert dict(ev.labels) == {"passport": pytest.approx(_sigmoid(8.0))}
    assert ev.score == pytest.approx(_sigmoid(8.0))
    ev = await signal.evaluate(_request(car), _ctx())
    # the vehicle label embeds as normalise(car + truck): cos with a car image is 1/sqrt(2)
    assert dict(ev.labels) == {"vehicle": pytest.approx(_sigmoid(10 / math.sqrt(2) - 2))}
    both = await signal.evaluate(_request(passport, car), _ctx())
    assert set(both.labels) == {"passport", "vehicle"}


# -- the real encoder -------------------------------------------------------------------------


def _build_ctx(model_dir: Path | None, registry: ModelRegistry | None = None) -> BuildContext:
    settings = Settings(vision=VisionSettings(model_dir=model_dir, precision="fp32", cache_size=16))
    return BuildContext(settings=settings, executor=HeavyExecutor(1, None), models=registry or ModelRegistry())


LABELS = {"passport": ["a passport"], "xray": ["a chest x-ray"], "car": ["a car"], "cat": ["a cat"]}


async def test_end_to_end_with_tiny_model_and_cache(siglip_dir: Path, corpus_dir: Path) -> None:
    ctx = _build_ctx(siglip_dir)
    signal = ImageLabelsSignal.build(_spec(labels=LABELS, threshold=0.0, top_k=2), ctx)
    assert signal.unavailable_reason() is None and signal.encoder is not None
    image = _decoded((corpus_dir / "chelsea_rgba.png").read_bytes())
    ev = await signal.evaluate(_request(image), _ctx(ctx.executor))
    assert ev.matched and len(ev.labels) == 2 and set(ev.labels) <= set(LABELS)
    expected = signal.scores(signal.encoder.embed_images([image.pixels()]))
    assert ev.score == pytest.approx(max(expected.values()), abs=1e-6)
    for label, prob in ev.labels.items():
        assert prob == pytest.approx(expected[label], abs=1e-6)
    assert len(signal.encoder.image_cache) == 1

    class NoExecutor(HeavyExecutor):
        async def run(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a cached image must not reach the executor")

    # Same bytes in a fresh request object: served from the cache, no decode, no executor hop.
    again = _decoded((corpus_dir / "chelsea_rgba.png").read_bytes())
    ev2 = await signal.evaluate(_request(again), _ctx(NoExecutor(1, None)))
    assert ev2 == ev and again._pixels is None


async def test_equal_images_in_one_request_are_embedded_once(siglip2_dir: Path, corpus_dir: Path) -> None:
    ctx = _build_ctx(siglip2_dir)
    signal = ImageLabelsSignal.build(_spec(labels=LABELS), ctx)
    data = (corpus_dir / "coffee.jpg").read_bytes()
    assert signal.encoder is not None
    before = signal.encoder.image_cache.misses
    vectors = signal.encoder.embed_decoded([_decoded(data), _decoded(data)])
    assert np.array_equal(vectors[0], vectors[1])
    assert len(signal.encoder.image_cache) == 1 and signal.encoder.image_cache.misses == before + 2


async def test_no_images_is_a_known_no(siglip_dir: Path) -> None:
    signal = ImageLabelsSignal.build(_spec(labels=LABELS), _build_ctx(siglip_dir))
    ev = await signal.evaluate(_request(), _ctx())
    assert not ev.matched and ev.evidence == ("no images",)


async def test_remote_only_images_are_unknown(siglip_dir: Path, corpus_dir: Path) -> None:
    signal = ImageLabelsSignal.build(_spec(labels=LABELS, threshold=0.0), _build_ctx(siglip_dir))
    with pytest.raises(SignalUnavailable, match="not fetched"):
        await signal.evaluate(_request(remote=1), _ctx())
    image = _decoded((corpus_dir / "text.png").read_bytes())
    ev = await signal.evaluate(_request(image, remote=2), _ctx())
    assert "2 remote image(s) not inspected" in ev.evidence


async def test_corrupt_image_is_a_request_error(siglip_dir: Path, corpus_dir: Path) -> None:
    signal = ImageLabelsSignal.build(_spec(labels=LABELS), _build_ctx(siglip_dir))
    data = (corpus_dir / "camera.png").read_bytes()
    truncated = _decoded(data[: len(data) // 2])  # the header is intact; the pixels are not
    with pytest.raises(UnprocessableRequest):
        await signal.evaluate(_request(truncated), _ctx())


async def test_no_model_configured_is_unavailable_not_no_match() -> None:
    ctx = _build_ctx(None)
    signal = ImageLabelsSignal.build(_spec(labels=LABELS), ctx)
    reason = signal.unavailable_reason()
    assert reason is not None and "no vision model configured" in reason
    assert signal.known_labels() == frozenset(LABELS)
    with pytest.raises(SignalUnavailable, match="no vision model configured"):
        await signal.evaluate(_request(remote=1), _ctx())
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, format="PNG")
    image = _decoded(buf.getvalue())
    with pytest.raises(SignalUnavailable, match="no vision model configured"):
        await signal.evaluate(_request(image), _ctx())
    # With no image at all the answer is known without a model: no.
    ev = await signal.evaluate(_request(), _ctx())
    assert not ev.matched and ev.evidence == ("no images",)
    (status,) = ctx.models.statuses()
    assert status.name == "vision" and not status.loaded and "no vision model configured" in status.detail


async def test_broken_model_is_unavailable_with_the_reason(siglip_dir: Path, tmp_path: Path) -> None:
    import shutil

    from extproc.testing.tiny_siglip import drop_weights

    broken = tmp_path / "nohead"
    shutil.copytree(siglip_dir, broken)
    drop_weights(broken, "vision_model.head.")
    ctx = _build_ctx(broken)
    first = ImageLabelsSignal.build(_spec(labels=LABELS), ctx)
    second = ImageLabelsSignal.build(_spec(name="other", labels=LABELS), ctx)  # not retried, same reason
    for signal in (first, second):
        reason = signal.unavailable_reason()
        assert reason is not None and "pooling head" in reason
    (status,) = ctx.models.statuses()
    assert not status.loaded and "pooling head" in status.detail
    with pytest.raises(SignalUnavailable, match="pooling head"):
        await first.evaluate(_request(remote=1), _ctx())


def test_reload_embeds_only_changed_labels(siglip_dir: Path) -> None:
    registry = ModelRegistry()
    first = ImageLabelsSignal.build(_spec(labels=LABELS), _build_ctx(siglip_dir, registry))
    assert first.encoder is not None
    assert first.encoder.text_cache_size == 4
    changed = {**LABELS, "cat": ["a kitten"], "dog": ["a dog"]}
    second = ImageLabelsSignal.build(_spec(labels=changed), _build_ctx(siglip_dir, registry))
    assert second.encoder is first.encoder  # one model, loaded once
    assert first.encoder.text_cache_size == 6  # only "a kitten" and "a dog" were new
    assert second.label_matrix is not None and first.label_matrix is not None
    assert np.array_equal(second.label_matrix[0], first.label_matrix[0])


def test_concurrent_signals_share_one_embedding(siglip_dir: Path, corpus_dir: Path) -> None:
    ctx = _build_ctx(siglip_dir)
    a = ImageLabelsSignal.build(_spec(name="a", labels=LABELS), ctx)
    b = ImageLabelsSignal.build(_spec(name="b", labels={"xray": []}), ctx)
    image = _decoded((corpus_dir / "retina.jpg").read_bytes())
    request = _request(image)

    async def both() -> None:
        sctx = _ctx(ctx.executor)
        await asyncio.gather(a.evaluate(request, sctx), b.evaluate(request, sctx))

    asyncio.run(both())
    assert a.encoder is not None and len(a.encoder.image_cache) == 1
    assert a.encoder.image_cache.misses >= 1 and a.encoder.image_cache.hits >= 1  # second signal hit the cache
