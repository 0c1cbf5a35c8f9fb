"""Regression tests for core bugs found by the hardening work (issue 7), one per fix."""

from __future__ import annotations

import pytest

from extproc.errors import MalformedRequest
from extproc.protocol.openai import parse_request
from tests.suite_env import SUITE_ENVIRON


def test_huge_integer_literal_is_400_not_a_crash() -> None:
    """json.loads raises a plain ValueError past Python's 4300-digit int limit."""
    body = b'{"messages":[{"role":"user","content":"hi"}],"seed":' + b"7" * 5000 + b"}"
    with pytest.raises(MalformedRequest) as caught:
        parse_request(body)
    assert caught.value.status == 400
    assert caught.value.code == "invalid_json"


@pytest.mark.parametrize("kind", [[1], {"a": 1}, 3, None, True])
def test_responses_item_with_non_string_type_is_400(kind: object) -> None:
    """A list or object `type` used to reach a frozenset lookup: TypeError (unhashable)."""
    with pytest.raises(MalformedRequest) as caught:
        parse_request({"input": [{"type": kind}]}, path="/v1/responses")
    assert caught.value.status == 400


@pytest.mark.parametrize("text", ["\\ud800 hello", "\\udfff\\ud800 what", "ok \\ud83d\\ude00 emoji pair"])
async def test_lone_surrogates_survive_the_body_rewrite(text: str) -> None:
    """JSON allows `\\ud800`; UTF-8 does not. The rewritten body used to raise UnicodeEncodeError
    (an uncaught error in the servicer); now it forwards the text escaped, as the client sent it."""
    import json

    from extproc.router import Router
    from extproc.settings import Settings

    router = Router.from_settings(Settings.load(None, environ=SUITE_ENVIRON))
    try:
        body = ('{"model":"auto","messages":[{"role":"user","content":"' + text + '"}]}').encode()
        outcome = await router.route(body)
        assert outcome.action == "route"
        forwarded = json.loads(outcome.rewritten_body())
        assert forwarded["messages"][-1]["content"] == json.loads(body)["messages"][0]["content"]
    finally:
        router.close()


def test_mpo_jpeg_from_a_phone_is_a_jpeg_not_a_crash() -> None:
    """Pillow reports a JPEG with a multi-picture header as "MPO"; the MIME lookup raised KeyError."""
    import io

    from PIL import Image

    from extproc.images import ImageLimits, inspect_image

    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, "MPO", save_all=True, append_images=[Image.new("RGB", (8, 8), (9, 9, 9))])
    image = inspect_image(out.getvalue(), declared_mime="image/jpeg", limits=ImageLimits(), message_index=0)
    assert (image.format, image.mime, image.frames) == ("JPEG", "image/jpeg", 2)
    assert image.pixels().size == (8, 8)
