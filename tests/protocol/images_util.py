"""Build image bytes and data URIs for tests."""

from __future__ import annotations

import base64
import io

from PIL import Image


def image_bytes(fmt: str = "PNG", size: tuple[int, int] = (16, 12), mode: str = "RGB", **save: object) -> bytes:
    color: object = (200, 30, 30) if mode in ("RGB", "RGBA") else 128
    img = Image.new(mode, size, color)  # type: ignore[arg-type]
    buf = io.BytesIO()
    img.save(buf, fmt, **save)
    return buf.getvalue()


def data_uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def chat_with_images(*uris: str, text: str = "what is this?") -> dict[str, object]:
    parts: list[dict[str, object]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in uris]
    return {"model": "auto", "messages": [{"role": "user", "content": parts}]}
