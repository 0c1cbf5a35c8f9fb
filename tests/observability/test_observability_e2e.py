"""Through a real Envoy: traffic shows up in /metrics and the decision log; /v1/explain agrees
with the ext_proc path; replay of the captured log; reloads over SIGHUP under load."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from extproc.cli import main
from extproc.ops.stack import free_port
from tests.integration.conftest import POLICY, REPO, LoggedStack, stack_config

pytestmark = pytest.mark.integration

REQUESTS = REPO / "policies" / "examples" / "requests"
# The default policy as is; its image-label signal has no vision model configured here (unavailable).
E2E_POLICY = POLICY.read_text()
# The change under review: plain requests go to the general VLM first.
CHANGED = E2E_POLICY.replace(
    "action: {type: route, models: [general, general-vlm]", "action: {type: route, models: [general-vlm, general]"
)
assert CHANGED != E2E_POLICY
INVALID = CHANGED.replace("{signal: has_image}", "{signal: has_imagee}", 1)
assert INVALID != CHANGED

# (id, API path, request file or raw body)
TRAFFIC: list[tuple[str, str, str | bytes]] = [
    ("obs-plain-1", "/v1/chat/completions", "plain_question.json"),
    ("obs-plain-2", "/v1/chat/completions", "plain_question.json"),
    ("obs-passport", "/v1/chat/completions", "passport_text.json"),
    ("obs-code", "/v1/chat/completions", "code_secret.json"),
    ("obs-responses", "/v1/responses", "responses_api.json"),
    ("obs-xray", "/v1/chat/completions", "xray_image.json"),
    ("obs-describe", "/v1/chat/completions", "describe_image.json"),
    ("obs-car", "/v1/chat/completions", "car_medical_question.json"),
    ("obs-jailbreak", "/v1/chat/completions", "jailbreak.json"),
    ("obs-malformed", "/v1/chat/completions", b'{"model": "auto", "messages": ['),
]


class ObsStack:
    def __init__(self, stack: LoggedStack, admin: str, log: Path, policy: Path, tmp: Path) -> None:
        self.stack, self.admin, self.log, self.policy, self.tmp = stack, admin, log, policy, tmp
        self.sent: dict[str, dict[str, Any]] = {}  # request id -> what Envoy answered

    def post(self, path: str, body: bytes, request_id: str | None = None) -> httpx.Response:
        headers = {"content-type": "application/json"}
        if request_id:
            headers["x-request-id"] = request_id
        return httpx.post(self.stack.base_url + path, content=body, headers=headers, timeout=30)

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = httpx.get(self.admin + "/metrics", timeout=10).text
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def records(self, ids: set[str], timeout: float = 10.0) -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            found: dict[str, dict[str, Any]] = {}
            if self.log.exists():
                for line in self.log.read_text().splitlines():
                    record = json.loads(line)
                    if record.get("kind") == "request" and record.get("request_id") in ids:
                        found[record["request_id"]] = record
            if set(found) >= ids or time.monotonic() > deadline:
                return found
            time.sleep(0.1)


def key_of(sent: dict[str, Any]) -> tuple[str, str, str]:
    """(decision, model, outcome) as Envoy's client saw it."""
    decision, model = sent["decision"] or "none", sent["model"] or "none"
    if sent["upstream"]:
        return decision, model, "route"
    if sent["status"] == 200:
        return decision, model, "clarify"
    return decision, model, "error" if decision == "none" else "reject"


def body_of(item: str | bytes) -> bytes:
    return item if isinstance(item, bytes) else (REQUESTS / item).read_bytes()


@pytest.fixture(scope="module")
def obs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObsStack]:
    tmp = tmp_path_factory.mktemp("obs")
    policy = tmp / "policy.yaml"
    policy.write_text(E2E_POLICY)
    log = tmp / "decisions.jsonl"
    admin_port = free_port()
    config = stack_config(
        VSR_SERVER__ADMIN_PORT=str(admin_port),
        VSR_OBSERVABILITY__DECISION_LOG__PATH=str(log),
        VSR_OBSERVABILITY__DECISION_LOG__CAPTURE="true",
        VSR_OBSERVABILITY__DECISION_LOG__FLUSH_INTERVAL_S="0.05",
        VSR_RELOAD__INTERVAL_S="3600",  # reloads in this module come from SIGHUP
        VSR_LOGGING__LEVEL="INFO",
    )
    config.policy = policy
    running = LoggedStack(config)
    try:
        running.start()
    except Exception:
        print("\n".join(running.lines[-60:]))
        raise
    yield ObsStack(running, f"http://127.0.0.1:{admin_port}", log, policy, tmp)
    running.stop()


