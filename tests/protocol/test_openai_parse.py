from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable

import pytest
from PIL import Image

from extproc.errors import MalformedRequest, PayloadTooLarge, UnprocessableRequest, UnsupportedMedia
from extproc.images import ImageLimits
from extproc.protocol.openai import api_for_path, parse_request
from extproc.protocol.request import ApiKind, Role


def parse(body: object, path: str = "/v1/chat/completions", **kw: object) -> object:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_request(raw, path=path, **kw)  # type: ignore[arg-type]


def test_chat_string_and_part_content_by_role() -> None:
    req = parse_request(
        json.dumps(
            {
                "model": "auto",
                "stream": True,
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "developer", "content": [{"type": "text", "text": "dev rules"}]},
                    {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "again"}]},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "result text"},
                    {"role": "user", "content": "thanks"},
                ],
                "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}],
            }
        ).encode()
    )
    assert req.api is ApiKind.CHAT and req.model == "auto" and req.stream is True
    assert [s.text for s in req.iter_text([Role.USER])] == ["hello", "again", "thanks"]
    assert [s.text for s in req.iter_text([Role.SYSTEM])] == ["be brief", "dev rules"]
    assert [s.source for s in req.iter_text([Role.TOOL])] == ["tool_result"]
    assert req.tools == ["lookup"] and req.tool_call_count == 1
    assert any(s.source == "tool_call" and "lookup" in s.text for s in req.texts)
    assert req.turn_count == 2


@pytest.mark.parametrize(
    ("fmt", "mime"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"), ("GIF", "image/gif")]
)
def test_inline_images_of_each_format(
    fmt: str,
    mime: str,
    chat_with_images: Callable[..., dict[str, object]],
    data_uri: Callable[..., str],
    image_bytes: Callable[..., bytes],
) -> None:
    data = image_bytes(fmt)
    req = parse(chat_with_images(data_uri(data, mime)))
    assert len(req.images) == 1  # type: ignore[attr-defined]
    image = req.images[0]  # type: ignore[attr-defined]
    assert image.format == fmt and image.mime == mime and (image.width, image.height) == (16, 12)
    assert image.sha256 == hashlib.sha256(data).hexdigest()
    assert image.pixels().size == (16, 12)


def test_input_image_part_and_remote_url_is_recorded_not_fetched(
    data_uri: Callable[..., str], image_bytes: Callable[..., bytes]
) -> None:
    body = {
        "model": "auto",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "compare"},
                    {"type": "input_image", "image_url": data_uri(image_bytes())},
                    {"type": "input_image", "image_url": "https://example.invalid/cat.png"},
                ],
            }
        ],
    }
    req = parse(body, path="/v1/responses")
    assert req.api is ApiKind.RESPONSES  # type: ignore[attr-defined]
    assert len(req.images) == 1 and [r.url for r in req.remote_images] == ["https://example.invalid/cat.png"]  # type: ignore[attr-defined]
    assert req.has_images and req.modalities == {"text", "image"}  # type: ignore[attr-defined]


