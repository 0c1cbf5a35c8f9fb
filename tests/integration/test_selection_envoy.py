"""Model selection through the real Envoy, with stand-in vLLM servers that can be slow, loaded or
failing (`extproc.testing.fleet_upstream`): latency shifts traffic, load shifts traffic, cooldown
and recovery, failover without a client error, weighted shares, capability still respected, and
`extproc stack --upstream` serving stand-ins beside demo upstreams. Every loop is bounded."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from extproc.ops.envoy_config import EnvoyOptions
from extproc.ops.stack import StackConfig, free_port
from extproc.testing.fleet_upstream import StandIn, StandIns
from tests.integration.conftest import LoggedStack, fleet_stack_config, running_stack

POLICY = """
version: 1
models:
  - {{name: model-a, cluster: ca, address: "127.0.0.1:{a}", metrics_url: "http://127.0.0.1:{a}/metrics"}}
  - {{name: model-b, cluster: cb, address: "127.0.0.1:{b}", metrics_url: "http://127.0.0.1:{b}/metrics"}}
  - {{name: vlm-c, cluster: cc, address: "127.0.0.1:{c}", modalities: [text, image]}}
signals:
  - {{name: wants_failover, type: keyword, keywords: [failover]}}
  - {{name: wants_load, type: keyword, keywords: [loadtest]}}
  - {{name: wants_canary, type: keyword, keywords: [canary]}}
decisions:
  - name: resilient
    priority: 30
    when: {{signal: wants_failover}}
    action: {{type: route, models: [model-a, model-b], selection: {{algorithm: ordered, failover: true}}}}
  - name: by_load
    priority: 20
    when: {{signal: wants_load}}
    action: {{type: route, models: [model-a, model-b], selection: least_loaded}}
  - name: canary
    priority: 10
    when: {{signal: wants_canary}}
    action:
      type: route
      models: [model-a, model-b]
      selection: {{algorithm: weighted, weights: {{model-a: 80, model-b: 20}}}}
default:
  action: {{type: route, models: [model-a, model-b, vlm-c], selection: {{algorithm: latency, explore: 0}}}}
