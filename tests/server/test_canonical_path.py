from __future__ import annotations

import pytest

from extproc.server.request_phase import canonical_path


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/v1/chat/completions", "/v1/chat/completions"),
        ("/v1/chat/completions/", "/v1/chat/completions"),
        ("//v1/chat/completions", "/v1/chat/completions"),
        ("/v1//chat///completions", "/v1/chat/completions"),
        ("/v1/chat%2Fcompletions", "/v1/chat/completions"),
        ("/v1/chat%2fcompletions", "/v1/chat/completions"),
        ("/v1/./chat/../chat/completions", "/v1/chat/completions"),
        ("/v1/chat/completions?stream=true", "/v1/chat/completions"),
        ("/v1/chat/completions#frag", "/v1/chat/completions"),
        ("/../../v1/responses", "/v1/responses"),
        ("", "/"),
        ("/", "/"),
        ("/v1/models", "/v1/models"),
    ],
)
def test_inference_path_variants_are_canonicalised(raw: str, expected: str) -> None:
    assert canonical_path(raw) == expected
