"""What a request is cached under: partitions, contexts, exact keys."""

from __future__ import annotations

import base64
import io
from typing import Any

from PIL import Image

from extproc.cache.keys import SHARED_PARTITION, cache_key, normalise, tenant_partition
from extproc.protocol.openai import parse_request


def chat(*turns: tuple[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": r, "content": c} for r, c in turns], **extra}


def key_of(body: dict[str, Any], model: str = "m", partition: str = "tA", path: str = "/v1/chat/completions") -> Any:
    return cache_key(parse_request(body, path=path), model, partition)


def png(color: tuple[int, int, int]) -> str:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def test_partition_is_a_hash_of_the_tenant_headers_and_none_without_them() -> None:
    alice = tenant_partition({"authorization": "Bearer alice"}, shared=False)
    assert alice is not None and "alice" not in alice
    assert alice == tenant_partition({"authorization": "Bearer alice"}, shared=False)
    assert alice != tenant_partition({"authorization": "Bearer bob"}, shared=False)
    assert tenant_partition({}, shared=False) is None
    assert tenant_partition({"authorization": ""}, shared=False) is None
    assert tenant_partition({}, shared=True) == SHARED_PARTITION


def test_the_exact_key_ignores_case_and_spacing_of_the_last_turn_only() -> None:
    a = key_of(chat(("user", "What is the  capital of France?")))
    b = key_of(chat(("user", "what is the capital of france?")))
    assert a.exact == b.exact and a.context == b.context
    assert a.query == "What is the  capital of France?"  # embedded as sent
    assert normalise(" A\u00a0B\n") == "a b"


def test_everything_but_the_last_turn_is_context() -> None:
    base = key_of(chat(("system", "Be brief."), ("user", "hi")))
    assert key_of(chat(("system", "Be verbose."), ("user", "hi"))).context != base.context
    assert key_of(chat(("user", "hi"))).context != base.context
    history = key_of(chat(("system", "Be brief."), ("user", "a"), ("assistant", "b"), ("user", "hi")))
    assert history.context != base.context and history.query == "hi"
    assert key_of(chat(("system", "Be brief."), ("user", "hi")), model="other").context != base.context
    assert key_of(chat(("system", "Be brief."), ("user", "hi")), partition="tB").context != base.context
    shaped = key_of(chat(("system", "Be brief."), ("user", "hi"), response_format={"type": "json_object"}))
    assert shaped.context != base.context
    # sampling noise does not split the cache
    assert key_of(chat(("system", "Be brief."), ("user", "hi"), temperature=0.2)).context == base.context


def test_images_take_part_by_content_hash() -> None:
    def with_image(uri: str) -> dict[str, Any]:
        return chat(("user", [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": uri}}]))

    red, blue = key_of(with_image(png((255, 0, 0)))), key_of(with_image(png((0, 0, 255))))
    assert red.context != blue.context
    assert red.exact == key_of(with_image(png((255, 0, 0)))).exact
    assert key_of(chat(("user", "what is this?"))).context != red.context


def test_uncacheable_requests_have_no_key() -> None:
    remote = chat(("user", [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]))
    assert key_of(remote) is None
    assert key_of(chat(("system", "only a system prompt"))) is None
    assert key_of(chat(("user", "   "))) is None


def test_other_apis_have_keys_too() -> None:
    completions = key_of({"model": "auto", "prompt": "Say hi"}, path="/v1/completions")
    responses = key_of({"model": "auto", "input": "Say hi"}, path="/v1/responses")
    assert completions is not None and responses is not None
    assert completions.context != responses.context


def test_numbers_in_the_last_turn_split_the_context() -> None:
    five = key_of(chat(("user", "Convert 5 km to miles")))
    fifty = key_of(chat(("user", "Convert 50 km to miles")))
    assert five.context != fifty.context
    assert five.context == key_of(chat(("user", "How many miles are 5 km?"))).context


def test_guards_catch_what_embeddings_miss_and_let_paraphrases_through() -> None:
    from extproc.cache.keys import numbers_of, semantically_compatible

    different = [
        ("Convert 5 km to miles.", "Convert 5 miles to km."),  # direction
        ("Translate 'good morning' from English to French.", "Translate 'good morning' from French to English."),
        ("What is the capital of France?", "What is the capital of Germany?"),  # names
        ("Is coffee good for your health?", "Is coffee bad for your health?"),  # opposites
        ("Should I take ibuprofen?", "Should I not take ibuprofen?"),  # negation
        ("How do I turn on dark mode?", "How do I turn off dark mode?"),
    ]
    for a, b in different:
        assert not semantically_compatible(a, b), (a, b)
        assert not semantically_compatible(b, a), (b, a)
    same = [
        ("What is the capital of France?", "what's france's capital city"),
        ("How do I sort a list in Python?", "In Python, how do I sort a list?"),
        ("Write a haiku about autumn.", "Compose a haiku on the theme of autumn."),  # sentence-initial capitals
        ("Paris travel tips", "Tips for travelling to Paris"),
    ]
    for a, b in same:
        assert semantically_compatible(a, b), (a, b)
    assert numbers_of("Round pi to two places") != numbers_of("Round pi to four places")
    assert numbers_of("Give me 3 ideas") == ["3"]


def test_a_follow_up_whose_earlier_turns_live_on_the_server_is_not_cached() -> None:
    from extproc.protocol.openai import parse_request

    plain = parse_request(b'{"model":"auto","input":"And then?"}', path="/v1/responses")
    follow_up = parse_request(
        b'{"model":"auto","input":"And then?","previous_response_id":"resp_1"}', path="/v1/responses"
    )
    assert cache_key(plain, "m", "p") is not None
    assert cache_key(follow_up, "m", "p") is None
