"""Hostile images are refused from their headers and structure, in bounded time, with the right status.

Each case is a small file (or one under the 16 MiB byte limit) that would cost a naive
decoder gigabytes of memory or seconds to minutes of CPU. Every one must be answered in well
under a second, before any pixel buffer is allocated.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

import pytest

from extproc.errors import PayloadTooLarge, RequestError, UnprocessableRequest, UnsupportedMedia
from extproc.images import (
    MAX_GIF_BLOCKS,
    MAX_JPEG_HEADER_MARKERS,
    MAX_JPEG_SCANS,
    MAX_JPEG_SKIPPED_BYTES,
    MAX_PNG_CHUNKS,
    MAX_PNG_HEADER_CHUNKS,
    ImageLimits,
    inspect_image,
)
from tests.hardening import imagegen as gen

LIMITS = ImageLimits()
BUDGET_S = 0.5  # per refusal, on a loaded 2-core CI machine; typical is < 50 ms


def refused(data: bytes, mime: str = "") -> tuple[RequestError, float]:
    started = time.perf_counter()
    with pytest.raises(RequestError) as caught:
        inspect_image(data, declared_mime=mime, limits=LIMITS, message_index=0)
    return caught.value, time.perf_counter() - started


BOMBS: dict[str, tuple[Callable[[], bytes], type[RequestError], str]] = {
    "png 1x1 file claiming 100000x100000": (
        lambda: gen.png_claiming(100_000, 100_000),
        PayloadTooLarge,
        "image_too_many_pixels",
    ),
    "png claiming 7000x7000 (over 40 Mpx)": (
        lambda: gen.png_claiming(7000, 7000),
        PayloadTooLarge,
        "image_too_many_pixels",
    ),
    "png claiming 2^31-1 wide": (lambda: gen.png_claiming(2**31 - 1, 1), PayloadTooLarge, "image_too_many_pixels"),
    "jpeg claiming 65000x65000": (lambda: gen.jpeg_claiming(65_000, 65_000), PayloadTooLarge, "image_too_many_pixels"),
    "jpeg claiming 8000x6000": (lambda: gen.jpeg_claiming(8000, 6000), PayloadTooLarge, "image_too_many_pixels"),
    "webp VP8X claiming 2^24 x 2^24": (
        lambda: b"RIFF\x24\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff",
        PayloadTooLarge,
        "image_too_many_pixels",
    ),
    "gif with 65 frames": (lambda: gen.gif_with_frames(65), PayloadTooLarge, "image_too_many_frames"),
    "gif with 400k frames (13 MB)": (lambda: gen.gif_with_frames(400_000), PayloadTooLarge, "image_too_many_frames"),
    "apng claiming 10^9 frames": (lambda: gen.apng_claiming_frames(10**9), PayloadTooLarge, "image_too_many_frames"),
    "gif with 7M one-byte comment sub-blocks": (
        lambda: gen.gif_with_tiny_sub_blocks(7_000_000),
        PayloadTooLarge,
        "image_too_complex",
    ),
    "png with 1.3M empty chunks before IDAT": (
        lambda: gen.png_claiming(1, 1, before_idat=gen.png_chunk(b"tEXt", b"") * 1_300_000),
        PayloadTooLarge,
        "image_too_complex",
    ),
    "png with 1M empty IDAT chunks": (
        lambda: gen.png_header(1, 1) + gen.png_chunk(b"IDAT", b"") * 1_000_000 + gen.png_chunk(b"IEND", b""),
        PayloadTooLarge,
        "image_too_complex",
    ),
    "jpeg with 4M comment markers": (
        lambda: (j := gen.small("JPEG", (8, 8)))[:2] + b"\xff\xfe\x00\x02" * 4_000_000 + j[2:],
        PayloadTooLarge,
        "image_too_complex",
    ),
    "jpeg with 16 MB of fill bytes": (
        lambda: (j := gen.small("JPEG", (8, 8)))[:2] + b"\xff" * 15_000_000 + j[2:],
        PayloadTooLarge,
        "image_too_complex",
    ),
    "progressive jpeg with 5000 extra scans": (lambda: gen.jpeg_with_scans(5000), PayloadTooLarge, "image_too_complex"),
    "bmp": (lambda: gen.small("BMP"), UnsupportedMedia, "unsupported_image_type"),
    "tiff": (lambda: gen.small("TIFF"), UnsupportedMedia, "unsupported_image_type"),
    "svg text": (lambda: b"<svg xmlns='http://www.w3.org/2000/svg'/>", UnsupportedMedia, "unsupported_image_type"),
    "pdf": (lambda: b"%PDF-1.4\n1 0 obj<<>>endobj\n", UnsupportedMedia, "unsupported_image_type"),
    "png truncated inside IHDR": (lambda: gen.small("PNG")[:20], UnprocessableRequest, "corrupt_image"),
    "empty gif screen, no frames": (
        lambda: b"GIF89a\x01\x00\x01\x00\x00\x00\x00;",
        UnsupportedMedia,
        "unsupported_image_type",
    ),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_hostile_image_is_refused_fast_with_its_class(name: str) -> None:
    build, error_class, code = BOMBS[name]
    error, elapsed = refused(build())
    assert isinstance(error, error_class), f"{name}: {type(error).__name__} {error.message}"
    assert error.code == code
    assert error.status == error_class.status
    assert elapsed < BUDGET_S, f"{name}: refused in {elapsed:.3f}s"


@pytest.mark.parametrize(
    "data",
    [
        gen.png_claiming(6000, 6000),  # 36 Mpx claimed, 70 bytes of data
        gen.png_claiming(64, 64, idat=b"not zlib at all"),
        gen.small("PNG", (64, 64))[:-30],  # cut inside IDAT/IEND
        gen.small("JPEG", (64, 64))[:-100],
        gen.gif_with_frames(3)[:-8],
    ],
    ids=["png-36Mpx-no-data", "png-bad-zlib", "png-truncated", "jpeg-truncated", "gif-truncated"],
)
def test_truncated_or_corrupt_pixels_are_422_when_decoded(data: bytes) -> None:
    """Inspection or pixel decoding fails cleanly (422), or the decoder yields an image; never a crash."""
    started = time.perf_counter()
    try:
        image = inspect_image(data, declared_mime="", limits=LIMITS, message_index=0)
        pixels = image.pixels()
    except UnprocessableRequest as error:
        assert (error.status, error.code) == (422, "corrupt_image")
    else:
        assert pixels.size == (image.width, image.height)
    assert time.perf_counter() - started < 2.0


def test_every_structural_cap_admits_real_images() -> None:
    """The caps sit far above what encoders write: animated GIFs at the frame limit, APNG,
    progressive JPEGs, PNGs with many text chunks, big IDAT counts."""
    from PIL import Image

    cases = [
        gen.gif_with_frames(LIMITS.max_frames),
        gen.apng_claiming_frames(2),
        gen.jpeg_with_scans(0),
        gen.png_claiming(1, 1, before_idat=gen.png_chunk(b"tEXt", b"k\0v") * (MAX_PNG_HEADER_CHUNKS - 10)),
        gen.png_header(1, 1)
        + gen.png_chunk(b"IDAT", b"") * 5000
        + gen.png_chunk(b"IDAT", b"x\x9cc\x00\x00\x00\x01\x00\x01")
        + gen.png_chunk(b"IEND", b""),
        gen.saved(
            Image.new("RGB", (300, 200), (1, 2, 3)), "WEBP", save_all=True, append_images=[Image.new("RGB", (300, 200))]
        ),
    ]
    for data in cases:
        inspect_image(data, declared_mime="", limits=LIMITS, message_index=0)
    assert MAX_PNG_CHUNKS > 5000 and MAX_JPEG_SCANS > 10 and MAX_GIF_BLOCKS > 65_536
    assert MAX_JPEG_HEADER_MARKERS >= 1024 and MAX_JPEG_SKIPPED_BYTES >= 4096


def test_a_tiny_file_never_allocates_a_large_buffer_at_inspection() -> None:
    """Header inspection allocates no pixels: 200 inspections of a 36 Mpx claim stay cheap."""
    import tracemalloc

    data = gen.png_claiming(6000, 6000)
    tracemalloc.start()
    try:
        for _ in range(200):
            inspect_image(data, declared_mime="", limits=LIMITS, message_index=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024


def test_jpeg_dimensions_field_is_the_one_checked() -> None:
    data = gen.jpeg_claiming(6400, 6250)  # exactly 40 Mpx: allowed
    image = inspect_image(data, declared_mime="", limits=LIMITS, message_index=0)
    assert (image.width, image.height) == (6400, 6250)
    assert struct.pack(">HH", 6250, 6400) in data
