"""The default policy's image rules, driven through the real image_labels signal with an
encoder whose embeddings are controlled: each test image "shows" one label exactly.

No real SigLIP weights can be had on the build machines, so this checks the wiring (label
sets, templates, top-k, thresholds, rule trees, priorities, actions) rather than the model;
`extproc probe` checks real weights.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from extproc.images import DecodedImage
from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.policy.load import load_policy
from extproc.router import Router
from extproc.server import wire
from extproc.settings import Settings
from extproc.signals.base import BuildContext
from tests.suite_env import SUITE_ENVIRON

POLICY = Path(__file__).resolve().parents[2] / "policies" / "default.yaml"


class ControlledEncoder:
    """Stands in for the SigLIP encoder: label prompts and images embed to one-hot vectors."""

    def __init__(self, label_prompts: dict[str, list[str]], image_labels: dict[str, str]) -> None:
        self.labels = list(label_prompts)
        self.prompt_label = {p: label for label, prompts in label_prompts.items() for p in prompts}
        self.image_labels = image_labels  # sha256 -> label
        self.embedded: list[str] = []

    def _one_hot(self, label: str | None) -> np.ndarray:
        vec = np.zeros(len(self.labels) + 1, dtype=np.float32)
        vec[self.labels.index(label) if label in self.labels else -1] = 1.0
        return vec

    def embed_texts(self, texts: Iterable[str], *, batch_size: int = 32) -> np.ndarray:
        return np.stack([self._one_hot(self.prompt_label.get(t)) for t in texts])

    def cached_embeddings(self, images: Sequence[DecodedImage]) -> list[np.ndarray | None]:
        return [None for _ in images]

    def embed_decoded(self, images: Sequence[DecodedImage]) -> np.ndarray:
        self.embedded.extend(i.sha256 for i in images)
        return np.stack([self._one_hot(self.image_labels.get(i.sha256)) for i in images])

    def probabilities(self, image_embeddings: np.ndarray, label_embeddings: np.ndarray) -> np.ndarray:
        cos = image_embeddings @ label_embeddings.T
        return 1.0 / (1.0 + np.exp(-(10.0 * cos - 5.0)))  # SigLIP's sigmoid(scale * cos + bias)


SHOWS = {"passport": 1, "chest_xray": 2, "code_screenshot": 3, "vehicle": 4, "everyday_photo": 5}


@pytest.fixture(scope="module")
def shown_image(image_bytes: Callable[..., bytes]) -> Callable[[str], bytes]:
    """The test image that "shows" `label`: each label's image differs in size, so in hash."""

    def image(label: str) -> bytes:
        return image_bytes("PNG", size=(24 + SHOWS[label], 24), mode="RGB")

    return image


@pytest.fixture(scope="module")
def vision_router(shown_image: Callable[[str], bytes]) -> Iterator[tuple[Router, ControlledEncoder]]:
    import hashlib

    import yaml

    spec = next(s for s in yaml.safe_load(POLICY.read_text())["signals"] if s["type"] == "image_labels")
    from extproc.signals.image_labels import ImageLabelsSpec

    parsed = ImageLabelsSpec.model_validate(spec)
    prompts = {label: parsed.prompts(label) for label in parsed.labels}
    image_labels = {hashlib.sha256(shown_image(label)).hexdigest(): label for label in SHOWS}
    encoder = ControlledEncoder(prompts, image_labels)
    models = ModelRegistry()
    models.put("vision", encoder, detail="controlled test encoder")
    router = _default_policy_router(models)
    yield router, encoder
    router.close()


def _default_policy_router(models: ModelRegistry) -> Router:
    """The default policy on its own one-worker executor, with `models` (what is not there loads as settings say)."""
    settings = Settings.load(None, environ=SUITE_ENVIRON).model_copy(update={"policy_path": POLICY})
    executor = HeavyExecutor(1, None)
    ctx = BuildContext(settings=settings, executor=executor, models=models)
    return Router(settings, load_policy(POLICY, ctx), executor=executor, models=models)


@pytest.fixture(scope="module")
def image_request(
    shown_image: Callable[[str], bytes],
    data_uri: Callable[..., str],
    chat_with_images: Callable[..., dict[str, object]],
) -> Callable[[str, str], bytes]:
    """`(label, text) -> body`: a chat request with `text` and the image showing `label`."""

    def request(label: str, text: str) -> bytes:
        return json.dumps(chat_with_images(data_uri(shown_image(label)), text=text)).encode()

    return request


