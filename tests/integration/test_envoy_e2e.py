"""End to end through a real Envoy: routing, rewriting, rejects, spoofing, images, streaming,
errors, and what Envoy does when the ext_proc server is gone (fail closed: 503)."""

from __future__ import annotations

import base64
import http.client
import io
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.integration.conftest import REPO, LoggedStack, running_stack, stack_config

pytestmark = pytest.mark.integration

REQUESTS = REPO / "policies" / "examples" / "requests"

# (request file, API path, decision, model) for the default policy's scenarios.
SCENARIOS = [
    ("plain_question.json", "/v1/chat/completions", "general", "general"),
    ("passport_text.json", "/v1/chat/completions", "identity_document", "restricted-vlm"),
    ("code_secret.json", "/v1/chat/completions", "code_security_review", "code-security"),
    ("responses_api.json", "/v1/responses", "general", "general"),
    ("completions_legacy.json", "/v1/completions", "general", "general"),
    ("xray_image.json", "/v1/chat/completions", "medical_image", "medical-vlm"),
    ("describe_image.json", "/v1/chat/completions", "general", "general-vlm"),
    # the seed scenarios decided by what the image says (OCR): the MRZ, the leaked key
    ("passport_image.json", "/v1/chat/completions", "identity_document", "restricted-vlm"),
    ("code_screenshot.json", "/v1/chat/completions", "code_security_review", "code-security"),
]

# A policy whose out-of-domain rule needs no vision model, for the clarification path itself.
CLARIFY_POLICY = """
version: 1
models:
  - {name: general, cluster: general, modalities: [text], address: "127.0.0.1:8004"}
  - {name: general-vlm, cluster: general_vlm, modalities: [text, image], address: "127.0.0.1:8005"}
signals:
  - {name: has_image, type: modality}
  - {name: medical_question, type: keyword, keywords: [diagnosis, pain]}
decisions:
  - name: out_of_domain_image
    priority: 10
    when: {all: [{signal: has_image}, {signal: medical_question}]}
    action: {type: clarify, message: "Could you share the relevant scan instead?"}
default: {name: general, action: {type: route, models: [general, general-vlm]}}
"""


@pytest.fixture(scope="module")
def clarify_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoggedStack]:
    policy = tmp_path_factory.mktemp("clarify") / "clarify.yaml"
    policy.write_text(CLARIFY_POLICY)
    with running_stack(stack_config(policy=policy)) as running:
        yield running


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REQUESTS / name).read_text())
    return data


def client(stack: LoggedStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.base_url + "/v1", api_key="unused", max_retries=0, timeout=30)


@pytest.mark.parametrize(("name", "path", "decision", "model"), SCENARIOS)
def test_scenario_reaches_its_cluster_with_model_rewritten(
    stack: LoggedStack, policy_models: dict[str, dict[str, str]], name: str, path: str, decision: str, model: str
) -> None:
    reply = httpx.post(stack.base_url + path, json=load(name), timeout=30)
    assert reply.status_code == 200, reply.text
    spec = policy_models[model]
    assert reply.headers["x-vsr-decision"] == decision
    assert reply.headers["x-vsr-model"] == model
    assert reply.headers["x-demo-upstream"] == spec["cluster"]
    assert reply.headers["x-demo-model"] == spec.get("upstream_model", model)  # the body's model, rewritten
    assert reply.json()["model"] == spec.get("upstream_model", model)
    assert "x-vsr-cluster" not in reply.headers
    assert reply.headers["x-vsr-signals"]


def test_openai_client_chat(stack: LoggedStack, policy_models: dict[str, dict[str, str]]) -> None:
    body = load("code_secret.json")
    raw = client(stack).chat.completions.with_raw_response.create(model="auto", messages=body["messages"])
    completion = raw.parse()
    assert raw.headers["x-vsr-decision"] == "code_security_review"
    assert completion.model == policy_models["code-security"]["upstream_model"]
    assert "cluster=code_security" in (completion.choices[0].message.content or "")


