"""Fixtures shared across the test tree.

- settings and a build context;
- controllable fake signals (matched, failing, slow, hanging...) and a catalog holding them;
- small policies over three models compiled with that catalog, and routers built from them;
- image bytes, data URIs and chat bodies carrying images;
- a small real policy (text and image signals) in a temp file, and a router built from it;
- tiny random SigLIP / SigLIP2 checkpoints (built once per session) and the image corpus.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar, Literal

import pytest
from PIL import Image
from pydantic import Field

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.policy.load import CompiledPolicy, Diagnostic, PolicyLoader, check_text, compile_text
from extproc.protocol.request import RoutingRequest
from extproc.router import Router
from extproc.settings import Settings
from extproc.signals.base import (
    COST_OCR,
    BuildContext,
    Evaluation,
    Signal,
    SignalContext,
    SignalSpecBase,
    SignalUnavailable,
)
from extproc.signals.registry import SignalCatalog, SignalType
from extproc.testing.tiny_siglip import build_tiny_siglip, build_tiny_siglip2
from tests.suite_env import SUITE_ENVIRON

# The servers of the stacks the tests start, and the CLI commands they run in-process, read the
# process environment: they get the suite's settings too (tests/suite_env.py says why).
for _name, _value in SUITE_ENVIRON.items():
    os.environ.setdefault(_name, _value)


@pytest.fixture
def settings() -> Settings:
    return Settings.load(None, environ=SUITE_ENVIRON)


@pytest.fixture
def build_ctx(settings: Settings) -> Iterator[BuildContext]:
    executor = HeavyExecutor(1, None)
    yield BuildContext(settings=settings, executor=executor, models=ModelRegistry())
    executor.shutdown()


# -- controllable signals for testing dispatch and the engine ------------------------------------

Behaviour = Literal["match", "no_match", "raise", "unavailable", "hang", "text"]


class FakeSpec(SignalSpecBase):
    type: Literal["fake"] = "fake"
    behaviour: Behaviour = "match"
    score: float = 1.0
    labels: dict[str, float] = Field(default_factory=dict)
    delay_ms: float = 0.0
    text: str = ""  # for behaviour "text": match when the user text contains it


class FakeSignal(Signal):
    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        spec = self.spec
        assert isinstance(spec, FakeSpec)
        if spec.delay_ms:
            await asyncio.sleep(spec.delay_ms / 1000.0)
        if spec.behaviour == "hang":
            await asyncio.sleep(3600)
        if spec.behaviour == "raise":
            raise RuntimeError("fake signal failure")
        if spec.behaviour == "unavailable":
            raise SignalUnavailable("fake model not loaded")
        if spec.behaviour == "text":
            return Evaluation(matched=spec.text in request.joined_text(), score=spec.score)
        return Evaluation(matched=spec.behaviour == "match", score=spec.score, labels=spec.labels)

    def known_labels(self) -> frozenset[str] | None:
        spec = self.spec
        assert isinstance(spec, FakeSpec)
        return frozenset(spec.labels) or None


class FakeInlineSpec(FakeSpec):
    type: Literal["fake_inline"] = "fake_inline"  # type: ignore[assignment]


class FakeInlineSignal(FakeSignal):
    """Cheap and synchronous, like the regex signals: runs before any heavy signal."""

    inline: ClassVar[bool] = True

    def compute(self, request: RoutingRequest) -> Evaluation:
        spec = self.spec
        assert isinstance(spec, FakeSpec)
        return Evaluation(matched=spec.behaviour == "match", score=spec.score, labels=spec.labels)


class FakeSafetySpec(FakeSpec):
    type: Literal["fake_safety"] = "fake_safety"  # type: ignore[assignment]


class FakeSafetySignal(FakeSignal):
    safety: ClassVar[bool] = True


class FakeImageSpec(FakeSpec):
    type: Literal["fake_image"] = "fake_image"  # type: ignore[assignment]


class FakeImageSignal(FakeSignal):
    reads: ClassVar[frozenset[str]] = frozenset({"image"})
    implies_image: ClassVar[bool] = True


class ExecutorSpec(SignalSpecBase):
    """Holds the heavy executor's one worker for `work_ms` of (blocking) time per request."""

    type: Literal["executor_work"] = "executor_work"
    work_ms: float = 200.0


