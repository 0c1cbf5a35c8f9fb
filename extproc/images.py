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
import re
import struct
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
# Pillow names a JPEG with a multi-picture (MPF) header "MPO" (phone cameras write them).
_FORMAT_ALIASES = {"MPO": "JPEG"}

# Bounds on the structure Pillow walks in Python before any pixel is decoded. Without them a
# file under the byte limit (millions of empty PNG chunks, JPEG junk or markers, GIF
# sub-blocks) costs seconds of CPU to open, and a JPEG with thousands of tiny progressive
# scans costs minutes to decode. Real images sit far below every one of these.
MAX_PNG_CHUNKS = 65_536  # in the whole file (real encoders write 8-64 KiB IDAT chunks)
MAX_PNG_HEADER_CHUNKS = 1_024  # before the first IDAT
MAX_JPEG_HEADER_MARKERS = 1_024  # before the first scan
MAX_JPEG_SKIPPED_BYTES = 65_536  # junk and fill bytes between header markers
MAX_JPEG_SCANS = 128  # progressive JPEGs have ~10
MAX_GIF_BLOCKS = 262_144  # data sub-blocks (a 16 MiB GIF of 255-byte blocks has ~66k)
_JPEG_MARKER = re.compile(rb"\xff+([^\xff\x00])")
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xDA)})


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
    gif_frames = check_structure(data, limits.max_frames)
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
                fmt = str(img.format)
                fmt = _FORMAT_ALIASES.get(fmt, fmt)
                # Pillow counts GIF frames by walking the whole file; the bounded walk already did.
                frames = gif_frames if fmt == "GIF" and gif_frames is not None else _frame_count(img, limits.max_frames)
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


def check_structure(data: bytes, max_frames: int) -> int | None:
    """Walk the container structure with bounded work; refuse what Pillow would be slow on.

    Returns the GIF frame count (None for other formats). Raises `PayloadTooLarge`.
    Malformed structure is left for Pillow to report: this only bounds the work.
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        _check_png(data)
    elif data.startswith(b"\xff\xd8"):
        _check_jpeg(data)
    elif data.startswith((b"GIF87a", b"GIF89a")):
        return _count_gif_frames(data, max_frames)
    return None


def _too_complex(what: str) -> PayloadTooLarge:
    return PayloadTooLarge(f"image structure is too complex to inspect: {what}", code="image_too_complex")


def _check_png(data: bytes) -> None:
    pos, size, chunks, header_chunks = 8, len(data), 0, -1
    while pos + 8 <= size:
        length, kind = struct.unpack_from(">I4s", data, pos)
        chunks += 1
        if header_chunks < 0 and kind in (b"IDAT", b"fdAT"):
            header_chunks = chunks - 1
        if chunks > MAX_PNG_CHUNKS:
            raise _too_complex(f"more than {MAX_PNG_CHUNKS} PNG chunks")
        if header_chunks < 0 and chunks > MAX_PNG_HEADER_CHUNKS:
            raise _too_complex(f"more than {MAX_PNG_HEADER_CHUNKS} PNG chunks before the image data")
        if kind == b"IEND":
            return
        pos += 12 + length


def _check_jpeg(data: bytes) -> None:
    pos, markers, skipped = 2, 0, 0
    while True:
        found = _JPEG_MARKER.search(data, pos)
        if found is None:
            return
        marker_at = found.start(1) - 1
        skipped += marker_at - pos
        if skipped > MAX_JPEG_SKIPPED_BYTES:
            raise _too_complex(f"more than {MAX_JPEG_SKIPPED_BYTES} junk bytes between JPEG markers")
        markers += 1
        if markers > MAX_JPEG_HEADER_MARKERS:
            raise _too_complex(f"more than {MAX_JPEG_HEADER_MARKERS} JPEG markers before the first scan")
        marker, pos = data[found.start(1)], found.end()
        if marker == 0xDA:  # start of scan: the rest is entropy-coded data and further scans
            break
        if marker not in _JPEG_STANDALONE:
            if pos + 2 > len(data):
                return
            pos += struct.unpack_from(">H", data, pos)[0]
    # Inside entropy-coded data 0xFF is always stuffed (FF 00), so FF DA is a scan header
    # (or one inside an embedded thumbnail, which only over-counts).
    scans = 1 + data.count(b"\xff\xda", pos)
    if scans > MAX_JPEG_SCANS:
        raise _too_complex(f"{scans} JPEG scans; the limit is {MAX_JPEG_SCANS}")


def _count_gif_frames(data: bytes, max_frames: int) -> int:
    """Frames in a GIF, walked the way Pillow walks them, stopping past `max_frames`."""
    size = len(data)
    if size < 13:
        return 0
    pos, frames, blocks = 13, 0, 0
    flags = data[10]
    if flags & 0x80:
        pos += 3 << ((flags & 7) + 1)
    while pos < size:
        introducer = data[pos]
        pos += 1
        if introducer == 0x3B:  # trailer
            break
        if introducer == 0x21:  # extension: label, then data sub-blocks
            pos += 1
        elif introducer == 0x2C:  # image descriptor, optional local palette, LZW code size, sub-blocks
            frames += 1
            if frames > max_frames:
                raise PayloadTooLarge(
                    f"image has more than {max_frames} frames; the limit is {max_frames}",
                    code="image_too_many_frames",
                )
            if pos + 9 > size:
                break
            local = data[pos + 8]
            pos += 9
            if local & 0x80:
                pos += 3 << ((local & 7) + 1)
            pos += 1
        else:  # Pillow skips stray bytes one at a time
            blocks += 1
            if blocks > MAX_GIF_BLOCKS:
                raise _too_complex(f"more than {MAX_GIF_BLOCKS} GIF blocks")
            continue
        while pos < size:
            length = data[pos]
            pos += 1 + length
            blocks += 1
            if blocks > MAX_GIF_BLOCKS:
                raise _too_complex(f"more than {MAX_GIF_BLOCKS} GIF blocks")
            if length == 0:
                break
    return frames


def _frame_count(img: Image.Image, max_frames: int) -> int:
    frames = int(getattr(img, "n_frames", 1))
    if frames > max_frames:
        raise PayloadTooLarge(f"image has {frames} frames; the limit is {max_frames}", code="image_too_many_frames")
    return frames


def _decode_pixels(data: bytes) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data), formats=list(ACCEPTED_FORMATS))
            try:
                img.seek(0)
                img.load()
                transposed = ImageOps.exif_transpose(img)
            except BaseException:
                img.close()
                raise
            # A JPEG or PNG returned as decoded is not closed: its file is an in-memory buffer, and
            # closing would free the loaded pixels, which a copy would then repeat (7-12 ms on a
            # 1411 px photo). Other formats (GIF, WebP: frames a later seek would replace) are copied.
            if transposed is img and img.format in ("JPEG", "PNG"):
                return img
            result = img.copy() if transposed is img else transposed
            img.close()
            return result
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise PayloadTooLarge(f"image refused as a decompression bomb: {exc}", code="image_too_many_pixels") from exc
    except (OSError, SyntaxError, ValueError, EOFError, UnidentifiedImageError) as exc:
        raise UnprocessableRequest(f"image data is truncated or corrupt: {exc}", code="corrupt_image") from exc
