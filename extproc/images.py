"""Safe image intake: data-URI parsing, limits checked before pixels are decoded, content hashes.

Parsing reads only the image header (format, size, frame count), so a request with a
huge or hostile image is refused before any pixel buffer is allocated. Pixels are decoded
lazily, once, by the first signal that needs them (`DecodedImage.pixels()`), which lets a
cached embedding skip decoding entirely.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import threading
import warnings
from dataclasses import dataclass, field

from PIL import Image, ImageOps, UnidentifiedImageError

from extproc.errors import MalformedRequest, PayloadTooLarge, UnprocessableRequest, UnsupportedMedia

# Pillow format name -> the MIME type we accept for it.
ACCEPTED_FORMATS: dict[str, str] = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "WEBP": "image/webp",
    "GIF": "image/gif",
}
_MIME_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/x-png": "image/png"}


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """Per-image and per-request bounds; every one is enforced before pixel decoding."""

    max_bytes: int = 16 * 1024 * 1024  # decoded (not base64) bytes per image
    max_pixels: int = 40_000_000  # width * height
    max_frames: int = 64  # animated GIF/WebP/APNG
    max_images: int = 8  # images per request (inline + remote)


@dataclass(frozen=True, slots=True)
class RemoteImage:
    """An http(s) image URL: recorded for signals and logs, never fetched."""

    url: str
    message_index: int


@dataclass(eq=False, slots=True)
class DecodedImage:
    """An inline image whose header has been validated; pixels decode on first use."""

    data: bytes
    sha256: str
    format: str  # Pillow format name, e.g. "PNG"
    mime: str
    width: int  # as stored, before EXIF orientation
    height: int
    mode: str
    frames: int
    message_index: int
    _pixels: Image.Image | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def byte_size(self) -> int:
        return len(self.data)

    def pixels(self) -> Image.Image:
        """The first frame, fully decoded and EXIF-transposed; decoded once, then shared.

        The returned image keeps its original mode (RGBA, P, CMYK...): colour conversion is
        the consumer's job, because a naive RGBA->RGB conversion changes pixels.
        Raises `UnprocessableRequest` for truncated or corrupt data.
        """
        with self._lock:
            if self._pixels is None:
                self._pixels = _decode_pixels(self.data)
            return self._pixels


def parse_data_uri(uri: str) -> tuple[str, bytes]:
    """Split `data:<mime>;base64,<payload>` into (mime, bytes); strict base64."""
    if not uri.startswith("data:"):
        raise MalformedRequest("image URL must be a data: URI or an http(s) URL", code="invalid_image_url")
    header, sep, payload = uri[5:].partition(",")
    if not sep:
        raise MalformedRequest("data: URI has no ',' separating header and payload", code="invalid_image_url")
    params = header.split(";")
    mime = _MIME_ALIASES.get(params[0].strip().lower(), params[0].strip().lower())
    if "base64" not in (p.strip().lower() for p in params[1:]):
        raise MalformedRequest("image data: URI must be base64-encoded", code="invalid_image_url")
    if mime and not mime.startswith("image/"):
        raise UnsupportedMedia(f"data: URI media type {mime!r} is not an image", code="unsupported_image_type")
    try:
        data = base64.b64decode("".join(payload.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MalformedRequest(f"image data is not valid base64: {exc}", code="invalid_base64") from exc
    return mime, data


def inspect_image(data: bytes, *, declared_mime: str, limits: ImageLimits, message_index: int) -> DecodedImage:
    """Validate an image's header against `limits` without decoding its pixels."""
    if not data:
        raise MalformedRequest("image data is empty", code="empty_image")
    if len(data) > limits.max_bytes:
        raise PayloadTooLarge(f"image is {len(data)} bytes; the limit is {limits.max_bytes}", code="image_too_large")
    if declared_mime and declared_mime not in ACCEPTED_FORMATS.values():
        raise UnsupportedMedia(
            f"image type {declared_mime!r} is not supported; use PNG, JPEG, WebP or GIF",
            code="unsupported_image_type",
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=list(ACCEPTED_FORMATS)) as img:
                width, height = img.size
                if width * height > limits.max_pixels:
                    raise PayloadTooLarge(
                        f"image is {width}x{height} pixels; the limit is {limits.max_pixels} pixels",
                        code="image_too_many_pixels",
                    )
                frames = _frame_count(img, limits.max_frames)
                fmt = str(img.format)
                mode = img.mode
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise PayloadTooLarge(f"image refused as a decompression bomb: {exc}", code="image_too_many_pixels") from exc
    except UnidentifiedImageError as exc:
        raise UnsupportedMedia(
            "image data is not a PNG, JPEG, WebP or GIF image", code="unsupported_image_type"
        ) from exc
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise UnprocessableRequest(f"image header could not be read: {exc}", code="corrupt_image") from exc
    return DecodedImage(
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        format=fmt,
        mime=ACCEPTED_FORMATS[fmt],
        width=width,
        height=height,
        mode=mode,
        frames=frames,
        message_index=message_index,
    )


def _frame_count(img: Image.Image, max_frames: int) -> int:
    frames = int(getattr(img, "n_frames", 1))
    if frames > max_frames:
        raise PayloadTooLarge(f"image has {frames} frames; the limit is {max_frames}", code="image_too_many_frames")
    return frames


def _decode_pixels(data: bytes) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=list(ACCEPTED_FORMATS)) as img:
                img.seek(0)
                img.load()
                transposed = ImageOps.exif_transpose(img)
                # exif_transpose returns the same object when there is nothing to do;
                # copy so the result outlives the closed file.
                return transposed.copy() if transposed is img else transposed
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise PayloadTooLarge(f"image refused as a decompression bomb: {exc}", code="image_too_many_pixels") from exc
    except (OSError, SyntaxError, ValueError, EOFError, UnidentifiedImageError) as exc:
        raise UnprocessableRequest(f"image data is truncated or corrupt: {exc}", code="corrupt_image") from exc
