"""Modality signal: inline and remote image counts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from extproc.images import DecodedImage, RemoteImage
from extproc.protocol.request import ApiKind, RoutingRequest
from extproc.signals.modality import ModalitySignal, ModalitySpec


def image(i: int = 0) -> DecodedImage:
    return DecodedImage(
        data=b"x",
        sha256="0" * 64,
        format="PNG",
        mime="image/png",
        width=1,
        height=1,
        mode="RGB",
        frames=1,
        message_index=i,
    )


def req(inline: int = 0, remote: int = 0) -> RoutingRequest:
    return RoutingRequest(
        api=ApiKind.CHAT,
        model="auto",
        stream=False,
        images=[image(i) for i in range(inline)],
        remote_images=[RemoteImage(url=f"https://example.com/{i}.png", message_index=i) for i in range(remote)],
    )


def signal(**kw: Any) -> ModalitySignal:
    return ModalitySignal(ModalitySpec(type="modality", name="img", **kw))


def test_text_only() -> None:
    ev = signal().compute(req())
    assert not ev.matched and ev.score == 0.0
    assert ev.labels == {"image_present": 0.0, "remote_image": 0.0}


def test_inline_image() -> None:
    ev = signal().compute(req(inline=1))
    assert ev.matched and ev.score == 1.0
    assert ev.labels == {"image_present": 1.0, "remote_image": 0.0}


def test_remote_images_counted_or_not() -> None:
    assert signal().compute(req(remote=1)).matched
    ev = signal(count_remote=False).compute(req(remote=1))
    assert not ev.matched
    assert ev.labels == {"image_present": 0.0, "remote_image": 1.0}


def test_min_images() -> None:
    s = signal(min_images=2)
    ev = s.compute(req(inline=1))
    assert not ev.matched and ev.score == 0.5
    assert s.compute(req(inline=1, remote=1)).matched


def test_class_contract() -> None:
    s = signal()
    assert s.reads == frozenset({"image_meta"})
    assert s.implies_image and s.inline and not s.safety
    assert s.known_labels() == frozenset({"image_present", "remote_image"})


def test_spec_validation() -> None:
    with pytest.raises(ValidationError, match="min_images"):
        ModalitySpec(type="modality", name="img", min_images=0)
    with pytest.raises(ValidationError, match="roles"):
        ModalitySpec(type="modality", name="img", roles=["user"])
