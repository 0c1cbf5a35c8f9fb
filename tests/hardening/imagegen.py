"""Hand-built hostile images: huge claimed sizes in tiny files, many frames, many chunks/markers/scans."""

from __future__ import annotations

import base64
import io
import struct
import zlib

from PIL import Image


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_header(width: int, height: int) -> bytes:
    return PNG_SIGNATURE + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))


def png_claiming(width: int, height: int, *, before_idat: bytes = b"", idat: bytes | None = None) -> bytes:
    """A PNG whose header says width x height, with whatever (tiny) data follows."""
    data = idat if idat is not None else zlib.compress(b"\0" * 4)
    return png_header(width, height) + before_idat + png_chunk(b"IDAT", data) + png_chunk(b"IEND", b"")


def saved(image: Image.Image, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def small(fmt: str, size: tuple[int, int] = (4, 3), mode: str = "RGB") -> bytes:
    return saved(Image.new(mode, size, 100 if mode in ("L", "P") else (200, 30, 30)), fmt)


def jpeg_claiming(width: int, height: int) -> bytes:
    """An 8x8 JPEG whose SOF0 says width x height (a ~600-byte file)."""
    data = bytearray(small("JPEG", (8, 8)))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def gif_with_frames(frames: int) -> bytes:
    """A 1x1 GIF of `frames` frames, built by repeating one frame's blocks (no encoder cost)."""
    frames_in = [Image.new("RGB", (1, 1), (0, 0, 0)), Image.new("RGB", (1, 1), (255, 255, 255))]
    two = saved(frames_in[0], "GIF", save_all=True, append_images=frames_in[1:], duration=10, optimize=False)
    first = two.index(b"\x21\xf9")
    second = two.index(b"\x21\xf9", first + 1)
    one_frame = two[second:-1]
    return two[:second] + one_frame * max(0, frames - 1) + b";"


def gif_with_tiny_sub_blocks(count: int) -> bytes:
    """A 1x1 GIF whose comment extension is `count` one-byte sub-blocks."""
    gif = small("GIF", (1, 1), "P")
    descriptor = gif.index(b",")
    return gif[:descriptor] + b"!\xfe" + b"\x01\x00" * count + b"\x00" + gif[descriptor:]


def jpeg_with_scans(extra: int) -> bytes:
    """A progressive 256x256 JPEG with `extra` copies of its smallest scan appended."""
    from PIL import ImageDraw

    image = Image.new("RGB", (256, 256), (90, 120, 150))
    ImageDraw.Draw(image).ellipse((30, 30, 220, 200), fill=(240, 10, 10))
    data = saved(image, "JPEG", progressive=True, quality=60)
    starts = [i for i in range(len(data) - 1) if data[i] == 0xFF and data[i + 1] == 0xDA]
    ends = [*starts[1:], len(data) - 2]
    smallest = min((data[s:e] for s, e in zip(starts, ends, strict=True)), key=len)
    return data[:-2] + smallest * extra + b"\xff\xd9"


def apng_claiming_frames(frames: int) -> bytes:
    data = saved(Image.new("RGB", (2, 2)), "PNG", save_all=True, append_images=[Image.new("RGB", (2, 2), (1, 1, 1))])
    at = data.index(b"acTL") - 4
    return data[:at] + png_chunk(b"acTL", struct.pack(">II", frames, 0)) + data[at + 20 :]


def data_uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def chat(*parts: object, model: str = "auto") -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": list(parts)}]}


def image_part(uri: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": uri}}