"""
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoggedStack, StandIns]]:
    ports = {name: free_port() for name in ("a", "b", "c")}
    stand_ins = StandIns([StandIn(f"model-{n}" if n != "c" else "vlm-c", p) for n, p in ports.items()]).start()
    policy = Path(tmp_path_factory.mktemp("selection")) / "policy.yaml"
    policy.write_text(POLICY.format(**ports), encoding="utf-8")
    config = fleet_stack_config(policy, ("ca", "cb", "cc"), cooldown_s=1.5)
    try:
        with running_stack(config) as stack:
            yield stack, stand_ins
    finally:
        stand_ins.stop()


def ask(stack: LoggedStack, text: str, *, image: bool = False) -> httpx.Response:
    content: object = text
    if image:
        content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": PIXEL}}]
    body = {"model": "auto", "messages": [{"role": "user", "content": content}]}
    return httpx.post(stack.base_url + "/v1/chat/completions", json=body, timeout=30)


def reset(stand_ins: StandIns) -> None:
    for stand_in in stand_ins.by_name.values():
        stand_in.delay_s, stand_in.fail, stand_in.waiting, stand_in.running = 0.0, False, 0.0, 0.0
    time.sleep(0.3)  # the scrapes catch up


def test_latency_shifts_traffic_to_the_faster_model(fleet: tuple[LoggedStack, StandIns]) -> None:
    stack, stand_ins = fleet
    reset(stand_ins)
    stand_ins["model-a"].delay_s = stand_ins["vlm-c"].delay_s = 0.3
    served: list[str] = []
    headers = []
    for _ in range(30):
        reply = ask(stack, "hello there")
        assert reply.status_code == 200
        served.append(reply.headers["x-stand-in"])
        headers.append(reply.headers["x-vsr-selection"])
    # warm-up tries each candidate min_samples (3) times, or once more when the store phase's report
    # of an answer lands after the client's next request was decided; after it, only the faster one
    counts = Counter(served)
    assert counts["model-a"] <= 4 and counts["vlm-c"] <= 4, (counts, headers)
    assert set(served[-15:]) == {"model-b"}, (served, headers)
    shown = re.fullmatch(r"latency:model-b (\d+)ms<(\d+)ms", headers[-1])
    assert shown is not None and int(shown[1]) < 150 <= 300 <= int(shown[2]), headers[-1]
    assert "warm-up" in headers[0]


def test_capability_is_still_respected(fleet: tuple[LoggedStack, StandIns]) -> None:
    stack, stand_ins = fleet
    reset(stand_ins)
    for _ in range(3):
        reply = ask(stack, "what is this", image=True)
        assert reply.status_code == 200
        assert reply.headers["x-stand-in"] == "vlm-c" and reply.headers["x-vsr-model"] == "vlm-c"


def test_load_shifts_traffic(fleet: tuple[LoggedStack, StandIns]) -> None:
    stack, stand_ins = fleet
    reset(stand_ins)
    stand_ins["model-a"].waiting = 40.0
    time.sleep(0.6)  # three scrape intervals
    first = Counter(ask(stack, "loadtest one").headers["x-stand-in"] for _ in range(6))
    assert first == {"model-b": 6}
    stand_ins["model-a"].waiting, stand_ins["model-b"].waiting = 0.0, 40.0
    time.sleep(0.6)
    replies = [ask(stack, "loadtest two") for _ in range(6)]
    assert Counter(r.headers["x-stand-in"] for r in replies) == {"model-a": 6}
    assert replies[0].headers["x-vsr-selection"] == "least_loaded:model-a load=0<160"


def test_weighted_shares_within_tolerance(fleet: tuple[LoggedStack, StandIns]) -> None:
    stack, stand_ins = fleet
    reset(stand_ins)
    served = Counter(ask(stack, "canary please").headers["x-stand-in"] for _ in range(200))
    # 80/20 over 200 draws: a binomial's 4.5 sigma is 12.7 points of 200, never reached by chance
    assert abs(served["model-a"] - 160) <= 26, served


def test_cooldown_and_recovery(fleet: tuple[LoggedStack, StandIns]) -> None:
    stack, stand_ins = fleet
    reset(stand_ins)
    stand_ins["model-b"].delay_s = 0.05  # model-a is now the faster: latency sends it the traffic
    for _ in range(8):
        ask(stack, "warm")
    stand_ins["model-a"].fail = True
    statuses = [ask(stack, "hello").status_code for _ in range(2)]
    assert statuses == [503, 503]  # no failover on this route: the client sees them, and the router too
    cooled = [ask(stack, "hello") for _ in range(4)]
    assert all(r.status_code == 200 and r.headers["x-stand-in"] == "model-b" for r in cooled)
    assert "skipped:model-a" in cooled[0].headers["x-vsr-selection"]
    stand_ins["model-a"].fail = False
    time.sleep(1.7)  # the cooldown passes: model-a is tried again, answers, and wins back the traffic
    back = Counter(ask(stack, "hello").headers["x-stand-in"] for _ in range(6))
    assert back["model-a"] >= 5, back


def test_a_failover_is_seen_by_the_client_and_the_router(fleet: tuple[LoggedStack, StandIns]) -> None:
    """model-a answers 503: Envoy retries each request on model-b. The answer says which host
    answered after how many attempts; the store phase tells the router, which counts a failover on
    both models, cools model-a down and stops choosing it (before, the answer looked like model-a's)."""
    stack, stand_ins = fleet
    reset(stand_ins)
    stand_ins["model-a"].fail = True  # healthy to Envoy's checks, but every answer is a 503
    try:
        before = fleet_counts(stack)
        replies = [ask(stack, "failover please") for _ in range(2)]
        assert [r.status_code for r in replies] == [200, 200]
        b_host = f"127.0.0.1:{stand_ins['model-b'].port}"
        assert [(r.headers["x-vsr-upstream-host"], r.headers["x-vsr-attempts"]) for r in replies] == [(b_host, "2")] * 2
        assert all(r.headers["x-vsr-selection"].startswith("ordered:model-a") for r in replies)
        after = fleet_counts(stack)
        assert after["model-a"]["failovers"] - before["model-a"]["failovers"] == 2, (before, after)
        assert after["model-b"]["took_over"] - before["model-b"]["took_over"] == 2
        third = ask(stack, "failover please")  # two failures (cooldown_after 2): model-a cools down
        assert third.status_code == 200 and "skipped:model-a" in third.headers["x-vsr-selection"]
        assert third.headers["x-stand-in"] == "model-b"
    finally:
        reset(stand_ins)
        time.sleep(1.6)  # model-a's cooldown passes


def test_failover_without_a_client_error(fleet: tuple[LoggedStack, StandIns]) -> None:
    stack, stand_ins = fleet
    reset(stand_ins)
    stand_ins.down("model-a")  # connections refused: Envoy retries on the aggregate's next priority
    try:
        replies = [ask(stack, "failover please") for _ in range(40)]
        assert [r.status_code for r in replies] == [200] * 40
        assert {r.headers["x-stand-in"] for r in replies} == {"model-b"}
        assert replies[0].headers["x-vsr-selection"].startswith("ordered:model-a")
        stand_ins.up("model-a")
        stand_ins["model-a"].fail = True  # up, but answering 503: retried on model-b too
        replies = [ask(stack, "failover please") for _ in range(20)]
        assert [r.status_code for r in replies] == [200] * 20
    finally:
        stand_ins.up("model-a")
        reset(stand_ins)


def fleet_counts(stack: LoggedStack) -> dict[str, dict[str, int]]:
    """The console's fleet JSON (the admin port): failovers and take-overs per model, once the store
    phase has reported every answer (it runs after the client has its reply)."""
    admin = f"http://127.0.0.1:{stack.config.env['VSR_SERVER__ADMIN_PORT']}/v1/console/fleet"
    last: dict[str, dict[str, int]] = {}
    for _ in range(20):
        models = httpx.get(admin, timeout=10).json()["models"]
        now = {name: {k: row[k] for k in ("failovers", "took_over", "requests")} for name, row in models.items()}
        if now == last:
            return now
        last = now
        time.sleep(0.2)
    return last


def test_stack_upstream_serves_a_running_server_beside_demo_upstreams(tmp_path: Path) -> None:
    """`extproc stack --upstream ca=HOST:PORT`: no demo upstream on that port (it used to start one
    there and die with `address already in use`), the other clusters still get theirs."""
    ports = {name: free_port() for name in ("a", "b", "c")}
    stand_ins = StandIns([StandIn("model-a", ports["a"])]).start()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        POLICY.format(**ports).replace("selection: {algorithm: latency, explore: 0}", "selection: ordered")
    )
    config = StackConfig(
        policy=policy,
        envoy=EnvoyOptions(listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port()),
        upstream_overrides={"ca": f"127.0.0.1:{ports['a']}"},
        external_upstreams=("ca",),  # what stack_cmd makes of --upstream
        env={"VSR_LOGGING__LEVEL": "WARNING", "VSR_SERVER__ADMIN_PORT": str(free_port())},
        start_timeout_s=120.0,
    )
    try:
        with running_stack(config) as stack:
            first = ask(stack, "hello")  # the default route, ordered: model-a, the running stand-in
            assert first.status_code == 200 and first.headers["x-stand-in"] == "model-a"
            demo = ask(stack, "loadtest")  # least_loaded without load data: ordered, model-a too
            assert demo.headers["x-stand-in"] == "model-a"
            image = ask(stack, "what is it", image=True)  # vlm-c: a demo upstream the stack started
            assert image.status_code == 200 and image.headers["x-demo-upstream"] == "cc"
            assert not any("address already in use" in line for line in stack.lines)
    finally:
        stand_ins.stop()


