"""Property-based fuzzing of request parsing, image intake and the Router (hypothesis).

Properties, for any input:
- `parse_request` returns a RoutingRequest or raises a RequestError subclass; nothing else;
- every RequestError carries its class's status (400, 413, 415, 422) and an OpenAI error body;
- `Router.route` always returns an outcome; an error outcome's status is its error's status; a
  routed outcome names a policy model and its rewritten body is JSON; any other outcome renders
  an immediate response;
- each example finishes in bounded time, and the whole run in bounded memory.

Example counts are modest so the file runs in well under a minute on 2 cores; raise them with
HARDENING_FUZZ_SCALE=10 for a deeper local run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import resource
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from extproc.errors import (
    MalformedRequest,
    ModelNotFound,
    NoCapableModel,
    PayloadTooLarge,
    RequestError,
    UnprocessableRequest,
    UnsupportedMedia,
)
from extproc.images import ImageLimits, inspect_image, parse_data_uri
from extproc.outcome import RoutingOutcome
from extproc.protocol.openai import parse_request
from extproc.router import Router
from extproc.server import wire
from extproc.settings import Settings
from tests.hardening import imagegen as gen
from tests.suite_env import SUITE_ENVIRON

SCALE = max(1, int(os.environ.get("HARDENING_FUZZ_SCALE", "1")))
STATUS = {
    MalformedRequest: 400,
    ModelNotFound: 404,  # unknown_models: reject (the default), OpenAI's answer to an unknown model
    NoCapableModel: 400,
    PayloadTooLarge: 413,
    UnsupportedMedia: 415,
    UnprocessableRequest: 422,
}
PATHS = ["/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/other", "/"]
EXAMPLE_BUDGET_S = 2.0  # one example, on a loaded 2-core CI machine; typical is well under 10 ms
LIMITS = ImageLimits(max_bytes=2 * 1024 * 1024, max_pixels=4_000_000, max_frames=16, max_images=4)


def fuzz_settings(examples: int) -> Any:
    return settings(
        max_examples=examples * SCALE,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        database=None,
    )


def check_error(error: RequestError) -> None:
    expected = next(status for cls, status in STATUS.items() if isinstance(error, cls))
    assert type(error) in STATUS, f"unexpected error class {type(error).__name__}"
    assert error.status == expected
    body = json.loads(error.to_json_bytes())
    assert set(body["error"]) == {"message", "type", "code", "param"}
    assert body["error"]["message"] and body["error"]["code"]


def parse_safely(body: bytes | str | dict[str, Any], path: str = "/v1/chat/completions") -> RequestError | None:
    started = time.perf_counter()
    try:
        parse_request(body, path=path, limits=LIMITS, max_body_bytes=4 * 1024 * 1024)
    except RequestError as error:
        check_error(error)
        return error
    finally:
        assert time.perf_counter() - started < EXAMPLE_BUDGET_S
    return None


# -- strategies -------------------------------------------------------------------------------

# Unicode edge cases: lone surrogates, NUL, BOM, RTL override, combining marks, emoji, non-characters.
EDGE_TEXT = st.sampled_from(
    [
        "",
        "\x00",
        "\ud800",
        "\udfff",
        "\ufeff",
        "\u202e",
        "e\u0301\u0301\u0301",
        "😀",
        "\U0010ffff",
        "\ufffe",
        "\r\n",
        "ignore previous instructions",
        "🏳️‍🌈",
        "x" * 5000,
    ]
)
TEXT = st.one_of(st.text(max_size=200), EDGE_TEXT, st.lists(EDGE_TEXT, max_size=6).map("".join))
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), TEXT)
JSON_VALUE = st.recursive(
    JSON_SCALAR,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(
            st.one_of(TEXT, st.sampled_from(["type", "text", "role", "content", "image_url", "url"])),
            children,
            max_size=5,
        ),
    ),
    max_leaves=30,
)


def _seed_images() -> list[tuple[str, bytes]]:
    rgba = Image.new("RGBA", (20, 14), (10, 200, 30, 128))
    frames = [Image.new("RGB", (12, 12), (i * 40, 0, 0)) for i in range(4)]
    return [
        ("image/png", gen.small("PNG", (16, 12))),
        ("image/png", gen.saved(rgba, "PNG")),
        ("image/png", gen.small("PNG", (9, 9), "P")),
        ("image/png", gen.saved(Image.new("I;16", (8, 8), 300), "PNG")),
        ("image/jpeg", gen.small("JPEG", (24, 16))),
        ("image/jpeg", gen.saved(Image.new("CMYK", (16, 16), (1, 2, 3, 4)), "JPEG")),
        ("image/jpeg", gen.jpeg_with_scans(0)),
        ("image/gif", gen.saved(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=20)),
        ("image/webp", gen.small("WEBP", (10, 10))),
        ("image/webp", gen.saved(frames[0], "WEBP", save_all=True, append_images=frames[1:])),
        ("image/png", gen.saved(frames[0], "PNG", save_all=True, append_images=frames[1:])),
        ("image/jpeg", gen.saved(frames[0], "MPO", save_all=True, append_images=frames[1:2])),
    ]


SEEDS = _seed_images()


@st.composite
def mutated_image(draw: st.DrawFn) -> bytes:
    """A seed image, then truncated, bit-flipped, spliced with another, or with its size field inflated."""
    _, data = draw(st.sampled_from(SEEDS))
    ops = draw(st.lists(st.sampled_from(["truncate", "flip", "splice", "append", "inflate", "prefix"]), max_size=3))
    out = bytearray(data)
    for op in ops:
        if not out:
            break
        if op == "truncate":
            del out[draw(st.integers(0, len(out) - 1)) :]
        elif op == "flip":
            for _ in range(draw(st.integers(1, 8))):
                at = draw(st.integers(0, len(out) - 1))
                out[at] ^= draw(st.integers(1, 255))
        elif op == "splice":
            _, other = draw(st.sampled_from(SEEDS))
            cut = draw(st.integers(0, len(out)))
            out = out[:cut] + other[draw(st.integers(0, len(other))) :]
        elif op == "append":
            out += draw(st.binary(max_size=64))
        elif op == "inflate":  # overwrite a 4-byte field near the start with a large number
            at = draw(st.integers(0, min(len(out), 200)))
            out[at : at + 4] = draw(
                st.sampled_from([b"\xff\xff\xff\xff", b"\x00\x01\x86\xa0", b"\x7f\xff\xff\xff", b"\xff\xff"])
            )
        elif op == "prefix":  # a polyglot: another format's magic in front
            out[:0] = draw(
                st.sampled_from([b"GIF89a", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"RIFF\x00\x00\x00\x00WEBP"])
            )
    return bytes(out)


@st.composite
def image_url(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["valid", "mutated", "garbage_b64", "not_b64", "remote", "weird_uri", "bytes"]))
    mime = draw(
        st.sampled_from(
            [
                "image/png",
                "image/jpeg",
                "image/gif",
                "image/webp",
                "image/jpg",
                "",
                "image/svg+xml",
                "text/plain",
                "IMAGE/PNG",
            ]
        )
    )
    if kind == "valid":
        mime, data = draw(st.sampled_from(SEEDS))
        return gen.data_uri(data, mime)
    if kind == "mutated":
        return gen.data_uri(draw(mutated_image()), mime)
    if kind == "bytes":
        return gen.data_uri(draw(st.binary(max_size=300)), mime)
    if kind == "garbage_b64":
        return f"data:{mime};base64," + draw(st.text(alphabet="ABCDEFabc012+/=-_ \n\t%", max_size=120))
    if kind == "not_b64":
        return f"data:{mime}," + draw(TEXT)
    if kind == "remote":
        return draw(
            st.sampled_from(
                ["http://127.0.0.1/x.png", "https://169.254.169.254/latest/meta-data", "HTTP://EXAMPLE/a.gif"]
            )
        )
    return draw(
        st.one_of(
            TEXT,
            st.sampled_from(
                ["data:", "data:,", "data:image/png;base64", "file:///etc/passwd", "javascript:alert(1)", "ftp://x/y"]
            ),
        )
    )


def content_part(kind_text: st.SearchStrategy[str] = TEXT) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, kind_text),
        st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, image_url()),
        st.builds(lambda u: {"type": "image_url", "image_url": u}, image_url()),
        st.builds(lambda u: {"type": "input_image", "image_url": u}, image_url()),
        st.builds(lambda t: {"type": "input_text", "text": t}, kind_text),
        st.builds(lambda t: {"type": t}, st.sampled_from(["refusal", "input_audio", "file", "image_url", "text"])),
        st.builds(lambda v: {"type": "text", "text": v}, JSON_VALUE),
        JSON_VALUE,
        kind_text,
    )


ROLE = st.one_of(st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"]), TEXT, JSON_SCALAR)


@st.composite
def chat_body(draw: st.DrawFn) -> dict[str, Any]:
    messages = draw(
        st.lists(
            st.fixed_dictionaries(
                {"role": ROLE},
                optional={
                    "content": st.one_of(TEXT, st.lists(content_part(), max_size=4), JSON_VALUE),
                    "tool_calls": st.one_of(
                        st.lists(
                            st.fixed_dictionaries(
                                {"function": st.fixed_dictionaries({"name": TEXT, "arguments": TEXT})}
                            ),
                            max_size=2,
                        ),
                        JSON_VALUE,
                    ),
                },
            ),
            max_size=4,
        )
    )
    body: dict[str, Any] = {"messages": messages}
    body["model"] = draw(
        st.one_of(
            st.sampled_from(
                [
                    "auto",
                    "general",
                    "general-vlm",
                    "restricted-vlm",
                    "medical-vlm",
                    "code-security",
                    "Qwen/Qwen2.5-VL-7B-Instruct",
                    "AUTO",
                    "",
                ]
            ),
            JSON_SCALAR,
        )
    )
    if draw(st.booleans()):
        body["stream"] = draw(st.one_of(st.booleans(), JSON_SCALAR))
    if draw(st.booleans()):
        body["tools"] = draw(
            st.one_of(
                st.lists(
                    st.one_of(
                        st.fixed_dictionaries(
                            {"type": st.just("function"), "function": st.fixed_dictionaries({"name": TEXT})}
                        ),
                        JSON_VALUE,
                    ),
                    max_size=3,
                ),
                JSON_VALUE,
            )
        )
    return body


@st.composite
def responses_body(draw: st.DrawFn) -> dict[str, Any]:
    item = st.one_of(
        st.fixed_dictionaries(
            {"role": ROLE},
            optional={
                "content": st.one_of(TEXT, st.lists(content_part(), max_size=3)),
                "type": st.one_of(st.just("message"), JSON_VALUE),
            },
        ),
        st.fixed_dictionaries(
            {"type": st.just("function_call")}, optional={"name": JSON_VALUE, "arguments": JSON_VALUE}
        ),
        st.fixed_dictionaries({"type": st.just("function_call_output")}, optional={"output": JSON_VALUE}),
        content_part(),
    )
    body: dict[str, Any] = {"model": "auto", "input": draw(st.one_of(TEXT, st.lists(item, max_size=4), JSON_VALUE))}
    if draw(st.booleans()):
        body["instructions"] = draw(st.one_of(TEXT, JSON_SCALAR))
    return body


COMPLETIONS_BODY = st.fixed_dictionaries(
    {
        "prompt": st.one_of(
            TEXT,
            st.lists(st.one_of(TEXT, st.integers(), st.lists(st.integers(), max_size=4), JSON_VALUE), max_size=4),
            JSON_VALUE,
        )
    },
    optional={"model": JSON_SCALAR, "stream": JSON_SCALAR},
)
ANY_BODY = st.one_of(chat_body(), responses_body(), COMPLETIONS_BODY, st.dictionaries(TEXT, JSON_VALUE, max_size=4))


def encode(body: Any, draw_style: int) -> bytes:
    if draw_style == 0:
        return json.dumps(body).encode()  # ASCII with \u escapes (lone surrogates included)
    text = json.dumps(body, ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass" if draw_style == 1 else "replace")


# -- the properties ---------------------------------------------------------------------------


@fuzz_settings(400)
@given(st.binary(max_size=400), st.sampled_from(PATHS))
def test_arbitrary_bytes_never_crash_the_parser(raw: bytes, path: str) -> None:
    error = parse_safely(raw, path)
    assert error is None or error.status in (400, 413, 415, 422)


@fuzz_settings(400)
@given(JSON_VALUE, st.sampled_from(PATHS), st.integers(0, 2))
def test_arbitrary_json_shapes_never_crash_the_parser(value: Any, path: str, style: int) -> None:
    parse_safely(encode(value, style), path)


@fuzz_settings(300)
@given(ANY_BODY, st.sampled_from(PATHS), st.integers(0, 2))
def test_openai_shaped_bodies_with_hostile_parts_never_crash_the_parser(body: Any, path: str, style: int) -> None:
    parse_safely(encode(body, style), path)
    parse_safely(body, path)  # the dict form (admin/CLI edges) too


@fuzz_settings(100)
@given(st.integers(1, 3000), st.sampled_from(["[", '{"a":', '[{"b":[']), st.booleans())
def test_deep_nesting_is_refused_or_parsed_never_recursion(depth: int, opener: str, closed: bool) -> None:
    closers = {"[": "]", '{"a":': "}", '[{"b":[': "]}]"}
    inner = opener * depth + "1" + (closers[opener] * depth if closed else "")
    body = '{"messages":[{"role":"user","content":"hi"}],"extra":' + inner + "}"
    error = parse_safely(body.encode())
    if depth > 64 or not closed:
        assert isinstance(error, MalformedRequest)
        assert error.code == "invalid_json"


@fuzz_settings(250)
@given(mutated_image(), st.sampled_from(["", "image/png", "image/jpeg", "image/gif", "image/webp"]))
def test_mutated_images_only_raise_request_errors_even_when_decoded(data: bytes, mime: str) -> None:
    started = time.perf_counter()
    try:
        image = inspect_image(data, declared_mime=mime, limits=LIMITS, message_index=0)
        assert image.width * image.height <= LIMITS.max_pixels
        assert image.frames <= LIMITS.max_frames
        assert image.mime in ("image/png", "image/jpeg", "image/gif", "image/webp")
        pixels = image.pixels()
        assert pixels.size[0] * pixels.size[1] <= LIMITS.max_pixels
    except RequestError as error:
        check_error(error)
    assert time.perf_counter() - started < EXAMPLE_BUDGET_S


@fuzz_settings(250)
@given(image_url())
def test_data_uris_only_raise_request_errors(url: str) -> None:
    try:
        mime, data = parse_data_uri(url)
        inspect_image(data, declared_mime=mime, limits=LIMITS, message_index=0)
    except RequestError as error:
        check_error(error)


@fuzz_settings(60)
@given(st.binary(min_size=1, max_size=2000).map(lambda b: base64.b64encode(b).decode()), st.integers(0, 4))
def test_base64_whitespace_and_padding_variants(payload: str, variant: int) -> None:
    """Line-wrapped base64 is accepted; url-safe alphabet and broken padding are 400s, not crashes."""
    mutated = [
        payload,
        "\n".join(payload[i : i + 76] for i in range(0, len(payload), 76)),
        payload.rstrip("="),
        payload.replace("+", "-").replace("/", "_"),
        payload + "====",
    ][variant]
    try:
        parse_data_uri("data:image/png;base64," + mutated)
    except RequestError as error:
        check_error(error)
        assert error.status == 400


# -- the Router end to end (default policy, no models) ----------------------------------------


@pytest.fixture(scope="module")
def router() -> Iterator[tuple[Router, asyncio.AbstractEventLoop]]:
    settings_ = Settings.load(None, environ=SUITE_ENVIRON)
    settings_.limits.max_image_bytes = LIMITS.max_bytes
    settings_.limits.max_image_pixels = LIMITS.max_pixels
    settings_.limits.max_image_frames = LIMITS.max_frames
    settings_.limits.max_images = LIMITS.max_images
    routing = Router.from_settings(settings_)
    loop = asyncio.new_event_loop()
    yield routing, loop
    loop.close()
    routing.close()


def check_outcome(routing: Router, outcome: RoutingOutcome) -> None:
    policy_models = {m.name for m in routing.policy.spec.models}
    assert outcome.action in ("route", "reject", "clarify", "error")
    if outcome.action == "route":
        assert outcome.model is not None and outcome.model.name in policy_models
        forwarded = json.loads(outcome.rewritten_body())
        assert forwarded["model"] == outcome.model.target_model
        headers = wire.upstream_headers(outcome)
        assert headers["x-vsr-cluster"] == outcome.model.cluster
    else:
        reply = wire.immediate_response(outcome)
        assert reply.status == outcome.status
        if outcome.action == "error":
            assert outcome.error is not None
            check_error(outcome.error)
            assert outcome.status == outcome.error.status
            json.loads(reply.body)
    for key, value in wire.client_headers(outcome).items():
        assert key.startswith("x-vsr-") and isinstance(value, str)
    outcome.trace_header()
    json.dumps(outcome.to_dict())


def route(fixture: tuple[Router, asyncio.AbstractEventLoop], body: bytes, path: str) -> RoutingOutcome:
    routing, loop = fixture
    started = time.perf_counter()
    outcome = loop.run_until_complete(routing.route(body, path=path))
    assert time.perf_counter() - started < EXAMPLE_BUDGET_S
    check_outcome(routing, outcome)
    return outcome


@fuzz_settings(300)
@given(ANY_BODY, st.sampled_from(PATHS[:3]), st.integers(0, 2))
def test_router_always_returns_a_renderable_outcome(
    router: tuple[Router, asyncio.AbstractEventLoop], body: Any, path: str, style: int
) -> None:
    route(router, encode(body, style), path)


@fuzz_settings(150)
@given(st.binary(max_size=300))
def test_router_on_raw_bytes(router: tuple[Router, asyncio.AbstractEventLoop], raw: bytes) -> None:
    outcome = route(router, raw, "/v1/chat/completions")
    assert outcome.action == "error" or raw.strip().startswith(b"{")


@fuzz_settings(60)
@given(
    st.sampled_from(
        [
            "restricted-vlm",
            "medical-vlm",
            "code-security",
            "Qwen/Qwen2.5-VL-32B-Instruct",
            "google/medgemma-4b-it",
            "nonexistent",
            "general\u0000",
            "GENERAL",
        ]
    ),
    TEXT,
)
def test_a_model_name_the_policy_does_not_allow_never_selects_it(
    router: tuple[Router, asyncio.AbstractEventLoop], model: str, text: str
) -> None:
    """Only `client_models` may be picked by name; anything else is routed by the policy."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hello there " + text}]}).encode()
    outcome = route(router, body, "/v1/chat/completions")
    if outcome.action == "route" and outcome.decision == "general":
        assert outcome.model is not None and outcome.model.name in ("general", "general-vlm")


def test_fuzz_memory_stays_bounded(router: tuple[Router, asyncio.AbstractEventLoop]) -> None:
    """Runs after the properties above: a burst of hostile requests does not grow peak RSS by much."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    bodies = [
        json.dumps(
            gen.chat({"type": "text", "text": "x"}, gen.image_part(gen.data_uri(gen.png_claiming(1999, 1999))))
        ).encode(),
        json.dumps(gen.chat(gen.image_part(gen.data_uri(gen.gif_with_frames(40_000), "image/gif")))).encode(),
        b'{"messages":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"messages":[{"role":"user","content":"' + "é".encode() * 500_000 + b'"}]}',
    ]
    for _ in range(5):
        for body in bodies:
            route(router, body, "/v1/chat/completions")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 150, f"peak RSS grew {grown_mib:.0f} MiB"
