"""image_text and document signals on rendered scenes: the right labels fire, plain photos fire none."""

from __future__ import annotations

import time

import pytest

from extproc.protocol.request import ApiKind, RoutingRequest
from extproc.signals.base import BuildContext, Evaluation, SignalContext
from extproc.signals.document import DocumentSignal, DocumentSpec
from extproc.signals.image_text import ImageTextSignal, ImageTextSpec
from extproc.testing.ocr_scenes import image_request


@pytest.fixture(scope="module")
def image_text(ocr_build_ctx: BuildContext) -> ImageTextSignal:
    spec = ImageTextSpec(name="image_text", type="image_text", detectors=["pii", "secrets", "jailbreak", "mrz", "code"])
    return ImageTextSignal.build(spec, ocr_build_ctx)


@pytest.fixture(scope="module")
def document(ocr_build_ctx: BuildContext) -> DocumentSignal:
    return DocumentSignal.build(DocumentSpec(name="document", type="document"), ocr_build_ctx)


async def _both(
    image_text: ImageTextSignal, document: DocumentSignal, data: bytes, ctx: SignalContext
) -> tuple[Evaluation, Evaluation]:
    request = image_request(data)
    return await image_text.evaluate(request, ctx), await document.evaluate(request, ctx)


@pytest.mark.parametrize("scene", ["passport", "passport_degraded"])
async def test_passport_fires_mrz_and_identity_document(
    scene: str, image_text: ImageTextSignal, document: DocumentSignal, scene_bytes: dict[str, bytes],
    signal_ctx: SignalContext,
) -> None:  # fmt: skip
    text_ev, doc_ev = await _both(image_text, document, scene_bytes[scene], signal_ctx)
    assert text_ev.matched and text_ev.labels.get("mrz") == 1.0
    assert "mrz_invalid" not in text_ev.labels
    assert "pii:passport" in text_ev.labels  # the number is in the MRZ, wherever OCR put the printed box
    assert doc_ev.matched and doc_ev.labels["identity_document"] >= 0.9
    assert any("mrz TD3 passport state=UTO valid" in e for e in text_ev.evidence)
    joined = " ".join(text_ev.evidence)
    assert "LINDQVIST" not in joined and "X52B91074" not in joined  # evidence is redacted


async def test_tampered_mrz_is_not_accepted(
    image_text: ImageTextSignal, document: DocumentSignal, scene_bytes: dict[str, bytes], signal_ctx: SignalContext
) -> None:
    text_ev, doc_ev = await _both(image_text, document, scene_bytes["passport_tampered"], signal_ctx)
    assert "mrz" not in text_ev.labels
    assert text_ev.labels.get("mrz_invalid") == 0.5
    assert any("invalid(birth_date,composite)" in e for e in text_ev.evidence)
    assert doc_ev.labels["identity_document"] >= 0.5  # still looks like a passport page


async def test_code_screenshot_leaks_aws_key(
    image_text: ImageTextSignal, document: DocumentSignal, scene_bytes: dict[str, bytes], signal_ctx: SignalContext
) -> None:
    text_ev, doc_ev = await _both(image_text, document, scene_bytes["code"], signal_ctx)
    assert text_ev.labels.get("secrets:aws_access_key", 0) >= 0.9
    assert text_ev.labels.get("code", 0) >= 0.6
    assert doc_ev.labels.get("code", 0) >= 0.6
    assert not any("AKIA4HZQ7TMXW2RBKV3N" in e for e in text_ev.evidence)


async def test_scanned_form_fires_pii_and_form(
    image_text: ImageTextSignal, document: DocumentSignal, scene_bytes: dict[str, bytes], signal_ctx: SignalContext
) -> None:
    text_ev, doc_ev = await _both(image_text, document, scene_bytes["form"], signal_ctx)
    assert "pii:email" in text_ev.labels and "pii:phone" in text_ev.labels
    assert "code" not in text_ev.labels and "mrz" not in text_ev.labels
    assert doc_ev.labels.get("form", 0) >= 0.5
    assert "identity_document" not in doc_ev.labels


async def test_prompt_injection_in_an_image(
    image_text: ImageTextSignal, document: DocumentSignal, scene_bytes: dict[str, bytes], signal_ctx: SignalContext
) -> None:
    text_ev, _ = await _both(image_text, document, scene_bytes["injection"], signal_ctx)
    assert text_ev.matched
    assert "jailbreak:instruction_override" in text_ev.labels
    assert any(e.startswith("image[0] jailbreak") for e in text_ev.evidence)