def test_unclassified_requests_pass_through_to_the_model_they_name(fleet: tuple[LoggedStack, StandIns]) -> None:
    stack, stand_ins = fleet
    reset(stand_ins)
    url = stack.base_url + "/v1/embeddings"
    named = httpx.post(url, json={"model": "model-b", "input": "hello"}, timeout=30)
    assert named.status_code == 200 and named.headers["x-stand-in"] == "model-b"
    assert named.headers["x-vsr-decision"] == "passthrough" and named.headers["x-vsr-model"] == "model-b"
    other = httpx.post(url, json={"model": "vlm-c", "input": "hello"}, timeout=30)
    assert other.headers["x-stand-in"] == "vlm-c"
    unknown = httpx.post(url, json={"model": "text-embedding-3-small", "input": "hello"}, timeout=30)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    # an audio upload (multipart): its form's model field
    files = {"file": ("a.wav", b"RIFF....WAVE", "audio/wav")}
    audio = httpx.post(stack.base_url + "/v1/audio/transcriptions", data={"model": "vlm-c"}, files=files, timeout=30)
    assert audio.status_code == 200 and audio.headers["x-stand-in"] == "vlm-c"
    # a chat completion naming a model the policy does not know: 404 in OpenAI's shape, as OpenAI answers
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    chat = httpx.post(stack.base_url + "/v1/chat/completions", json=body, timeout=30)
    assert chat.status_code == 404 and chat.json()["error"]["code"] == "model_not_found"
