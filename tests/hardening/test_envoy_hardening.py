"""Through the real Envoy: spoofed routing headers, model names the policy does not allow,
path variants, the ext_proc server killed under traffic (failure_mode_allow off and on),
and Envoy's ext_proc message timeout. Built on tests/integration's stack harness."""

from __future__ import annotations

import base64
import dataclasses
import http.client
import json
import signal
import socket
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from extproc.ops.stack import port_open
from tests.hardening import imagegen as gen
from tests.integration.conftest import POLICY, REPO, LoggedStack, running_stack, stack_config

pytestmark = pytest.mark.integration

REQUESTS = REPO / "policies" / "examples" / "requests"
CHAT = "/v1/chat/completions"


def body_of(name: str, **override: Any) -> bytes:
    data = json.loads((REQUESTS / name).read_text())
    data.update(override)
    return json.dumps(data).encode()


PLAIN = body_of("plain_question.json")
PASSPORT = body_of("passport_text.json")
JAILBREAK = body_of("jailbreak.json")


@dataclasses.dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def upstream(self) -> str | None:
        return self.headers.get("x-demo-upstream")


def send_raw(port: int, head: bytes, body: bytes = b"", timeout: float = 30.0) -> Reply:
    """Bytes on the wire exactly as given (header case, repeats, folding, chunking)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head + body)
        response = http.client.HTTPResponse(sock)
        try:
            response.begin()
        except http.client.RemoteDisconnected:  # Envoy's codec dropped the connection: nothing forwarded
            return Reply(0, {}, b"")
        data = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
        return Reply(response.status, headers, data)


def post(port: int, body: bytes, headers: list[tuple[str, str]] = (), path: str = CHAT) -> Reply:  # type: ignore[assignment]
    lines = [f"POST {path} HTTP/1.1", "host: llm", "content-type: application/json", f"content-length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return send_raw(port, ("\r\n".join(lines) + "\r\n\r\n").encode(), body)


@pytest.fixture(scope="module")
def stack() -> Iterator[LoggedStack]:
    with running_stack(stack_config()) as running:
        yield running


# -- spoofing ---------------------------------------------------------------------------------

SPOOFS: dict[str, list[tuple[str, str]]] = {
    "lower": [("x-vsr-cluster", "restricted_vlm")],
    "upper": [("X-VSR-CLUSTER", "medical_vlm")],
    "mixed": [("X-Vsr-Cluster", "code_security")],
    "repeated": [
        ("x-vsr-cluster", "restricted_vlm"),
        ("X-VSR-Cluster", "medical_vlm"),
        ("x-vsr-cluster", "general_vlm"),
    ],
    "fifty copies": [("x-vsr-cluster", "medical_vlm")] * 50,
    "comma list": [("x-vsr-cluster", "medical_vlm, restricted_vlm")],
    "padded": [("x-vsr-cluster", "   medical_vlm   ")],
    "empty": [("x-vsr-cluster", "")],
    "every x-vsr header": [
        ("x-vsr-cluster", "medical_vlm"),
        ("x-vsr-model", "medical-vlm"),
        ("x-vsr-decision", "medical_image"),
        ("x-vsr-signals", "has_image"),
        ("x-vsr-debug", "true"),
    ],
    "underscore name": [("x_vsr_cluster", "medical_vlm")],
    "envoy internal headers": [
        ("x-envoy-original-path", "/v1/models"),
        ("x-envoy-upstream-alt-stat-name", "medical_vlm"),
        ("x-envoy-retry-on", "5xx"),
        ("x-envoy-max-retries", "10"),
    ],
    "host names a cluster": [("x-forwarded-host", "medical_vlm"), ("x-vsr-cluster", "code_security")],
}
EXPECTED = {
    "plain": (PLAIN, 200, "general"),
    "passport": (PASSPORT, 200, "restricted_vlm"),
    "jailbreak": (JAILBREAK, 403, None),
}


@pytest.mark.parametrize("body_name", sorted(EXPECTED))
@pytest.mark.parametrize("spoof", sorted(SPOOFS))
def test_client_headers_never_choose_the_upstream(stack: LoggedStack, spoof: str, body_name: str) -> None:
    body, status, upstream = EXPECTED[body_name]
    reply = post(stack.config.envoy.listener_port, body, SPOOFS[spoof])
    assert (reply.status, reply.upstream) == (status, upstream), reply.body[:300]
    assert "x-vsr-cluster" not in reply.headers


def split_head(extra: bytes, body: bytes, chunked: bool = False) -> bytes:
    framing = b"transfer-encoding: chunked\r\n" if chunked else f"content-length: {len(body)}\r\n".encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: llm\r\ncontent-type: application/json\r\n"
        + framing
        + extra
        + b"\r\n"
    )


def chunked(body: bytes, size: int, trailer: bytes = b"") -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n" + trailer + b"\r\n"


@pytest.mark.parametrize(
    ("name", "extra", "chunk", "trailer"),
    [
        ("obs-fold continuation", b"x-vsr-cluster: general\r\n restricted_vlm\r\n", 0, b""),
        ("space before colon", b"x-vsr-cluster : restricted_vlm\r\n", 0, b""),
        ("tab separated value", b"x-vsr-cluster:\trestricted_vlm\r\n", 0, b""),
        ("NUL in value", b"x-vsr-cluster: restricted_vlm\x00general\r\n", 0, b""),
        ("chunked body in 7-byte pieces", b"x-vsr-cluster: restricted_vlm\r\n", 7, b""),
        ("routing header as a trailer", b"", 16, b"x-vsr-cluster: restricted_vlm\r\n"),
    ],
)
def test_split_and_malformed_routing_headers(
    stack: LoggedStack, name: str, extra: bytes, chunk: int, trailer: bytes
) -> None:
    """Envoy's codec refuses a malformed header (400, or the connection closed: nothing forwarded);
    a well-formed one is stripped."""
    port = stack.config.envoy.listener_port
    wire_body = chunked(PLAIN, chunk, trailer) if chunk else PLAIN
    reply = send_raw(port, split_head(extra, PLAIN, chunked=bool(chunk)), wire_body)
    assert (reply.status, reply.upstream) in ((200, "general"), (400, None), (0, None)), name


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/completions/", "//v1/responses"])
@pytest.mark.parametrize("spoof", ["none", "x-vsr-cluster", "mixed case"])
def test_a_body_less_post_is_refused_never_routed_on_a_header(stack: LoggedStack, path: str, spoof: str) -> None:
    """No body, so Envoy never asks ext_proc (one message per request: the body): the request must
    be refused by Envoy itself, whatever routing header the client sent."""
    extra = {
        "none": b"",
        "x-vsr-cluster": b"x-vsr-cluster: restricted_vlm\r\n",
        "mixed case": b"X-Vsr-Cluster: medical_vlm\r\nx-vsr-decision: identity_document\r\n",
    }[spoof]
    head = f"POST {path} HTTP/1.1\r\nhost: llm\r\ncontent-length: 0\r\n".encode() + extra + b"\r\n"
    reply = send_raw(stack.config.envoy.listener_port, head)
    assert (reply.status, reply.upstream) == (400, None), reply.body[:300]
    assert json.loads(reply.body)["error"]["code"] == "body_required"


MODEL_NAMES: dict[str, str | None] = {
    # model field -> the cluster the plain question must reach (None: 404 model_not_found, the
    # default policy's `unknown_models: reject`, so an unknown name reaches no upstream at all)
    "restricted-vlm": "general",
    "medical-vlm": "general",
    "code-security": "general",
    "Qwen/Qwen2.5-VL-32B-Instruct": "general",  # code-security's upstream id
    "google/medgemma-4b-it": "general",
    "no-such-model": None,
    "RESTRICTED-VLM": None,  # names are exact, as vLLM's are
    "restricted_vlm": None,  # a cluster name, not a model
    "general-vlm": "general_vlm",  # in client_models: the client may pick it when no rule fires
    "auto": "general",
}


@pytest.mark.parametrize("model", sorted(MODEL_NAMES))
def test_a_model_name_the_policy_does_not_allow_cannot_pick_the_upstream(
    stack: LoggedStack, policy_models: dict[str, dict[str, str]], model: str
) -> None:
    reply = post(stack.config.envoy.listener_port, body_of("plain_question.json", model=model))
    if MODEL_NAMES[model] is None:
        assert (reply.status, reply.upstream) == (404, None), reply.body[:300]
        assert json.loads(reply.body)["error"]["code"] == "model_not_found"
        return
    assert reply.status == 200
    assert reply.upstream == MODEL_NAMES[model]
    chosen = next(m for m in policy_models.values() if m["cluster"] == MODEL_NAMES[model])
    assert reply.headers["x-demo-model"] == chosen.get("upstream_model", chosen["name"])


def test_a_client_model_never_overrides_a_policy_decision(stack: LoggedStack) -> None:
    """general-vlm is client-selectable, but a passport still goes to the restricted model."""
    reply = post(stack.config.envoy.listener_port, body_of("passport_text.json", model="general-vlm"))
    assert (reply.status, reply.upstream) == (200, "restricted_vlm")


def test_duplicate_model_keys_are_collapsed_by_the_rewrite(stack: LoggedStack) -> None:
    """`{"model": "auto", ..., "model": "restricted-vlm"}`: whatever a parser downstream picks,
    the upstream sees the single model the policy chose, because the body is re-serialised."""
    text = PLAIN.decode()
    body = ('{"model":"Qwen/Qwen2.5-VL-7B-Instruct",' + text[1:-1] + ',"model":"restricted-vlm"}').encode()
    reply = post(stack.config.envoy.listener_port, body)
    assert (reply.status, reply.upstream) == (200, "general")
    assert reply.headers["x-demo-model"] == "Qwen/Qwen3-8B"


@pytest.fixture(scope="module")
def policy_models() -> dict[str, dict[str, str]]:
    import yaml

    data = yaml.safe_load(POLICY.read_text())
    return {m["name"]: m for m in data["models"]}


@pytest.mark.parametrize("path", ["/v1/chat/completions/", "//v1/chat/completions", "/v1/chat%2Fcompletions"])
def test_path_variants_of_an_inference_path_are_classified(stack: LoggedStack, path: str) -> None:
    reply = post(stack.config.envoy.listener_port, JAILBREAK, path=path)
    assert reply.upstream is None or reply.headers.get("x-vsr-decision") is not None
    assert reply.status == 403


def test_query_string_and_case_do_not_bypass(stack: LoggedStack) -> None:
    port = stack.config.envoy.listener_port
    assert post(port, JAILBREAK, path=CHAT + "?stream=false").status == 403
    upper = post(port, JAILBREAK, path="/V1/CHAT/COMPLETIONS")  # not an inference path anywhere: the upstream 404s
    assert upper.status == 404


# -- the ext_proc server killed under traffic ---------------------------------------------------


class Traffic:
    """A bounded background load: plain, jailbreak and spoofed requests in a loop (max 3000 or 40 s)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.replies: list[tuple[float, str, Reply | None]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        kinds = [
            ("plain", PLAIN, []),
            ("jailbreak", JAILBREAK, []),
            ("spoofed", PLAIN, [("x-vsr-cluster", "restricted_vlm")]),
        ]
        deadline = time.monotonic() + 40
        i = 0
        while not self.stop.is_set() and i < 3000 and time.monotonic() < deadline:
            name, body, headers = kinds[i % len(kinds)]
            i += 1
            try:
                reply: Reply | None = post(self.port, body, headers, path=CHAT)
            except OSError:
                reply = None
            self.replies.append((time.monotonic(), name, reply))
            time.sleep(0.005)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def kill_and_restart_under_traffic(allow: bool) -> tuple[list[tuple[float, str, Reply | None]], float, float, float]:
    config = stack_config()
    config.envoy = dataclasses.replace(config.envoy, failure_mode_allow=allow)
    stack = LoggedStack(config)
    stack.start()
    try:
        with Traffic(config.envoy.listener_port) as traffic:
            time.sleep(1.0)
            killed_at = time.monotonic()
            stack.stop_process("extproc", signal.SIGKILL)
            time.sleep(1.5)
            restarting_at = time.monotonic()
            stack.start_server()
            restarted_at = time.monotonic()
            time.sleep(1.0)
            recover_by = time.monotonic() + 15  # Envoy reconnects and health-checks the new server
            while time.monotonic() < recover_by and not recovered(traffic.replies[-10:]):
                time.sleep(0.2)
            time.sleep(0.5)
        return traffic.replies, killed_at, restarting_at, restarted_at
    except Exception:
        print("\n".join(stack.lines[-60:]))
        raise
    finally:
        stack.stop()
        assert not port_open("127.0.0.1", config.envoy.listener_port)


def recovered(tail: list[tuple[float, str, Reply | None]]) -> bool:
    return len(tail) == 10 and all(r is not None and r.status in (200, 403) for _, _, r in tail)


def summary(replies: list[tuple[float, str, Reply | None]]) -> Counter[str]:
    return Counter(f"{name}:{r.status if r else 'conn'}:{r.upstream if r else '-'}" for _, name, r in replies)


def test_server_killed_under_traffic_fails_closed_with_failure_mode_allow_off() -> None:
    """failure_mode_allow: false (the default): while the server is gone every request gets 503
    and reaches no upstream; before and after, every request is classified and routed right.
    Never: an unclassified request at an upstream, a jailbreak at an upstream, a spoof obeyed."""
    replies, killed_at, restarting_at, restarted_at = kill_and_restart_under_traffic(allow=False)
    print(summary(replies))
    allowed = {
        "plain": {(200, "general"), (503, None)},
        "jailbreak": {(403, None), (503, None)},
        "spoofed": {(200, "general"), (503, None)},
    }
    for _, name, reply in replies:
        assert reply is not None, "transport failure"
        assert (reply.status, reply.upstream) in allowed[name], (name, reply.status, reply.upstream)
        if reply.upstream is not None:
            assert reply.headers.get("x-vsr-decision")
    outage = [r for t, _, r in replies if killed_at + 0.2 < t < restarting_at and r]
    assert outage and all(r.status == 503 for r in outage)
    first_ok = next(t for t, _, r in replies if t > restarted_at and r and r.status in (200, 403))
    print(f"first classified answer {first_ok - restarted_at:.2f}s after the new server reported SERVING")
    assert recovered(replies[-10:])


def test_server_killed_under_traffic_with_failure_mode_allow_on_fails_open() -> None:
    """failure_mode_allow: true trades safety for availability, and this test pins what that
    means: while the server is gone, requests go unclassified to the default route (a jailbreak
    reaches an upstream); a client-sent x-vsr-cluster is still not obeyed (Envoy strips it before
    ext_proc, and routes match only the server's decision metadata). Before and after, all is
    classified."""
    replies, killed_at, restarting_at, restarted_at = kill_and_restart_under_traffic(allow=True)
    print(summary(replies))
    down = [(name, r) for t, name, r in replies if killed_at + 0.2 < t < restarting_at]
    assert down
    for _name, reply in down:  # no server at all: Envoy lets everything through, unclassified
        assert reply is not None and reply.status == 200
        assert reply.headers.get("x-vsr-decision") is None
        assert reply.upstream == "general"
    for t, name, reply in replies:
        assert reply is not None
        if restarting_at <= t <= restarted_at and reply.status == 503:
            # The new process is up but still loading its policy: it answers 503 not_ready
            # itself, so failure_mode_allow does not apply to that short window.
            assert json.loads(reply.body)["error"]["code"] == "not_ready"
        elif t > restarted_at:
            assert reply.status in (200, 403)
            if name == "spoofed":
                assert reply.upstream == "general"


# -- Envoy's ext_proc message timeout ----------------------------------------------------------


def wait_until_idle(admin_port: int, timeout_s: float = 60.0) -> None:
    """Until the ext_proc server reports no stream in flight (its /healthz `in_flight`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/healthz", timeout=2) as reply:
            if json.loads(reply.read())["in_flight"] == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the server still had streams in flight after {timeout_s} s")


@pytest.mark.parametrize("allow", [False, True])
def test_message_timeout(allow: bool) -> None:
    """With a 20 ms message timeout, a 9 MB image body takes the server longer than Envoy waits.
    failure_mode_allow off: Envoy answers 504 and forwards nothing. On: the body goes on
    unclassified to the default route (client routing headers were already stripped at the
    headers phase, so the spoof is not obeyed). Small text requests still route normally."""
    config = stack_config()
    config.envoy = dataclasses.replace(
        config.envoy, failure_mode_allow=allow, message_timeout_s=0.02, allow_short_message_timeout=True
    )
    stack = LoggedStack(config)
    stack.start()
    try:
        port = config.envoy.listener_port
        image = gen.saved(_noise(1800), "PNG", compress_level=0)
        big = json.dumps(
            gen.chat({"type": "text", "text": "what is this?"}, gen.image_part(gen.data_uri(image)))
        ).encode()
        assert len(big) > 9_000_000
        reply = post(port, big, [("x-vsr-cluster", "restricted_vlm")])
        if allow:
            assert (reply.status, reply.upstream) == (200, "general")
            assert reply.headers.get("x-vsr-decision") is None
        else:
            assert (reply.status, reply.upstream) == (504, None)
        # Envoy gave up on the big body, but the server may still be decoding it; a small
        # request sent meanwhile would wait behind that work past the 20 ms budget.
        wait_until_idle(int(config.env["VSR_SERVER__ADMIN_PORT"]))
        # 20 ms is tight for a shared 2-core CI machine even for small text (one encoder pass is
        # 6-18 ms there): a scheduling stall may cost a few tries, so up to eight are sent until
        # one routes; a path that is broken fails all eight.
        small = []
        for _ in range(8):
            small.append(post(port, PLAIN))
            if (small[-1].status, small[-1].upstream) == (200, "general"):
                break
        assert (200, "general") in [(r.status, r.upstream) for r in small]
        assert all(r.status in (200, 504) for r in small)
        assert stack.failed() is None
    except Exception:
        print("\n".join(stack.lines[-40:]))
        raise
    finally:
        stack.stop()


def _noise(side: int) -> Any:
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.random.default_rng(5).integers(0, 256, (side, side, 3), dtype=np.uint8))


def test_base64_image_requests_are_refused_by_our_limits_through_envoy(stack: LoggedStack) -> None:
    """A hostile image through the whole path: 413 / 415 / 422 OpenAI errors from us, no upstream."""
    port = stack.config.envoy.listener_port
    cases = [
        (gen.png_claiming(100_000, 100_000), 413),
        (gen.gif_with_frames(400_000), 413),
        (gen.jpeg_with_scans(5000), 413),
        (b"<svg/>", 415),
        (gen.small("PNG", (64, 64))[:-30], 422),  # header fine, pixels truncated: found when OCR decodes them
    ]
    for data, status in cases:
        body = json.dumps(gen.chat({"type": "text", "text": "hi"}, gen.image_part(gen.data_uri(data)))).encode()
        started = time.perf_counter()
        reply = post(port, body)
        assert reply.status == status, reply.body[:200]
        assert time.perf_counter() - started < 5
        assert reply.upstream is None
        assert set(json.loads(reply.body)["error"]) >= {"message", "type", "code"}
    bad_b64 = json.dumps(
        gen.chat(gen.image_part("data:image/png;base64," + base64.b64encode(b"x").decode() + "!!"))
    ).encode()
    assert post(port, bad_b64).status == 400