@pytest.mark.parametrize("scene", ["landscape", "car"])
async def test_plain_photos_fire_nothing(
    scene: str, image_text: ImageTextSignal, document: DocumentSignal, scene_bytes: dict[str, bytes],
    signal_ctx: SignalContext,
) -> None:  # fmt: skip
    text_ev, doc_ev = await _both(image_text, document, scene_bytes[scene], signal_ctx)
    assert not text_ev.matched and not text_ev.labels
    assert not doc_ev.matched
    assert set(doc_ev.labels) == {"photo"}


async def test_keyword_detector_on_image_text(
    ocr_build_ctx: BuildContext, scene_bytes: dict[str, bytes], signal_ctx: SignalContext
) -> None:
    spec = ImageTextSpec(name="kw", type="image_text", detectors=["keyword"], keywords=["system prompt", "invoice"])
    signal = ImageTextSignal.build(spec, ocr_build_ctx)
    ev = await signal.evaluate(image_request(scene_bytes["injection"]), signal_ctx)
    assert ev.labels == {"keyword": 1.0, "keyword:system prompt": 1.0}
    assert "keyword:invoice" in signal.known_labels()


async def test_no_images_means_no_ocr(image_text: ImageTextSignal, signal_ctx: SignalContext) -> None:
    request = RoutingRequest(api=ApiKind.CHAT, model="auto", stream=False)
    ev = await image_text.evaluate(request, signal_ctx)
    assert not ev.matched


def test_signal_contract(image_text: ImageTextSignal, document: DocumentSignal) -> None:
    assert image_text.reads == frozenset({"image"}) and image_text.implies_image and image_text.safety
    assert document.reads == frozenset({"image"}) and document.implies_image and not document.safety
    assert {"mrz", "mrz_invalid", "code", "secrets:aws_access_key", "jailbreak:instruction_override",
            "pii:passport"} <= image_text.known_labels()  # fmt: skip
    assert document.known_labels() >= {"identity_document", "form", "receipt", "code", "photo"}
    assert image_text.unavailable_reason() is None


async def test_ocr_disabled_is_unavailable_not_false(build_ctx: BuildContext, scene_bytes: dict[str, bytes]) -> None:
    from extproc.settings import Settings
    from extproc.signals.base import SignalUnavailable

    ctx = BuildContext(
        settings=Settings.load(None, environ={"VSR_OCR__ENABLED": "false"}), executor=build_ctx.executor,
        models=build_ctx.models,
    )  # fmt: skip
    signal = ImageTextSignal.build(ImageTextSpec(name="t", type="image_text"), ctx)
    assert signal.unavailable_reason() is not None and "disabled" in signal.unavailable_reason()  # type: ignore[operator]
    ctx5 = SignalContext(build_ctx.executor, time.monotonic() + 5)
    with pytest.raises(SignalUnavailable):
        await signal.evaluate(image_request(scene_bytes["car"]), ctx5)


# ICAO Doc 9303's TD3 specimen, and its TD2 identity card: no "Passport No." phrase anywhere.
SPECIMEN_TD3 = "P<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<<<<<<<<<\nL898902C36UTO7408122F1204159ZE184226B<<<<<10"
SPECIMEN_TD2 = "I<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<\nD231458907UTO7408122F1204159<<<<<<<6"


def _scan(text: str, **spec: object) -> dict[str, float]:
    signal = ImageTextSignal(ImageTextSpec(name="t", type="image_text", **spec), None, "unit")  # type: ignore[arg-type]
    return signal.scan(text)[0]


def test_a_valid_passport_mrz_is_a_passport_number() -> None:
    labels = _scan("Type P  Code UTO\n" + SPECIMEN_TD3)
    assert labels["mrz"] == 1.0 and labels["pii:passport"] == 0.9 and "pii" in labels
    assert "pii:passport" not in _scan(SPECIMEN_TD3.replace("<<<<<10", "<<<<<19"))  # a failed check digit
    assert "pii:passport" not in _scan(SPECIMEN_TD2)  # an identity card's number is not a passport number
    assert "pii" not in _scan(SPECIMEN_TD3, pii_kinds=["email"])
    assert "pii" not in _scan(SPECIMEN_TD3, detectors=["mrz"]) and _scan(SPECIMEN_TD3, detectors=["mrz"])["mrz"] == 1.0