def test_traffic_is_counted_in_metrics_and_written_to_the_decision_log(obs: ObsStack) -> None:
    before = obs.metrics()
    for request_id, path, item in TRAFFIC:
        reply = obs.post(path, body_of(item), request_id)
        obs.sent[request_id] = {
            "status": reply.status_code,
            "decision": reply.headers.get("x-vsr-decision"),
            "model": reply.headers.get("x-vsr-model"),
            "path": path,
            "body": body_of(item),
            "upstream": reply.headers.get("x-demo-upstream"),
        }
    assert obs.sent["obs-xray"]["decision"] == "medical_image" and obs.sent["obs-car"]["status"] == 200
    assert obs.sent["obs-jailbreak"]["status"] == 403 and obs.sent["obs-malformed"]["status"] == 400
    after = obs.metrics()

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    expected: dict[tuple[str, str, str], int] = {}
    for sent in obs.sent.values():
        expected[key_of(sent)] = expected.get(key_of(sent), 0) + 1
    assert expected[("jailbreak_block", "none", "reject")] == 1 and expected[("none", "none", "error")] == 1
    for (decision, model, outcome), n in expected.items():
        assert delta("vsr_requests_total", decision=decision, model=model, outcome=outcome) == n, (decision, model)
    assert delta("vsr_request_errors_total", code="invalid_json") == 1
    assert delta("vsr_signal_results_total", signal="jailbreak", status="matched") == 1
    assert delta("vsr_signal_results_total", signal="leaked_secret", status="matched") == 1
    assert delta("vsr_signal_results_total", signal="image_kind", status="unavailable") >= 1  # no vision model
    assert delta("vsr_signal_latency_seconds_count", signal="jailbreak", type="jailbreak") == 9  # every parsed request
    assert delta("vsr_images_total") == 3 and delta("vsr_image_bytes_total") > 0
    assert delta("vsr_route_latency_seconds_count", stage="total") == 10
    assert delta("vsr_extproc_phase_seconds_count", phase="request_body") == 10
    # One ext_proc message per request: Envoy sends neither the request nor the response headers.
    assert delta("vsr_extproc_phase_seconds_count", phase="request_headers") == 0
    assert delta("vsr_extproc_phase_seconds_count", phase="response_headers") == 0
    assert after[("vsr_in_flight_requests", ())] == 0
    assert after[("vsr_model_loaded", (("model", "vision"),))] == 0

    records = obs.records(set(obs.sent))
    assert set(records) == set(obs.sent)  # one record per request, under Envoy's x-request-id
    version = records["obs-plain-1"]["policy"]
    for request_id, sent in obs.sent.items():
        record = records[request_id]
        assert record["policy"] == version
        assert record["status"] == sent["status"]
        assert (record["decision"] or "none", record["model"] or "none", record["action"]) == key_of(sent), request_id
    assert records["obs-jailbreak"]["signals"]["jailbreak"]["status"] == "matched"
    assert records["obs-xray"]["signals"]["image_kind"]["status"] == "unavailable"
    assert len(records["obs-xray"]["request"]["images"]) == 1
    assert records["obs-malformed"]["error"] == "invalid_json" and records["obs-malformed"]["request"] is None
    assert records["obs-code"]["timings_ms"]["extproc"] >= records["obs-code"]["timings_ms"]["total"]
    # Structured logs: the server's line for the reject carries Envoy's x-request-id.
    server_lines = [line for line in obs.stack.lines if line.lstrip().startswith("extproc |")]
    assert any('"request_id":"obs-jailbreak"' in line and '"routed"' in line for line in server_lines)


def test_explain_agrees_with_the_ext_proc_path_for_text_and_images(obs: ObsStack) -> None:
    assert obs.sent, "runs after the traffic test"
    records = obs.records(set(obs.sent))
    for request_id, sent in obs.sent.items():
        reply = httpx.post(obs.admin + "/v1/explain?path=" + sent["path"], content=sent["body"], timeout=30)
        assert reply.status_code == 200
        explained = reply.json()
        record = records[request_id]
        assert (explained["decision"], explained["model"], explained["action"], explained["status"]) == (
            record["decision"],
            record["model"],
            record["action"],
            record["status"],
        ), request_id
        assert explained["policy_version"] == record["policy"]
        assert {s["name"]: s["status"] for s in explained["signals"]} == {
            name: s["status"] for name, s in record["signals"].items()
        }, request_id
        if sent["status"] == 200 and explained["action"] == "route":
            assert (explained["decision"], explained["model"]) == (sent["decision"], sent["model"])
    image = httpx.post(obs.admin + "/v1/explain", content=obs.sent["obs-xray"]["body"], timeout=30).json()
    assert image["request"]["images"][0]["sha256"] == records["obs-xray"]["request"]["images"][0]["sha256"]
    assert next(s for s in image["signals"] if s["name"] == "image_kind")["status"] == "unavailable"