def test_jailbreak_is_refused_with_openai_error(stack: LoggedStack) -> None:
    body = load("jailbreak.json")
    with pytest.raises(openai.PermissionDeniedError) as caught:
        client(stack).chat.completions.create(model="auto", messages=body["messages"])
    error = caught.value
    assert error.status_code == 403
    assert error.response.headers["x-vsr-decision"] == "jailbreak_block"
    payload = error.response.json()
    assert set(payload["error"]) >= {"message", "type", "code"}
    assert "x-demo-upstream" not in error.response.headers  # no upstream saw it


def test_without_a_vision_model_out_of_domain_stays_undecided(stack: LoggedStack) -> None:
    """Default policy, no vision model: "not a medical image" is unknown, so no clarification
    fires on its account; the request goes to the default's image-capable model."""
    reply = httpx.post(
        stack.base_url + "/v1/chat/completions",
        json=load("car_medical_question.json"),
        headers={"x-vsr-debug": "true"},
        timeout=30,
    )
    assert reply.status_code == 200, reply.text[:300]
    assert (reply.headers["x-vsr-decision"], reply.headers["x-demo-upstream"]) == ("general", "general_vlm")
    assert "out_of_domain_image=u" in reply.headers["x-vsr-trace"]
    assert "image_kind=unavailable" in reply.headers["x-vsr-trace"]


def test_out_of_domain_image_gets_a_clarifying_completion(clarify_stack: LoggedStack) -> None:
    reply = httpx.post(
        clarify_stack.base_url + "/v1/chat/completions", json=load("car_medical_question.json"), timeout=30
    )
    assert reply.status_code == 200
    assert reply.headers["x-vsr-decision"] == "out_of_domain_image"
    assert "x-demo-upstream" not in reply.headers
    assert reply.json()["choices"][0]["message"]["content"]


def raw_post(stack: LoggedStack, path: str, body: bytes, headers: list[tuple[str, str]]) -> http.client.HTTPResponse:
    """http.client, so header case and repeats go on the wire exactly as written."""
    conn = http.client.HTTPConnection("127.0.0.1", stack.config.envoy.listener_port, timeout=30)
    conn.putrequest("POST" if body else "GET", path)
    for key, value in [("content-type", "application/json"), ("content-length", str(len(body))), *headers]:
        conn.putheader(key, value)
    conn.endheaders(body)
    reply = conn.getresponse()
    reply.read_body = reply.read()  # type: ignore[attr-defined]
    conn.close()
    return reply


@pytest.mark.parametrize(
    "spoof",
    [
        [("x-vsr-cluster", "restricted_vlm")],
        [("X-VSR-CLUSTER", "restricted_vlm"), ("x-vsr-cluster", "code_security"), ("X-Vsr-Cluster", "medical_vlm")],
        [("x-vsr-cluster", "general,restricted_vlm"), ("x-vsr-decision", "identity_document")],
    ],
)
def test_client_cannot_choose_the_upstream(stack: LoggedStack, spoof: list[tuple[str, str]]) -> None:
    body = json.dumps(load("plain_question.json")).encode()
    reply = raw_post(stack, "/v1/chat/completions", body, spoof)
    assert reply.status == 200
    assert reply.getheader("x-demo-upstream") == "general"
    assert reply.getheader("x-vsr-decision") == "general"
    # on a path we do not route too: the fallback cluster, never the spoofed one (/v1/models is
    # answered by the router itself now; /v1/embeddings passes through)
    other = raw_post(stack, "/health", b"", spoof)
    assert other.getheader("x-demo-upstream") == "general"


def png_noise(side: int) -> bytes:
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(7).integers(0, 256, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def describe_picture(png: bytes) -> dict[str, Any]:
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    return {
        "model": "auto",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Describe this picture."},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            }
        ],
    }


def test_five_megabyte_image_passes(stack: LoggedStack) -> None:
    image = png_noise(1340)
    assert len(image) >= 5 * 1024 * 1024
    reply = httpx.post(stack.base_url + "/v1/chat/completions", json=describe_picture(image), timeout=60)
    assert reply.status_code == 200, reply.text[:500]
    assert reply.headers["x-demo-upstream"] == "general_vlm"


