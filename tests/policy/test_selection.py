"""Model selection: the schema (`selection: NAME` or a mapping), each algorithm over a fleet view,
cooldowns, stale data falling back to order, capability first, and the engine's use of it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest

from extproc.fleet.state import Fleet
from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.policy.load import PolicyError, compile_text
from extproc.policy.schema import ModelSpec
from extproc.policy.selection import ModelState, failover_cluster, select
from extproc.policy.selection_schema import SelectionSpec
from extproc.router import Router
from extproc.server import wire
from extproc.settings import Settings
from extproc.signals.base import BuildContext

A = ModelSpec(name="a", cluster="ca", cost={"input_per_million": 3.0, "output_per_million": 15.0})
B = ModelSpec(name="b", cluster="cb", cost={"input_per_million": 0.5, "output_per_million": 1.5})
C = ModelSpec(name="c", cluster="cc")


class View:
    """A fixed fleet view; `draws` are the random numbers it hands out, in turn."""

    def __init__(self, states: dict[str, ModelState], draws: list[float] | None = None) -> None:
        self.states = states
        self.draws = list(draws or [0.99])

    def state(self, model: str) -> ModelState:
        return self.states.get(model, ModelState())

    def draw(self) -> float:
        return self.draws.pop(0) if len(self.draws) > 1 else self.draws[0]


def spec(**kwargs: object) -> SelectionSpec:
    return SelectionSpec.model_validate(kwargs)


def test_a_name_is_short_for_the_mapping_and_weights_are_checked() -> None:
    assert SelectionSpec.model_validate("latency") == SelectionSpec(algorithm="latency")
    with pytest.raises(ValueError, match="weighted needs"):
        SelectionSpec.model_validate("weighted")
    with pytest.raises(ValueError, match="read only by `weighted`"):
        SelectionSpec.model_validate({"algorithm": "latency", "weights": {"a": 1}})
    with pytest.raises(ValueError, match="positive total"):
        SelectionSpec.model_validate({"algorithm": "weighted", "weights": {"a": 0}})


def test_latency_picks_the_faster_after_warm_up_and_says_why() -> None:
    warm = View({"a": ModelState(latency_ms=420.0, samples=2.0), "b": ModelState(latency_ms=120.0, samples=9.0)})
    chosen = select([A, B], spec(algorithm="latency", explore=0.0), warm)
    assert (chosen.model.name, chosen.reason) == ("a", "latency:a warm-up")
    both = View({"a": ModelState(latency_ms=420.0, samples=9.0), "b": ModelState(latency_ms=120.0, samples=9.0)})
    chosen = select([A, B], spec(algorithm="latency", explore=0.0), both)
    assert (chosen.model.name, chosen.reason) == ("b", "latency:b 120ms<420ms")
    # exploration: a draw under `explore` sends this request to another candidate
    explored = select([A, B], spec(algorithm="latency", explore=0.1), View(both.states, [0.05, 0.0]))
    assert explored.model.name == "a" and "explore" in explored.reason


def test_least_loaded_reads_waiting_before_running_and_falls_back_when_stale() -> None:
    fresh = View(
        {
            "a": ModelState(running=2.0, waiting=10.0, load_age_s=1.0),
            "b": ModelState(running=20.0, waiting=0.0, load_age_s=1.0),
        }
    )
    chosen = select([A, B], spec(algorithm="least_loaded"), fresh)
    assert chosen.model.name == "b" and chosen.reason == "least_loaded:b load=20<42"
    stale = View({m: ModelState(running=0.0, waiting=0.0, load_age_s=60.0) for m in ("a", "b")})
    chosen = select([B, A], spec(algorithm="least_loaded", stale_after_s=15), stale)
    assert chosen.model.name == "b" and chosen.reason.endswith("load-stale->ordered")


def test_cost_uses_the_request_size_and_unpriced_models_go_last() -> None:
    chosen = select([A, B, C], spec(algorithm="cost"), View({}), input_tokens=1000, max_output_tokens=100)
    assert chosen.model.name == "b"  # 1000*0.5 + 100*1.5 < 1000*3 + 100*15
    assert select([C], spec(algorithm="cost"), View({})).model.name == "c"
    assert select([C, C.model_copy(update={"name": "d"})], spec(algorithm="cost"), View({})).reason.endswith(
        "unpriced->ordered"
    )


def test_weighted_shares_follow_the_weights() -> None:
    rule = spec(algorithm="weighted", weights={"a": 80, "b": 20})
    view = View({}, [i / 1000 for i in range(1000)] + [0.0])
    counts = Counter(select([A, B], rule, view).model.name for _ in range(1000))
    assert counts == {"a": 800, "b": 200}


def test_cooling_models_are_skipped_unless_all_are() -> None:
    view = View({"a": ModelState(cooling_s=10.0)})
    chosen = select([A, B], spec(algorithm="ordered", failover=True), view)
    assert chosen.model.name == "b" and "skipped:a" in chosen.reason
    every = View({"a": ModelState(cooling_s=10.0), "b": ModelState(cooling_s=3.0)})
    assert select([A, B], spec(algorithm="latency"), every).reason.endswith("all-cooling")


def test_failover_names_the_aggregate_of_the_chosen_and_the_next() -> None:
    chosen = select([A, B], spec(algorithm="ordered", failover=True), View({}))
    assert chosen.cluster == failover_cluster("ca", "cb") and chosen.fallback is B
    assert select([A, B], spec(algorithm="ordered"), View({})).cluster == "ca"


# -- the fleet: decay, cooldown, recovery ----------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_fleet_latency_decays_and_cooldown_recovers() -> None:
    clock = Clock()
    fleet = Fleet(half_life_s=10.0, cooldown_after=2, cooldown_s=5.0, clock=clock, wall_clock=clock)
    for _ in range(4):
        fleet.observe("a", failed=False, latency_s=0.1)
    state = fleet.state("a")
    assert state.latency_ms == pytest.approx(100.0) and state.samples == pytest.approx(4.0)
    clock.now += 20.0  # two half-lives: the estimate fades under any min_samples >= 2
    assert fleet.state("a").samples == pytest.approx(1.0)
    fleet.observe("a", failed=True, latency_s=None)
    assert fleet.state("a").cooling_s == 0.0  # one failure is not enough
    fleet.observe("a", failed=True, latency_s=None)
    assert fleet.state("a").cooling_s == pytest.approx(5.0)
    clock.now += 6.0
    assert fleet.state("a").cooling_s == 0.0  # tried again after the cooldown
    fleet.observe("a", failed=True, latency_s=None)
    assert fleet.state("a").cooling_s == pytest.approx(5.0)  # one more failure cools it again
    clock.now += 6.0
    fleet.observe("a", failed=False, latency_s=0.05)
    assert fleet.state("a").cooling_s == 0.0 and fleet.records["a"].failures_in_row == 0
    assert fleet.snapshot(["a"])["a"]["cooldowns"] == 2


# -- the engine: capability first, selection's notes and explain --------------------------------

POLICY = """
version: 1
models:
  - {name: text-a, cluster: ta}
  - {name: vlm-b, cluster: vb, modalities: [text, image]}
  - {name: text-c, cluster: tc}