class ExecutorSignal(Signal):
    started: ClassVar[list[float]] = []

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        spec = self.spec
        assert isinstance(spec, ExecutorSpec)

        def work() -> bool:
            self.started.append(time.monotonic())
            time.sleep(spec.work_ms / 1000.0)
            return True

        return Evaluation(matched=await ctx.executor.run(work))


class FakeOcrSpec(FakeSpec):
    type: Literal["fake_ocr"] = "fake_ocr"  # type: ignore[assignment]


class FakeOcrSignal(FakeSignal):
    """Costs like OCR: lazy dispatch runs it only after cheaper pending signals."""

    cost: ClassVar[int] = COST_OCR


class RendezvousSpec(SignalSpecBase):
    """Two of these only finish if they run at the same time: each waits for the other."""

    type: Literal["rendezvous"] = "rendezvous"
    group: str = "a"


class RendezvousSignal(Signal):
    arrivals: ClassVar[dict[str, int]] = {}
    events: ClassVar[dict[str, asyncio.Event]] = {}

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        spec = self.spec
        assert isinstance(spec, RendezvousSpec)
        event = self.events.setdefault(spec.group, asyncio.Event())
        self.arrivals[spec.group] = self.arrivals.get(spec.group, 0) + 1
        if self.arrivals[spec.group] >= 2:
            event.set()
        await event.wait()
        return Evaluation(matched=True)


FAKE_TYPES = (
    SignalType("fake", FakeSpec, FakeSignal),
    SignalType("fake_inline", FakeInlineSpec, FakeInlineSignal),
    SignalType("fake_safety", FakeSafetySpec, FakeSafetySignal),
    SignalType("fake_image", FakeImageSpec, FakeImageSignal),
    SignalType("rendezvous", RendezvousSpec, RendezvousSignal),
    SignalType("executor_work", ExecutorSpec, ExecutorSignal),
    SignalType("fake_ocr", FakeOcrSpec, FakeOcrSignal),
)


def _fake_catalog() -> SignalCatalog:
    return SignalCatalog().with_types(*FAKE_TYPES)


@pytest.fixture
def fake_catalog() -> SignalCatalog:
    """The real signal types plus the fakes: fake, fake_inline, fake_safety, fake_image,
    rendezvous, executor_work and fake_ocr."""
    return _fake_catalog()


@pytest.fixture
def executor_work_started() -> list[float]:
    """When each `executor_work` signal's job started on the heavy executor (emptied first)."""
    ExecutorSignal.started.clear()
    return ExecutorSignal.started


# -- small policies over three models, compiled with the fake catalog ------------------------------

BASE = """
version: 1
models:
  - {name: text-model, cluster: text_cluster, modalities: [text], context_window: 100}
  - {name: big-text, cluster: big_cluster, modalities: [text]}
  - {name: vlm, cluster: vlm_cluster, modalities: [text, image]}
"""


def _policy_text(body: str, base: str = BASE) -> str:
    return textwrap.dedent(base) + textwrap.dedent(body)


def _compile(body: str, ctx: BuildContext, base: str = BASE) -> CompiledPolicy:
    loader = PolicyLoader(_fake_catalog(), file="test.yaml")
    return compile_text(_policy_text(body, base), ctx, loader=loader)


def _diagnostics(body: str, ctx: BuildContext, base: str = BASE) -> list[Diagnostic]:
    return check_text(_policy_text(body, base), ctx, catalog=_fake_catalog(), file="test.yaml")


@pytest.fixture
def policy_base() -> str:
    """The head of every small policy: `version: 1` and the models text-model (100-token
    window), big-text and vlm (text and image)."""
    return BASE


@pytest.fixture
def policy_text() -> Callable[..., str]:
    """`(body, base=BASE) -> str`: the YAML a small policy is compiled from."""
    return _policy_text


@pytest.fixture
def compile_policy(build_ctx: BuildContext) -> Callable[..., CompiledPolicy]:
    """`(body, base=BASE) -> CompiledPolicy`, as file `test.yaml`; raises PolicyError."""

    def compile_(body: str, base: str = BASE) -> CompiledPolicy:
        return _compile(body, build_ctx, base)

    return compile_