def test_healthz_reports_the_unavailable_vision_model(obs: ObsStack) -> None:
    reply = httpx.get(obs.admin + "/healthz", timeout=10)
    assert reply.status_code == 200
    health = reply.json()
    assert health["status"] == "serving" and health["degraded"] is True
    [vision] = [m for m in health["models"] if m["name"] == "vision"]
    assert vision["loaded"] is False and "no vision model configured" in vision["detail"]
    assert "image_kind" in health["unavailable_signals"]
    policy = httpx.get(obs.admin + "/v1/policy", timeout=10).json()
    assert policy["version"] == health["policy"]["version"] and "jailbreak_block" in policy["decisions"]
    assert policy["signals"]["image_kind"]["unavailable"]


def test_replay_of_the_captured_log_prints_the_transitions(obs: ObsStack, capsys: pytest.CaptureFixture[str]) -> None:
    assert obs.sent, "runs after the traffic test"
    obs.records(set(obs.sent))
    n_general = sum(1 for sent in obs.sent.values() if key_of(sent) == ("general", "general", "route"))
    assert n_general >= 3  # two plain questions and the Responses API one
    changed = obs.tmp / "changed.yaml"
    changed.write_text(CHANGED)
    for mode in ([], ["--no-bodies"]):  # re-routed from the captured bodies, then from logged signal results
        capsys.readouterr()
        assert main(["replay", str(obs.log), "--policy", str(changed), *mode]) == 0
        out = capsys.readouterr().out
        assert f"changed: {n_general} of 10" in out, out
        [row] = [line for line in out.splitlines() if line.strip().startswith("changed ")]
        assert "general -> general " in row and "general -> general-vlm" in row and f" {n_general} " in row
        assert "obs-plain-1" in row
        assert main(["replay", str(obs.log), "--policy", str(changed), "--fail-on-change", *mode]) == 1
    capsys.readouterr()
    assert main(["replay", str(obs.log), "--policy", str(obs.policy), "--fail-on-change"]) == 0
    assert "changed: 0 of 10" in capsys.readouterr().out


def test_sighup_reload_invalid_keeps_routing_valid_changes_it_without_dropping_requests(obs: ObsStack) -> None:
    plain = body_of("plain_question.json")
    results: list[tuple[int, str | None]] = []
    stop = threading.Event()

    def load() -> None:  # bounded: at most 3000 requests or until stopped
        with httpx.Client(timeout=30) as client:
            for _ in range(3000):
                if stop.is_set():
                    return
                try:
                    reply = client.post(
                        obs.stack.base_url + "/v1/chat/completions",
                        content=plain,
                        headers={"content-type": "application/json"},
                    )
                    results.append((reply.status_code, reply.headers.get("x-vsr-model")))
                except httpx.HTTPError as exc:
                    results.append((0, repr(exc)))

    def reload_and_wait(text: str, expect: str) -> dict[str, Any]:
        before = httpx.get(obs.admin + "/healthz", timeout=10).json().get("last_reload", {}).get("at")
        obs.policy.write_text(text)
        obs.stack.procs["extproc"].send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            last = httpx.get(obs.admin + "/healthz", timeout=10).json().get("last_reload")
            if last and last["at"] != before:
                assert last["result"] == expect, last
                return dict(last)
            time.sleep(0.05)
        raise AssertionError(f"no reload within 30 s; server log:\n{obs.stack.lines[-20:]}")

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    try:
        time.sleep(0.3)
        old_version = httpx.get(obs.admin + "/healthz", timeout=10).json()["policy"]["version"]
        failure = reload_and_wait(INVALID, "failure")
        assert failure["version"] == old_version and any("has_imagee" in e for e in failure["errors"])
        assert obs.post("/v1/chat/completions", plain).headers["x-vsr-model"] == "general"  # unchanged
        time.sleep(0.3)
        success = reload_and_wait(CHANGED, "success")
        assert success["version"] != old_version
        assert obs.post("/v1/chat/completions", plain).headers["x-vsr-model"] == "general-vlm"
        time.sleep(0.3)
    finally:
        stop.set()
        worker.join(60)
    assert len(results) >= 10 and all(status == 200 for status, _ in results), [r for r in results if r[0] != 200][:5]
    models = [model for _, model in results]
    assert set(models) == {"general", "general-vlm"}
    switched = models.index("general-vlm")
    assert all(m == "general-vlm" for m in models[switched:])  # once swapped, never back
    metrics = obs.metrics()
    assert metrics[("vsr_policy_reloads_total", (("result", "failure"),))] == 1
    assert metrics[("vsr_policy_reloads_total", (("result", "success"),))] == 1
    assert metrics[("vsr_policy_info", (("version", success["version"]),))] == 1
    assert any("policy reload refused" in line for line in obs.stack.lines)