decisions: []
default:
  action:
    type: route
    models: [text-a, vlm-b, text-c]
    selection: {algorithm: latency, explore: 0}
"""


@pytest.fixture(scope="module")
def router() -> Iterator[Router]:
    settings = Settings.load(None, environ={})
    executor = HeavyExecutor(1, None)
    ctx = BuildContext(settings=settings, executor=executor, models=ModelRegistry())
    routing = Router(settings, compile_text(POLICY, ctx), executor=executor, models=ctx.models)
    yield routing
    routing.close()


PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def test_capability_comes_before_selection(router: Router) -> None:
    fleet = Fleet(rng=lambda: 0.5)
    for _ in range(5):
        fleet.observe("text-a", failed=False, latency_s=0.01)
        fleet.observe("vlm-b", failed=False, latency_s=0.5)
        fleet.observe("text-c", failed=False, latency_s=0.02)
    router.fleet = fleet
    try:
        text = await router.route(
            json.dumps({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}).encode()
        )
        assert text.model is not None and text.model.name == "text-a"
        assert text.selection_header == "latency:text-a 10ms<20ms"
        image = {"type": "image_url", "image_url": {"url": PIXEL}}
        body = {"model": "auto", "messages": [{"role": "user", "content": [{"type": "text", "text": "what?"}, image]}]}
        routed = await router.route(json.dumps(body).encode())
        assert routed.model is not None and routed.model.name == "vlm-b"  # the only one that takes images
        assert routed.to_dict()["selection"]["reason"] == "latency:vlm-b"
    finally:
        router.fleet = None


def test_weights_must_name_the_route_models() -> None:
    settings = Settings.load(None, environ={})
    ctx = BuildContext(settings=settings, executor=HeavyExecutor(1, None), models=ModelRegistry())
    bad = POLICY.replace("{algorithm: latency, explore: 0}", "{algorithm: weighted, weights: {text-z: 1}}")
    with pytest.raises(PolicyError, match="text-z"):
        compile_text(bad, ctx)


# -- model names the policy does not know ---------------------------------------------------------


def _router_for(policy_text: str) -> Router:
    settings = Settings.load(None, environ={})
    executor = HeavyExecutor(1, None)
    ctx = BuildContext(settings=settings, executor=executor, models=ModelRegistry())
    return Router(settings, compile_text(policy_text, ctx), executor=executor, models=ctx.models)


async def test_an_unknown_model_is_404_model_not_found_in_the_apis_shape_by_default() -> None:
    router = _router_for(POLICY)
    try:
        chat = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()
        outcome = await router.route(chat)
        reply = wire.immediate_response(outcome)
        assert (reply.status, json.loads(reply.body)["error"]["code"]) == (404, "model_not_found")
        messages = json.dumps({"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
        outcome = await router.route(messages.encode(), path="/v1/messages")
        body = json.loads(wire.immediate_response(outcome).body)
        assert outcome.status == 404 and body["type"] == "error" and body["error"]["type"] == "not_found_error"
        # a policy model's name is known, even when clients may not pick it: routed by the policy
        known = await router.route(chat.replace(b"gpt-4o", b"text-c"))
        assert known.action == "route" and any("not selectable" in n for n in known.notes)
    finally:
        router.close()


async def test_unknown_models_may_be_routed_as_auto_or_with_a_header() -> None:
    for mode, header in (("auto", None), ("header", "gpt-4o??")):
        router = _router_for(f"unknown_models: {mode}\n" + POLICY)
        try:
            body = json.dumps({"model": "gpt-4o\r\n", "messages": [{"role": "user", "content": "hi"}]}).encode()
            outcome = await router.route(body)
            assert outcome.action == "route"
            assert wire.client_headers(outcome).get("x-vsr-unknown-model") == header
        finally:
            router.close()