@pytest.mark.parametrize(
    ("label", "text", "decision", "model"),
    [
        ("passport", "Summarize this", "identity_document", "restricted-vlm"),
        ("chest_xray", "What does this show?", "medical_image", "medical-vlm"),
        ("code_screenshot", "Find the bug", "code_security_review", "code-security"),
        ("vehicle", "I have chest pain, what could the diagnosis be?", "out_of_domain_image", None),
        ("everyday_photo", "Is this rash an infection?", "out_of_domain_image", None),
        ("vehicle", "What colour is this?", "general", "general-vlm"),
        ("code_screenshot", "Describe this picture", "general", "general-vlm"),
    ],
)
async def test_seed_scenarios_are_decided_by_the_image(
    vision_router: tuple[Router, ControlledEncoder],
    image_request: Callable[[str, str], bytes],
    label: str,
    text: str,
    decision: str,
    model: str | None,
) -> None:
    router, _ = vision_router
    outcome = await router.route(image_request(label, text))
    assert outcome.decision == decision, outcome.to_dict()["trace"]
    assert (outcome.model.name if outcome.model else None) == model
    image_kind = next(s for s in outcome.signals if s.name == "image_kind")
    assert set(image_kind.labels) == {label}
    if decision == "out_of_domain_image":
        assert outcome.action == "clarify" and json.loads(wire.immediate_response(outcome).body)["choices"]


async def test_text_only_requests_never_reach_the_encoder(vision_router: tuple[Router, ControlledEncoder]) -> None:
    router, encoder = vision_router
    before = len(encoder.embedded)
    outcome = await router.route(
        json.dumps({"model": "auto", "messages": [{"role": "user", "content": "What is a radiograph?"}]}).encode()
    )
    # A text route (the subject router may call it an easy STEM or a health question), never an image one.
    assert outcome.decision in ("general", "stem_easy", "health_question") and len(encoder.embedded) == before
    assert {s.name for s in outcome.signals}.isdisjoint({"topic"})  # no embedding without an image or a suspect


@pytest.fixture(scope="module")
def router_without_vision() -> Iterator[Router]:
    """The default policy as `make run` serves it: no vision model (image_kind unavailable), real OCR."""
    router = _default_policy_router(ModelRegistry())
    yield router
    router.close()


async def test_without_a_vision_model_an_image_request_skips_the_topic_embedding(
    router_without_vision: Router,
    vision_router: tuple[Router, ControlledEncoder],
    image_request: Callable[[str, str], bytes],
) -> None:
    """out_of_domain_image needs image_kind; with no vision model it can never fire, so the MiniLM
    `topic` signal it would wait on is not run after OCR. With the encoder present and a vehicle
    shown, the same request does run it."""
    outcome = await router_without_vision.route(image_request("vehicle", "Summarize this"))
    ran = {s.name: s.status.value for s in outcome.signals}
    assert ran["image_kind"] == "unavailable" and "image_text" in ran
    assert "topic" not in ran and outcome.decision == "general"
    with_vision, _ = vision_router
    outcome = await with_vision.route(image_request("vehicle", "Summarize this"))
    assert "topic" in {s.name for s in outcome.signals} and outcome.decision == "general"


@pytest.mark.parametrize(
    "text",
    [
        "What am I looking at?",  # read as an easy computer-science question: it was answered 400
        "Solve this equation for x and show each step",
        "Prove the theorem in this picture",
        "What is the time complexity of the code in this screenshot?",
    ],
)
async def test_a_stem_question_about_an_image_goes_to_a_model_that_reads_images(
    text: str,
    router_without_vision: Router,
    vision_router: tuple[Router, ControlledEncoder],
    image_request: Callable[[str, str], bytes],
) -> None:
    """The subject routes' models read text only; an image request they matched got 400
    no_capable_model. Now they keep to text-only requests, and the image goes to the general VLM."""
    for router in (router_without_vision, vision_router[0]):
        outcome = await router.route(image_request("everyday_photo", text))
        assert outcome.status == 200 and outcome.action == "route", outcome.to_dict()
        assert outcome.model is not None and outcome.model.accepts("image")
        assert outcome.decision not in ("stem_hard", "stem_easy")
    # ...while the same question alone still reaches the subject routes' text models where they match.
    text_only = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
    outcome = await router_without_vision.route(text_only)
    assert outcome.status == 200


@pytest.mark.parametrize(
    "text",
    [
        "What am I looking at?",
        "Could you describe what's happening here?",
        "What's this thing in the picture?",
        "Can you tell me more about this image?",
        "What do you make of this?",
        "Is there something odd in this photo?",
    ],
)
@pytest.mark.parametrize("shown", ["vehicle", "everyday_photo"])
async def test_a_plain_question_about_a_photo_is_not_asked_for_a_medical_image(
    text: str, shown: str, vision_router: tuple[Router, ControlledEncoder], image_request: Callable[[str, str], bytes]
) -> None:
    """The medical exemplars ask about images, so at the topic's general bar a plain question about
    a street photo read as medical and got out_of_domain_image's clarify."""
    router, _ = vision_router
    outcome = await router.route(image_request(shown, text))
    assert outcome.decision == "general" and outcome.action == "route", outcome.to_dict()["trace"]


@pytest.mark.parametrize(
    "text",
    ["Is this wound infected?", "Does this bruise look serious?", "Could this be an allergic reaction?"],
)
async def test_a_medical_question_about_a_street_photo_still_asks_for_the_scan(
    text: str, vision_router: tuple[Router, ControlledEncoder], image_request: Callable[[str, str], bytes]
) -> None:
    router, _ = vision_router
    outcome = await router.route(image_request("vehicle", text))
    assert outcome.decision == "out_of_domain_image" and outcome.action == "clarify"