@pytest.fixture
def policy_diagnostics(build_ctx: BuildContext) -> Callable[..., list[Diagnostic]]:
    """`(body, base=BASE) -> list[Diagnostic]`: everything `extproc check` would report."""

    def diagnostics(body: str, base: str = BASE) -> list[Diagnostic]:
        return _diagnostics(body, build_ctx, base)

    return diagnostics


@pytest.fixture
def policy_errors(build_ctx: BuildContext) -> Callable[..., list[str]]:
    """`(body, base=BASE) -> list[str]`: the errors among the diagnostics, formatted."""

    def errors(body: str, base: str = BASE) -> list[str]:
        return [d.format() for d in _diagnostics(body, build_ctx, base) if d.severity == "error"]

    return errors


@pytest.fixture
def make_router() -> Iterator[Callable[..., Router]]:
    """`(body, settings=None, *, base=BASE) -> Router`: a small policy compiled with the fake
    catalog, on its own one-worker executor. Every router built is closed at teardown."""
    routers: list[Router] = []

    def build(body: str, settings: Settings | None = None, *, base: str = BASE) -> Router:
        settings = settings or Settings.load(None, environ=SUITE_ENVIRON)
        executor = HeavyExecutor(1, None)
        ctx = BuildContext(settings=settings, executor=executor, models=ModelRegistry())
        try:
            policy = _compile(body, ctx, base)
        except BaseException:
            executor.shutdown()
            raise
        router = Router(settings, policy, executor=executor, models=ctx.models, catalog=_fake_catalog())
        routers.append(router)
        return router

    yield build
    for router in routers:
        router.close()


# -- images ----------------------------------------------------------------------------------------


def _image_bytes(fmt: str = "PNG", size: tuple[int, int] = (16, 12), mode: str = "RGB", **save: object) -> bytes:
    color: object = (200, 30, 30) if mode in ("RGB", "RGBA") else 128
    img = Image.new(mode, size, color)  # type: ignore[arg-type]
    buf = io.BytesIO()
    img.save(buf, fmt, **save)
    return buf.getvalue()


def _data_uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def _chat_with_images(*uris: str, text: str = "what is this?") -> dict[str, object]:
    parts: list[dict[str, object]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in uris]
    return {"model": "auto", "messages": [{"role": "user", "content": parts}]}


@pytest.fixture(scope="session")
def image_bytes() -> Callable[..., bytes]:
    """`(fmt="PNG", size=(16, 12), mode="RGB", **save) -> bytes`: a one-colour image."""
    return _image_bytes


@pytest.fixture(scope="session")
def data_uri() -> Callable[..., str]:
    """`(data, mime="image/png") -> str`: a base64 data URI."""
    return _data_uri


@pytest.fixture(scope="session")
def chat_with_images() -> Callable[..., dict[str, object]]:
    """`(*uris, text="what is this?") -> dict`: a chat body, one user message: text then images."""
    return _chat_with_images


# -- a small real policy (text and image signals) in a temp file, and routers built from it --------

POLICY = """\
version: 1
aliases: [auto]
client_models: [general]
models:
  - {name: general, cluster: general, modalities: [text], context_window: 4096}
  - {name: vlm, cluster: vlm, modalities: [text, image]}
  - {name: secure, cluster: secure, modalities: [text, image]}
signals:
  - {name: has_image, type: modality, min_images: 1}
  - {name: code_words, type: keyword, keywords: [bug, exploit]}
  - {name: secret, type: secrets}
decisions:
  - name: security
    priority: 200
    when: {any: [{signal: secret}, {signal: code_words}]}
    action: {type: route, models: [secure]}
  - name: image
    priority: 100
    when: {signal: has_image}
    action: {type: route, models: [vlm]}
default:
  name: general
  action: {type: route, models: [general, vlm]}
"""

# The same policy with `exploit` questions no longer special and a new signal routing "poem" to vlm.
CHANGED = (
    POLICY.replace("keywords: [bug, exploit]", "keywords: [bug]")
    .replace("signals:\n", "signals:\n  - {name: poetry, type: keyword, keywords: [poem]}\n")
    .replace(
        "decisions:\n",
        "decisions:\n  - name: poetry\n    priority: 50\n    when: {signal: poetry}\n    action: {type: route, models: [vlm]}\n",
    )
)