def test_responses_string_input_instructions_and_function_items() -> None:
    req = parse({"model": "m", "instructions": "sys", "input": "hi there"}, path="/v1/responses")
    assert [(s.role, s.text) for s in req.texts] == [(Role.SYSTEM, "sys"), (Role.USER, "hi there")]  # type: ignore[attr-defined]
    req = parse(
        {
            "input": [
                {"type": "message", "role": "user", "content": "q"},
                {"type": "function_call", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "x", "output": "tool says"},
            ]
        },
        path="/v1/responses",
    )
    assert req.tool_call_count == 1  # type: ignore[attr-defined]
    assert [s.text for s in req.iter_text([Role.TOOL])] == ["tool says"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("prompt", ["once upon", ["a", "b"], [1, 2, 3], [[1, 2], [3]]])
def test_legacy_completions_prompts(prompt: object) -> None:
    req = parse({"model": "auto", "prompt": prompt}, path="/v1/completions")
    assert req.api is ApiKind.COMPLETIONS and req.turn_count == 1  # type: ignore[attr-defined]


def test_api_inferred_from_body_when_path_unknown() -> None:
    assert api_for_path("/v1/chat/completions?x=1") is ApiKind.CHAT
    assert api_for_path("/healthz") is None
    assert parse({"prompt": "x"}, path="/other").api is ApiKind.COMPLETIONS  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"", 400, "invalid_json"),
        (b"[1, 2]", 400, "invalid_json"),
        (b"\xff\xfe{}", 400, "invalid_json"),
        (b"[" * 5000 + b"]" * 5000, 400, "invalid_json"),
        (json.dumps({"model": "auto"}).encode(), 400, "missing_field"),
        (json.dumps({"messages": "hi"}).encode(), 400, "invalid_request"),
        (json.dumps({"messages": []}).encode(), 400, "invalid_request"),
        (json.dumps({"messages": [{"role": "wizard", "content": "x"}]}).encode(), 400, "invalid_request"),
        (json.dumps({"messages": [{"role": "user", "content": 5}]}).encode(), 400, "invalid_request"),
        (
            json.dumps({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}).encode(),
            400,
            "invalid_request",
        ),
        (json.dumps({"model": 7, "messages": [{"role": "user", "content": "x"}]}).encode(), 400, "invalid_request"),
        (
            json.dumps({"stream": "yes", "messages": [{"role": "user", "content": "x"}]}).encode(),
            400,
            "invalid_request",
        ),
        (json.dumps({"tools": {}, "messages": [{"role": "user", "content": "x"}]}).encode(), 400, "invalid_request"),
    ],
)
def test_malformed_bodies_map_to_typed_errors(body: bytes, status: int, code: str) -> None:
    with pytest.raises(MalformedRequest) as caught:
        parse_request(body)
    assert caught.value.status == status and caught.value.code == code
    error = caught.value.to_body()["error"]
    assert set(error) >= {"message", "type", "code"} and error["message"]


def test_invalid_base64_is_400(chat_with_images: Callable[..., dict[str, object]]) -> None:
    with pytest.raises(MalformedRequest) as caught:
        parse(chat_with_images("data:image/png;base64,@@@not-base64@@@"))
    assert caught.value.code == "invalid_base64"


def test_non_data_non_http_url_is_400(chat_with_images: Callable[..., dict[str, object]]) -> None:
    with pytest.raises(MalformedRequest):
        parse(chat_with_images("file:///etc/passwd"))


def test_unsupported_image_format_is_415(
    chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str], image_bytes: Callable[..., bytes]
) -> None:
    with pytest.raises(UnsupportedMedia):
        parse(chat_with_images(data_uri(image_bytes("BMP"), "image/png")))
    with pytest.raises(UnsupportedMedia):
        parse(chat_with_images(data_uri(image_bytes("BMP"), "image/bmp")))
    with pytest.raises(UnsupportedMedia):
        parse(chat_with_images(data_uri(b"plain text, not an image", "text/plain")))


def test_image_byte_limit_is_413(
    chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str], image_bytes: Callable[..., bytes]
) -> None:
    data = image_bytes(size=(64, 64))
    with pytest.raises(PayloadTooLarge) as caught:
        parse(chat_with_images(data_uri(data)), limits=ImageLimits(max_bytes=len(data) - 1))
    assert caught.value.status == 413


def test_pixel_limit_refuses_before_decoding(
    chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str], image_bytes: Callable[..., bytes]
) -> None:
    data = image_bytes(size=(300, 300))
    with pytest.raises(PayloadTooLarge) as caught:
        parse(chat_with_images(data_uri(data)), limits=ImageLimits(max_pixels=300 * 299))
    assert caught.value.code == "image_too_many_pixels"