def test_malformed_json_gets_our_400(stack: LoggedStack) -> None:
    reply = raw_post(stack, "/v1/chat/completions", b'{"model": "auto", "messages": [', [])
    assert reply.status == 400
    payload = json.loads(reply.read_body)  # type: ignore[attr-defined]
    assert payload["error"]["type"] == "invalid_request_error"
    assert reply.getheader("x-vsr-decision") is not None


def test_debug_trace_header(stack: LoggedStack) -> None:
    reply = httpx.post(
        stack.base_url + "/v1/chat/completions", json=load("code_secret.json"), headers={"x-vsr-debug": "true"}
    )
    assert reply.status_code == 200
    assert "code_security_review" in reply.headers["x-vsr-trace"]


def test_streaming_completion_streams_through(stack: LoggedStack) -> None:
    body = load("plain_question.json")
    started = time.perf_counter()
    arrivals: list[float] = []
    text = []
    with client(stack).chat.completions.create(model="auto", messages=body["messages"], stream=True) as stream:
        for chunk in stream:
            arrivals.append(time.perf_counter() - started)
            if chunk.choices and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
    assert len(arrivals) > 5
    assert "cluster=general" in "".join(text)
    # chunks arrive as the upstream sends them (30 ms apart), not all at the end
    assert arrivals[0] < arrivals[-1] - 0.1


def test_server_killed_fails_closed_then_recovers(tmp_path: Path) -> None:
    """Documented behaviour (envoy/envoy.yaml, failure_mode_allow: false): with the ext_proc
    server gone Envoy answers 503 to every inference request and forwards none of them; other
    paths (model lists) never go through ext_proc and keep working, client x-vsr-* headers still
    stripped by Envoy; when a server is back, inference requests flow again."""
    stack = LoggedStack(stack_config())
    stack.start()
    try:
        body = load("plain_question.json")
        assert httpx.post(stack.base_url + "/v1/chat/completions", json=body).status_code == 200
        stack.stop_process("extproc", signal.SIGKILL)
        reply = httpx.post(stack.base_url + "/v1/chat/completions", json=body, timeout=30)
        assert reply.status_code == 503
        assert "x-demo-upstream" not in reply.headers
        # A path the router does not decide (not /v1/models: the router answers that one) still passes.
        other = httpx.get(stack.base_url + "/health", headers={"x-vsr-cluster": "restricted_vlm"}, timeout=30)
        assert other.status_code == 200 and other.headers["x-demo-upstream"] == "general"
        stack.start_server()
        deadline = time.monotonic() + 20
        while True:
            reply = httpx.post(stack.base_url + "/v1/chat/completions", json=body, timeout=30)
            if reply.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert reply.status_code == 200
        assert reply.headers["x-demo-upstream"] == "general"
    except Exception:
        print("\n".join(stack.lines[-60:]))
        raise
    finally:
        stack.stop()


def test_fifteen_megabyte_image_is_routed_with_its_body_rewritten(stack: LoggedStack) -> None:
    """Near the 16 MB image limit: ~20 MB of JSON through Envoy's buffer, both gRPC messages
    and the rewritten body to the upstream."""
    image = png_noise(2300)
    assert len(image) >= 15 * 1024 * 1024
    reply = httpx.post(stack.base_url + "/v1/chat/completions", json=describe_picture(image), timeout=60)
    assert reply.status_code == 200, reply.text[:500]
    assert reply.headers["x-demo-upstream"] == "general_vlm"
    assert reply.json()["model"] == "Qwen/Qwen2.5-VL-7B-Instruct"


def test_streaming_clarification_is_sse(clarify_stack: LoggedStack) -> None:
    body = load("car_medical_question.json")
    chunks = list(client(clarify_stack).chat.completions.create(model="auto", messages=body["messages"], stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text  # a clarifying question, streamed as chat.completion.chunk events
    assert chunks[-1].choices[0].finish_reason == "stop"
