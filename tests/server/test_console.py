"""The decision console's ring and endpoints: bounded and numbered, content-free, incremental polling,
counts and latency, the policy as a tree, the static page, and auth (data behind the token, page public)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from pydantic import SecretStr

from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.observability.recent import LATENCY_BOUNDS_MS, RecentDecisions, histogram
from extproc.outcome import RoutingOutcome
from extproc.policy.load import compile_text
from extproc.server.admin import Response, json_response
from extproc.server.app import ExtProcServer
from extproc.server.console_routes import ASSETS, STATIC_DIR, policy_tree
from extproc.settings import Settings
from extproc.signals.base import BuildContext
from tests.server.test_grpc_service import (
    Harness,
    body_msg,
    chat,
    headers_msg,
    make_router,
    response_headers_msg,
)
from tests.suite_env import SUITE_ENVIRON

TOKEN = "console-admin-token-0123456789"
# A marker no decision, signal or model name contains: it must never leave the server through the console.
MARKER = "ZEBRA-7781-PRIVATE"
PROMPT = f"please find the bug in my code, account {MARKER} and home address 12 Privet Drive"


def console_settings(tmp_path: Path, *, ring: int = 500, token: str | None = None, capture: bool = True) -> Settings:
    settings = Settings.load(None, environ=SUITE_ENVIRON)
    obs = settings.observability
    return settings.model_copy(
        update={
            "server": settings.server.model_copy(
                update={
                    "grpc_port": 0,
                    "admin_port": 0,
                    "shutdown_grace_s": 1.0,
                    "admin_token": SecretStr(token) if token else None,
                }
            ),
            "reload": settings.reload.model_copy(update={"watch": False}),
            # Capture on: the decision log keeps bodies; the console still must not.
            "observability": obs.model_copy(
                update={
                    "console_ring": ring,
                    "decision_log": obs.decision_log.model_copy(
                        update={"path": tmp_path / "decisions.jsonl", "capture": capture}
                    ),
                }
            ),
        }
    )


@contextlib.asynccontextmanager
async def serving(settings: Settings, *, load: bool = True) -> AsyncIterator[tuple[ExtProcServer, Harness]]:
    server = ExtProcServer(settings, make_router)
    port = await server.start()
    if load:
        await server.load()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield server, Harness(server, channel)
    finally:
        await channel.close()
        await server.stop()


def admin(server: ExtProcServer, token: str | None = None) -> httpx.AsyncClient:
    assert server.admin is not None
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.admin.port}", headers=headers, timeout=10)


async def send(harness: Harness, text: str, request_id: str = "rid-1") -> None:
    extra = [("x-request-id", request_id)]
    await harness.exchange(headers_msg(extra=extra), body_msg(chat(text)), response_headers_msg())


# -- the ring itself -----------------------------------------------------------------------------
@pytest.fixture
def router_outcomes() -> Iterator[dict[str, RoutingOutcome]]:
    """One outcome per decision of the test policy (reject, code route, default route)."""
    import asyncio

    router = make_router(Settings.load(None, environ=SUITE_ENVIRON))

    async def route_all() -> dict[str, RoutingOutcome]:
        return {
            "reject": await router.route(chat(f"jailbreak {MARKER}"), path="/v1/chat/completions"),
            "code": await router.route(chat(PROMPT), path="/v1/chat/completions"),
            "general": await router.route(chat(f"hello {MARKER}"), path="/v1/chat/completions"),
        }

    try:
        yield asyncio.run(route_all())
    finally:
        router.close()


def test_the_ring_is_bounded_and_numbered(router_outcomes: dict[str, RoutingOutcome]) -> None:
    ring = RecentDecisions(3)
    assert (len(ring), ring.first_seq, ring.last_seq, ring.since(0)) == (0, 1, 0, [])
    for i in range(5):
        ring.record(router_outcomes["general"], request_id=f"r{i}", path="/v1/chat/completions")
    assert len(ring) == 3 and ring.last_seq == 5 and ring.first_seq == 3
    assert [r.seq for r in ring.since(0)] == [3, 4, 5]  # the two oldest fell out
    assert [r.request_id for r in ring.since(0)] == ["r2", "r3", "r4"]
    assert [r.seq for r in ring.since(3)] == [4, 5]
    assert [r.seq for r in ring.since(4)] == [5]
    assert ring.since(5) == [] and ring.since(99) == []
    assert [r.seq for r in ring.since(0, limit=2)] == [4, 5]  # the newest of them
    with pytest.raises(ValueError):
        RecentDecisions(0)


def test_a_record_says_what_was_decided_and_nothing_of_the_request(
    router_outcomes: dict[str, RoutingOutcome],
) -> None:
    ring = RecentDecisions(10)
    ring.record(router_outcomes["code"], request_id="x" * 1000, path="/v1/chat/completions", extproc_ms=1.5)
    ring.record(router_outcomes["reject"], request_id="rid-2", path="/v1/chat/completions")
    ring.record_failure("not_ready", request_id=None, path="/v1/responses")
    code, reject, failure = (r.to_dict() for r in ring.since(0))
    assert code["decision"] == "code_security_review" and code["action"] == "route"
    assert code["model"] == "code-security" and code["status"] == 200
    assert code["matched"] == ["code_present", "code_review_words"]
    assert code["signals"]["jailbreak"] == {"status": "not_matched", "score": 0.0}
    assert code["signals"]["code_present"]["status"] == "matched"
    assert code["latency_ms"] is not None and code["latency_ms"] >= 0 and code["extproc_ms"] == 1.5
    assert code["overload"] is None and code["policy"] == router_outcomes["code"].policy_version
    assert len(code["request_id"]) == 128  # cut: it comes from the wire
    assert (reject["decision"], reject["action"], reject["status"], reject["model"]) == (
        "jailbreak_block",
        "reject",
        403,
        None,
    )
    assert (failure["action"], failure["status"], failure["decision"], failure["signals"]) == (
        "not_ready",
        503,
        None,
        {},
    )
    text = json.dumps([r.to_dict() for r in ring.since(0)])
    assert MARKER not in text and "Privet" not in text and "please" not in text
    assert not hasattr(ring.since(0)[0], "__dict__")  # slots: no room for anything else


def test_window_stats_count_each_decision_and_bucket_latency(router_outcomes: dict[str, RoutingOutcome]) -> None:
    ring = RecentDecisions(100)
    for name, n in (("code", 3), ("general", 2), ("reject", 1)):
        for _ in range(n):
            ring.record(router_outcomes[name], request_id=None, path="/v1/chat/completions")
    stats = ring.window()
    assert stats["total"] == 6 and stats["capacity"] == 100
    counts = {name: d["count"] for name, d in stats["decisions"].items()}
    assert counts == {"code_security_review": 3, "general": 2, "jailbreak_block": 1}
    assert stats["decisions"]["jailbreak_block"]["actions"] == {"reject": 1}
    assert sum(stats["latency"]["counts"]) == 6
    assert len(stats["latency"]["counts"]) == len(stats["latency"]["bounds_ms"]) + 1
    for d in stats["decisions"].values():
        assert sum(d["latency_counts"]) == d["count"] and d["p50_ms"] <= d["p95_ms"] <= d["max_ms"]
    assert histogram([0.01, 0.011, 1.0, 20000.0]) == [1, 1, *[0] * 4, 1, *[0] * 12, 1]
    assert len(histogram([])) == len(LATENCY_BOUNDS_MS) + 1


# -- the endpoints over live traffic ------------------------------------------------------------
async def test_live_traffic_reaches_the_ring_incrementally_without_content(tmp_path: Path) -> None:
    async with serving(console_settings(tmp_path)) as (server, harness), admin(server) as client:
        empty = (await client.get("/v1/console/recent")).json()
        assert empty["enabled"] is True and empty["records"] == [] and empty["last_seq"] == 0
        await send(harness, PROMPT, "rid-a")
        await send(harness, f"jailbreak now {MARKER}", "rid-b")
        first = (await client.get("/v1/console/recent", params={"after": 0})).json()
        assert [r["seq"] for r in first["records"]] == [1, 2]
        assert [r["request_id"] for r in first["records"]] == ["rid-a", "rid-b"]
        assert [r["decision"] for r in first["records"]] == ["code_security_review", "jailbreak_block"]
        assert first["records"][0]["path"] == "/v1/chat/completions"
        assert first["last_seq"] == 2 and first["missed"] == 0 and first["reset"] is False
        assert first["policy"] == server.live_router.policy.version  # type: ignore[union-attr]

        nothing_new = (await client.get("/v1/console/recent", params={"after": 2})).json()
        assert nothing_new["records"] == []
        await send(harness, f"hello {MARKER}", "rid-c")
        new = (await client.get("/v1/console/recent", params={"after": 2})).json()
        assert [(r["seq"], r["decision"]) for r in new["records"]] == [(3, "general")]

        # explain is not live traffic: not in the ring (as in metrics and the decision log)
        assert (await client.post("/v1/explain", content=chat(PROMPT))).status_code == 200
        assert (await client.get("/v1/console/recent", params={"after": 3})).json()["records"] == []

        texts = [
            (await client.get("/v1/console/recent")).text,
            (await client.get("/v1/console/stats")).text,
            (await client.get("/v1/console/policy")).text,
        ]
    for text in texts:
        assert MARKER not in text and "Privet" not in text and "please find" not in text


async def test_recent_polling_edges(tmp_path: Path) -> None:
    async with serving(console_settings(tmp_path, ring=2)) as (server, harness):
        for i in range(4):
            await send(harness, "hello", f"rid-{i}")
        async with admin(server) as client:
            behind = (await client.get("/v1/console/recent", params={"after": 1})).json()
            assert [r["seq"] for r in behind["records"]] == [3, 4] and behind["missed"] == 1
            assert behind["capacity"] == 2 and behind["first_seq"] == 3
            # a client from before a restart (numbers past ours): start over, say so
            ahead = (await client.get("/v1/console/recent", params={"after": 99})).json()
            assert ahead["reset"] is True and [r["seq"] for r in ahead["records"]] == [3, 4]
            limited = (await client.get("/v1/console/recent", params={"limit": 1})).json()
            assert [r["seq"] for r in limited["records"]] == [4]
            for bad in ({"after": "x"}, {"after": "-1"}, {"limit": "0"}):
                assert (await client.get("/v1/console/recent", params=bad)).status_code == 400
            assert (await client.post("/v1/console/recent")).status_code == 405


async def test_stats_count_decisions_from_the_ring_and_the_metrics(tmp_path: Path) -> None:
    async with serving(console_settings(tmp_path)) as (server, harness):
        for text in (PROMPT, PROMPT, "hello", "jailbreak"):
            await send(harness, text)
        async with admin(server) as client:
            stats = (await client.get("/v1/console/stats")).json()
    window, since = stats["window"], stats["since_start"]
    assert window["total"] == 4 == since["total"]
    for source in (window, since):
        counts = {name: d["count"] for name, d in source["decisions"].items()}
        assert counts == {"code_security_review": 2, "general": 1, "jailbreak_block": 1}
        assert source["decisions"]["jailbreak_block"]["actions"] == {"reject": 1}
        assert source["overload"] == {"shed": 0, "fail_safe": 0}
        assert sum(source["latency"]["counts"]) == 4
        assert len(source["latency"]["counts"]) == len(source["latency"]["bounds_ms"]) + 1
    assert window["latency"]["bounds_ms"] == since["latency"]["bounds_ms"]  # one scale for both


async def test_a_request_before_the_router_loads_is_recorded_as_not_ready(tmp_path: Path) -> None:
    async with serving(console_settings(tmp_path), load=False) as (server, harness):
        await send(harness, PROMPT)
        async with admin(server) as client:
            [record] = (await client.get("/v1/console/recent")).json()["records"]
            assert (await client.get("/v1/console/policy")).status_code == 503
    assert (record["action"], record["status"], record["decision"]) == ("not_ready", 503, None)


async def test_the_ring_is_fed_with_metrics_and_the_decision_log_off(tmp_path: Path) -> None:
    settings = console_settings(tmp_path)
    obs = settings.observability
    no_log = obs.decision_log.model_copy(update={"path": None})
    settings = settings.model_copy(
        update={"observability": obs.model_copy(update={"metrics": False, "decision_log": no_log})}
    )
    async with serving(settings) as (server, harness):
        assert server.metrics is None and server.decision_log is None
        await send(harness, "hello")
        async with admin(server) as client:
            recent = (await client.get("/v1/console/recent")).json()
            stats = (await client.get("/v1/console/stats")).json()
    assert [r["decision"] for r in recent["records"]] == ["general"]
    assert stats["window"]["total"] == 1 and stats["since_start"] is None


async def test_ring_off(tmp_path: Path) -> None:
    settings = console_settings(tmp_path, ring=0)
    obs = settings.observability
    no_log = obs.decision_log.model_copy(update={"path": None})
    settings = settings.model_copy(
        update={"observability": obs.model_copy(update={"metrics": False, "decision_log": no_log})}
    )
    async with serving(settings) as (server, harness):
        assert server.recent is None and server.service.observer is None  # nothing to feed: no cost per request
        await send(harness, "hello")
        async with admin(server) as client:
            recent = (await client.get("/v1/console/recent")).json()
            stats = (await client.get("/v1/console/stats")).json()
            page = await client.get("/console")
    assert recent["enabled"] is False and recent["records"] == []
    assert stats["window"] is None and stats["since_start"] is None
    assert page.status_code == 200


# -- the policy as a tree -------------------------------------------------------------------------
TREE_POLICY = """
version: 1
name: tree
models:
  - {name: a, cluster: a}
  - {name: b, cluster: b}
