"""Unclassified requests (embeddings, audio): the model a body names, read without trusting it."""

from __future__ import annotations

import json

from extproc.policy.schema import Policy
from extproc.server.passthrough import answer, requested_model

POLICY = Policy.model_validate(
    {
        "models": [{"name": "embed", "cluster": "ce", "upstream_model": "BAAI/bge-m3"}],
        "default": {"action": {"type": "route", "models": ["embed"]}},
    }
)


def test_the_model_is_read_from_json_or_a_multipart_form_and_bad_bodies_name_none() -> None:
    assert requested_model(b'{"model": "embed", "input": "x"}')[0] == "embed"
    form = b'--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper\r\n--b--\r\n'
    assert requested_model(form) == ("whisper", None)
    for bad in (b"", b"{not json", b'["model"]', b'{"model": 3}', b"\x00\xff" * 10):
        assert requested_model(bad)[0] is None


def test_a_known_model_is_routed_with_its_upstream_id_and_an_unknown_one_is_404() -> None:
    routed = answer(POLICY, b'{"model": "embed", "input": "x"}')
    assert json.loads(routed.request_body.response.body_mutation.body)["model"] == "BAAI/bge-m3"
    assert routed.dynamic_metadata.fields["vsr"].struct_value.fields["cluster"].string_value == "ce"
    refused = answer(POLICY, b'{"model": "nope"}')
    assert refused.immediate_response.status.code == 404
    assert json.loads(refused.immediate_response.body)["error"]["code"] == "model_not_found"
    lenient = answer(POLICY.model_copy(update={"unknown_models": "auto"}), b'{"model": "nope"}')
    assert lenient.HasField("request_body") and not lenient.request_body.response.HasField("body_mutation")