VISION = POLICY.replace(
    "signals:\n",
    'signals:\n  - {name: scan, type: image_labels, labels: {xray: ["a chest x-ray"], car: ["a photo of a car"]}}\n',
).replace(
    "decisions:\n",
    "decisions:\n  - name: xray\n    priority: 300\n    when: {signal: scan, label: xray}\n    action: {type: route, models: [vlm]}\n",
)


def chat(text: str, model: str = "auto") -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": text}]}).encode()


def image_chat(text: str = "what is this?") -> bytes:
    return json.dumps(_chat_with_images(_data_uri(_image_bytes("PNG", (24, 16))), text=text)).encode()


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    """POLICY, written to a temp file."""
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


@pytest.fixture
def router(policy_file: Path) -> Iterator[Router]:
    """A router over `policy_file`, closed at teardown."""
    settings = Settings.load(None, environ=SUITE_ENVIRON).model_copy(update={"policy_path": policy_file})
    built = Router.from_settings(settings)
    yield built
    built.close()


# -- tiny random SigLIP / SigLIP2 checkpoints, built once per session, and the image corpus --------

CORPUS = Path(__file__).resolve().parent / "corpus" / "images"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return CORPUS


@pytest.fixture(scope="session")
def siglip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_siglip(tmp_path_factory.mktemp("siglip"))


@pytest.fixture(scope="session")
def siglip2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_siglip2(tmp_path_factory.mktemp("siglip2"))


@pytest.fixture(scope="session", params=["siglip", "siglip2"])
def any_model_dir(request: pytest.FixtureRequest, siglip_dir: Path, siglip2_dir: Path) -> Path:
    return siglip_dir if request.param == "siglip" else siglip2_dir


# -- OCR: the rendered scenes (once a session) and one real OCR service ----------------------------
from extproc.models.ocr import OCR_MODEL_NAME, OcrService, load_ocr_service  # noqa: E402
from extproc.testing.ocr_scenes import (  # noqa: E402
    car_photo,
    code_screenshot,
    degrade,
    injection_banner,
    jpeg_bytes,
    landscape_photo,
    passport_page,
    png_bytes,
    scanned_form,
    tampered_mrz,
)


@pytest.fixture(scope="session")
def scene_bytes() -> dict[str, bytes]:
    """Every OCR scene rendered once (noise makes each render differ, so the cache needs one copy)."""
    passport = passport_page()
    return {
        "passport": png_bytes(passport),
        "passport_degraded": degrade(passport),
        "passport_tampered": png_bytes(passport_page(tampered_mrz())),
        "code": png_bytes(code_screenshot()),
        "form": scanned_form(),
        "injection": png_bytes(injection_banner()),
        "landscape": png_bytes(landscape_photo()),
        "car": jpeg_bytes(car_photo()),
    }


@pytest.fixture(scope="session")
def ocr_settings() -> Settings:
    # A generous budget: the build machines' 2 cores are shared, and a test must not flake on load.
    return Settings.load(None, environ={"VSR_OCR__BUDGET_MS": "60000"})


@pytest.fixture(scope="session")
def ocr_registry(ocr_settings: Settings) -> ModelRegistry:
    """A registry holding one real rapidocr service for the whole session (models load once)."""
    registry = ModelRegistry()
    registry.get(OCR_MODEL_NAME, lambda: load_ocr_service(ocr_settings.ocr, default_threads=2))
    return registry


@pytest.fixture(scope="session")
def ocr_service(ocr_registry: ModelRegistry, ocr_settings: Settings) -> OcrService:
    service: OcrService = ocr_registry.get(OCR_MODEL_NAME, lambda: load_ocr_service(ocr_settings.ocr))
    return service


@pytest.fixture(scope="session")
def heavy() -> Iterator[HeavyExecutor]:
    executor = HeavyExecutor(1, 2)
    yield executor
    executor.shutdown()


@pytest.fixture(scope="session")
def ocr_build_ctx(ocr_settings: Settings, heavy: HeavyExecutor, ocr_registry: ModelRegistry) -> BuildContext:
    return BuildContext(settings=ocr_settings, executor=heavy, models=ocr_registry)


@pytest.fixture
def signal_ctx(heavy: HeavyExecutor) -> SignalContext:
    return SignalContext(executor=heavy, deadline=time.monotonic() + 30.0)