def test_decompression_bomb_is_refused(
    chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str]
) -> None:
    # A 1-bit PNG of 20000x20000 compresses to a few KB but would decode to 400 Mpx.
    img = Image.new("1", (20000, 20000), 0)
    buf = io.BytesIO()
    img.save(buf, "PNG", optimize=True)
    assert len(buf.getvalue()) < 200_000
    with pytest.raises(PayloadTooLarge):
        parse(chat_with_images(data_uri(buf.getvalue())))


def test_frame_limit_is_413(chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str]) -> None:
    frames = [Image.new("RGB", (8, 8), (i * 25, 0, 0)) for i in range(10)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:])
    with pytest.raises(PayloadTooLarge) as caught:
        parse(chat_with_images(data_uri(buf.getvalue(), "image/gif")), limits=ImageLimits(max_frames=5))
    assert caught.value.code == "image_too_many_frames"


def test_image_count_limit_counts_remote_images_too(
    chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str], image_bytes: Callable[..., bytes]
) -> None:
    uris = [data_uri(image_bytes()), "https://a.invalid/1.png", "https://a.invalid/2.png"]
    with pytest.raises(PayloadTooLarge) as caught:
        parse(chat_with_images(*uris), limits=ImageLimits(max_images=2))
    assert caught.value.code == "too_many_images"


def test_truncated_image_is_422_when_decoded(
    chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str], image_bytes: Callable[..., bytes]
) -> None:
    data = image_bytes("PNG", size=(64, 64), mode="RGB")
    req = parse(chat_with_images(data_uri(data[: len(data) - 40])))
    with pytest.raises(UnprocessableRequest) as caught:
        req.images[0].pixels()  # type: ignore[attr-defined]
    assert caught.value.status == 422


def test_garbage_after_valid_header_is_422_or_415(
    chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str], image_bytes: Callable[..., bytes]
) -> None:
    data = image_bytes("JPEG", size=(64, 64))
    corrupt = data[:20] + b"\x00" * 10
    with pytest.raises((UnprocessableRequest, UnsupportedMedia)):
        req = parse(chat_with_images(data_uri(corrupt, "image/jpeg")))
        req.images[0].pixels()  # type: ignore[attr-defined]


def test_exif_orientation_is_applied(
    chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str]
) -> None:
    img = Image.new("RGB", (40, 20), (10, 20, 30))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise on display
    buf = io.BytesIO()
    img.save(buf, "JPEG", exif=exif)
    req = parse(chat_with_images(data_uri(buf.getvalue(), "image/jpeg")))
    image = req.images[0]  # type: ignore[attr-defined]
    assert (image.width, image.height) == (40, 20)
    assert image.pixels().size == (20, 40)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_decoded_pixels_outlive_the_decode_and_are_frame_0(
    fmt: str, chat_with_images: Callable[..., dict[str, object]], data_uri: Callable[..., str]
) -> None:
    """JPEG and PNG pixels are returned without the defensive copy: they must still read after the
    decode returned, and equal the first frame's, also for formats with a second frame."""
    first = Image.new("RGB", (48, 32), (200, 30, 30))
    second = Image.new("RGB", (48, 32), (30, 30, 200))
    buf = io.BytesIO()
    if fmt in ("GIF", "WEBP", "PNG"):
        first.save(buf, fmt, save_all=True, append_images=[second], **({"lossless": True} if fmt == "WEBP" else {}))
    else:
        first.save(buf, fmt, quality=95)
    mime = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}[fmt]
    req = parse(chat_with_images(data_uri(buf.getvalue(), mime)))
    pixels = req.images[0].pixels()  # type: ignore[attr-defined]
    r, g, b = pixels.convert("RGB").getpixel((10, 10))  # type: ignore[misc]
    assert r > 150 and g < 80 and b < 80, (fmt, (r, g, b))
    assert pixels.convert("RGB").resize((12, 8)).size == (12, 8)  # usable, not a closed image


def test_body_size_limit_is_413() -> None:
    with pytest.raises(PayloadTooLarge):
        parse_request(b'{"prompt": "' + b"x" * 2000 + b'"}', max_body_bytes=1000)
