"""Modality signal: does the request carry images (inline data: URIs, and remote URLs if counted)?"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Evaluation, Signal, SignalSpecBase

LABELS: tuple[str, ...] = ("image_present", "remote_image")


class ModalitySpec(SignalSpecBase):
    type: Literal["modality"]
    min_images: int = Field(default=1, ge=1)
    count_remote: bool = True  # remote (http/https) image URLs count towards min_images


class ModalitySignal(Signal):
    spec: ModalitySpec
    inline = True
    reads: ClassVar[frozenset[str]] = frozenset({"image_meta"})
    implies_image: ClassVar[bool] = True

    def known_labels(self) -> frozenset[str]:
        return frozenset(LABELS)

    def compute(self, request: RoutingRequest) -> Evaluation:
        inline, remote = len(request.images), len(request.remote_images)
        count = inline + (remote if self.spec.count_remote else 0)
        matched = count >= self.spec.min_images
        remote_note = "" if self.spec.count_remote else " (not counted)"
        return Evaluation(
            matched=matched,
            score=1.0 if matched else count / self.spec.min_images,
            labels={"image_present": 1.0 if count else 0.0, "remote_image": 1.0 if remote else 0.0},
            evidence=(f"images: {inline} inline, {remote} remote{remote_note}",),
        )
