"""What the OCR-backed signals (image_text, document) share: loading the OCR service, reading a request's images.

The OCR service comes from the model registry, so every OCR signal of a policy shares one
engine and one cache: the first signal to read an image pays for OCR, the others (and the
same image on a later request) get the cached result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from extproc.models.ocr import OcrResult, OcrService, get_ocr_service
from extproc.models.registry import ModelUnavailable
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import BuildContext, SignalContext, SignalUnavailable


@dataclass(frozen=True, slots=True)
class ImageText:
    index: int  # position of the image in the request
    result: OcrResult


def load_ocr(ctx: BuildContext) -> tuple[OcrService | None, str | None]:
    """The shared OCR service, or None and why it is unavailable."""
    try:
        service = get_ocr_service(ctx.models, ctx.settings.ocr, default_threads=ctx.settings.dispatch.torch_threads)
    except ModelUnavailable as exc:
        return None, str(exc)
    return service, None


async def read_images(
    service: OcrService | None, reason: str | None, request: RoutingRequest, ctx: SignalContext
) -> list[ImageText]:
    """OCR every inline image of `request` (cached by sha256), within the request's deadline.

    Request errors from decoding pixels (a corrupt image) propagate; a missing engine raises
    SignalUnavailable. Images are read one after another: the heavy executor is one bounded
    pool, so reading them "concurrently" would only queue them.
    """
    if not request.images:
        return []
    if service is None:
        raise SignalUnavailable(reason or "OCR is not available")
    deadline = time.monotonic() + ctx.remaining()
    out = []
    for i, image in enumerate(request.images):
        out.append(ImageText(i, await service.read(image, ctx.executor, deadline)))
    return out