signals:
  - {name: words, type: keyword, keywords: [bug, fix]}
  - {name: rude, type: keyword, keywords: [idiot]}
  - {name: image, type: modality}
decisions:
  - name: low
    priority: 5
    when: {signal: rude}
    action: {type: clarify, message: Please rephrase.}
  - name: high
    priority: 50
    description: a bug report that is not rude
    when:
      all:
        - any: [{signal: words, label: bug, min_score: 0.5}, {signal: image}]
        - not: {signal: rude}
    action: {type: route, models: [b, a]}
default: {name: fallback, action: {type: route, models: [a]}}
"""


def test_policy_tree_orders_decisions_and_keeps_every_node(settings: Settings) -> None:
    executor = HeavyExecutor(1, None)
    try:
        ctx = BuildContext(settings=settings, executor=executor, models=ModelRegistry())
        tree = policy_tree(compile_text(TREE_POLICY, ctx))
    finally:
        executor.shutdown()
    assert [d["name"] for d in tree["decisions"]] == ["high", "low"]  # by priority, highest first
    high = tree["decisions"][0]
    assert high["priority"] == 50 and high["description"] == "a bug report that is not rude"
    selection = high["action"].pop("selection")  # model selection: the route's algorithm and options
    assert selection["algorithm"] == "ordered" and selection["failover"] is False
    assert high["action"] == {"type": "route", "models": ["b", "a"], "reasoning": None}
    when = high["when"]
    assert when["op"] == "all" and [c["op"] for c in when["children"]] == ["any", "not"]
    label_leaf, image_leaf = when["children"][0]["children"]
    assert label_leaf == {
        "op": "signal",
        "path": "all[0].any[0]",
        "signal": "words",
        "label": "bug",
        "min_score": 0.5,
        "type": "keyword",
        "on_error": "no_match",
        "unavailable": None,
    }
    assert image_leaf["signal"] == "image" and image_leaf["type"] == "modality" and image_leaf["label"] is None
    [negated] = when["children"][1]["children"]
    assert negated["signal"] == "rude"
    assert tree["decisions"][1]["action"] == {"type": "clarify", "message": "Please rephrase."}
    assert tree["default"]["name"] == "fallback" and tree["default"]["priority"] is None
    assert set(tree["signals"]) == {"words", "rude", "image"}
    assert [m["name"] for m in tree["models"]] == ["a", "b"]
    json.dumps(tree)  # all of it is JSON


# -- the page and auth --------------------------------------------------------------------------
async def test_the_page_and_its_assets_are_served_with_a_strict_policy(tmp_path: Path) -> None:
    async with serving(console_settings(tmp_path)) as (server, _), admin(server) as client:
        replies = {path: await client.get(path) for path in ASSETS}
    for path, (name, content_type) in ASSETS.items():
        reply = replies[path]
        assert reply.status_code == 200, path
        assert reply.headers["content-type"] == content_type
        assert reply.content == (STATIC_DIR / name).read_bytes()
        csp = reply.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert reply.headers["x-content-type-options"] == "nosniff"
    page = replies["/console"].text
    assert '<script src="/console/console.js"' in page and "/console/console.css" in page
    assert "<script>" not in page and " style=" not in page  # nothing inline: the CSP forbids it


async def test_api_needs_the_token_and_the_page_does_not(tmp_path: Path) -> None:
    async with serving(console_settings(tmp_path, token=TOKEN)) as (server, harness):
        await send(harness, "hello")
        async with admin(server) as anonymous, admin(server, "wrong-token-0123456789") as wrong:
            for path in ("/v1/console/recent", "/v1/console/stats", "/v1/console/policy", "/v1/console"):
                for client in (anonymous, wrong):
                    reply = await client.get(path)
                    assert reply.status_code == 401, path
                    assert reply.headers["www-authenticate"].startswith('Bearer realm="vsr-admin"')
            for path in ASSETS:  # static, no data: usable to ask for the token
                assert (await anonymous.get(path)).status_code == 200, path
            assert (await anonymous.post("/console")).status_code == 401  # only GET is public
            assert (await anonymous.get("/console/../v1/console/recent")).status_code == 401
            assert (await anonymous.get("/console/secrets.txt")).status_code == 401
        async with admin(server, TOKEN) as authorized:
            recent = await authorized.get("/v1/console/recent")
            assert recent.status_code == 200 and len(recent.json()["records"]) == 1
            assert (await authorized.get("/v1/console/stats")).status_code == 200
            assert (await authorized.get("/v1/console/policy")).status_code == 200
            assert (await authorized.get("/console/secrets.txt")).status_code == 404  # no file by name


async def _empty(body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
    return json_response(200, {})


def test_console_routes_cannot_shadow_the_admin_api(tmp_path: Path) -> None:
    server = ExtProcServer(console_settings(tmp_path))
    assert server.admin is not None
    with pytest.raises(ValueError, match="already taken"):
        server.admin.add_routes({("GET", "/v1/console/recent"): _empty})
    with pytest.raises(ValueError, match="public route"):
        server.admin.add_routes({}, public=frozenset({("GET", "/metrics")}))


# -- conversations ------------------------------------------------------------------------------
async def test_conversations_panel_shows_the_store_and_each_lookup_without_keys() -> None:
    from extproc.conversations.service import Conversations
    from extproc.conversations.store import MemoryStore
    from tests.server.test_grpc_service import body_only_msg, decision_of, start
    from tests.server.test_grpc_service_cache import observe
    from tests.server.test_grpc_service_conversations import POLICY as CONVERSATIONS
    from tests.server.test_grpc_service_conversations import answer_chunks, learned, responses, with_client

    def configure(settings: Settings) -> None:
        settings.cache.enabled = False
        settings.server.admin_port = 0
        settings.observability.console_ring = 50

    policy = CONVERSATIONS.replace(
        "action: {type: route, models: [big]}}",
        "action: {type: route, models: [big]}}\n"
        "  - {name: private, priority: 20, when: {signal: secret}, sticky: false,"
        " action: {type: route, models: [general]}}",
    )
    policy = policy.replace("signals:\n", "signals:\n  - {name: secret, type: keyword, keywords: [confidential]}\n")
    server, channel = await start(policy=policy, configure=configure)
    server.service.conversations = Conversations(MemoryStore())
    harness = Harness(server, channel)
    try:
        async with admin(server) as client:
            empty = (await client.get("/v1/console/conversations")).json()
            assert empty["enabled"] is True and empty["store"] == {"backend": "memory", "entries": 0, "errors": {}}
            assert empty["policy"] == {
                "enabled": True,
                "session_header": "x-session-id",
                "ttl_s": 86400,
                "not_sticky": ["private"],
            }
            assert empty["recent"] == []

            path = "/v1/responses"
            [first] = await harness.exchange(with_client(body_only_msg(responses("please analyse"), path=path)))
            answer = json.dumps({"id": "resp_secret_id", "object": "response", "output": []}).encode()
            await observe(harness, answer_chunks(decision_of(first)["conversation"], answer))
            await learned(harness, "response")
            await harness.exchange(with_client(body_only_msg(responses("and then?", "resp_secret_id"), path=path)))
            await harness.exchange(
                with_client(body_only_msg(responses("confidential: and then?", "resp_secret_id"), path=path))
            )

            data = (await client.get("/v1/console/conversations")).json()
        assert data["store"]["entries"] == 1
        assert data["lookups"] == {"followed": 1, "moved": 1, "new": 1}
        assert data["reasons"] == {"decision_not_sticky": 1, "no_key": 1}
        assert data["learned"] == {"response": 1}
        parts = [(r["decision"], r["model"], r["conversation"]) for r in data["recent"]]
        assert parts == [
            ("deep", "big", {"state": "new", "key": None, "remembered_model": None, "reason": "no_key"}),
            (
                "general",
                "big",
                {"state": "followed", "key": "previous_response", "remembered_model": "big", "reason": None},
            ),
            (
                "private",
                "general",
                {
                    "state": "moved",
                    "key": "previous_response",
                    "remembered_model": "big",
                    "reason": "decision_not_sticky",
                },
            ),
        ]
        assert "resp_secret_id" not in json.dumps(data)  # names only: never an id, a key or a session
    finally:
        await channel.close()
        await server.stop()


async def test_conversations_panel_when_the_server_keeps_none(tmp_path: Path) -> None:
    settings = console_settings(tmp_path)
    settings.conversations.enabled = False
    async with serving(settings) as (server, _), admin(server) as client:
        data = (await client.get("/v1/console/conversations")).json()
    assert data["enabled"] is False and data["store"] is None and "settings" in data["reason"]
    assert data["policy"]["enabled"] is True  # the policy would keep them; the server does not


async def test_explain_says_whether_a_conversation_would_be_kept(tmp_path: Path) -> None:
    async with serving(console_settings(tmp_path)) as (server, _), admin(server) as client:
        body = {"model": "auto", "input": "hello", "previous_response_id": "resp_1"}
        part = (await client.post("/v1/explain", json=body)).json()["conversation"]
        assert part == {
            "state": "not_looked_up",
            "reason": "explain has no tenant",
            "key": "previous_response",
            "session_header": None,
            "sticky": True,
            "learns": True,
            "ttl_s": 86400,
            "store": "memory",  # the server's settings keep conversations in this process
        }
        rejected = (await client.post("/v1/explain", content=chat("jailbreak please"))).json()
        assert rejected["conversation"] is None  # not routed: no conversation to keep


async def test_fleet_panel_shows_each_routes_selection_and_each_models_observations(tmp_path: Path) -> None:
    async with serving(console_settings(tmp_path)) as (server, _), admin(server) as client:
        router = server.live_router
        assert router is not None and server.fleet is not None
        model = router.policy.spec.models[0].name
        server.fleet.fleet.observe(model, failed=False, latency_s=0.042)
        fleet = (await client.get("/v1/console/fleet")).json()
        assert fleet["routes"][router.policy.spec.default.name]["algorithm"] == "ordered"
        assert fleet["models"][model]["latency_ms"] == 42.0 and fleet["models"][model]["requests"] == 1
        metrics = (await client.get("/metrics")).text
        assert f'vsr_model_latency_ms{{model="{model}"}} 42.0' in metrics
