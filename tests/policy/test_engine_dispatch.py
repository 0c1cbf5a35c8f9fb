"""The decision engine and dispatcher, driven through the Router with controllable signals."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from extproc.policy.conditions import Tri
from extproc.router import Router
from extproc.server import wire
from extproc.settings import Settings
from extproc.signals.base import SignalStatus


def chat(text: str = "hello", **extra: object) -> bytes:
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}], **extra}).encode()


def policy(signals: str, decisions: str, default: str = "{type: route, models: [text-model, vlm]}") -> str:
    return f"signal_timeout_ms: 200\nsignals:\n{signals}\ndecisions:\n{decisions}\ndefault:\n  name: general\n  action: {default}\n"


TWO = policy(
    "  - {name: hi, type: fake}\n  - {name: lo, type: fake}\n",
    "  - {name: high, priority: 20, when: {signal: hi}, action: {type: route, models: [big-text]}}\n"
    "  - {name: low, priority: 10, when: {signal: lo}, action: {type: route, models: [vlm]}}\n",
)


async def test_highest_priority_match_wins_and_trace_covers_every_decision(make_router: Callable[..., Router]) -> None:
    router = make_router(TWO)
    outcome = await router.route(chat())
    assert (outcome.action, outcome.decision, outcome.model.name if outcome.model else None) == (
        "route",
        "high",
        "big-text",
    )
    # `lo` only matters to a lower decision, so lazy dispatch never ran it: unknown, not false.
    assert [(t.name, t.value) for t in outcome.trace] == [
        ("high", Tri.TRUE),
        ("low", Tri.UNKNOWN),
        ("general", Tri.FALSE),
    ]
    assert outcome.matched_signals() == ["hi"]
    assert any("not run: lo" in note for note in outcome.notes)


async def test_lazy_dispatch_runs_only_what_the_undecided_decision_needs(make_router: Callable[..., Router]) -> None:
    body = policy(
        "  - {name: cheap_gate, type: fake_inline, behaviour: no_match}\n"
        "  - {name: expensive, type: fake, behaviour: raise}\n"
        "  - {name: second, type: fake}\n",
        "  - {name: gated, priority: 3, when: {all: [{signal: cheap_gate}, {signal: expensive}]}, action: {type: route, models: [big-text]}}\n"
        "  - {name: after, priority: 2, when: {signal: second}, action: {type: route, models: [vlm]}}\n",
    )
    outcome = await make_router(body).route(chat())
    ran = {s.name for s in outcome.signals}
    # the gate is false, so `gated` is false whatever `expensive` says: it never runs
    assert ran == {"cheap_gate", "second"}
    assert outcome.decision == "after"


async def test_image_only_signals_answer_no_for_text_requests_without_running(
    chat_with_images: Callable[..., dict[str, object]],
    data_uri: Callable[..., str],
    image_bytes: Callable[..., bytes],
    make_router: Callable[..., Router],
) -> None:
    body = policy(
        "  - {name: vision, type: fake_image, behaviour: unavailable, labels: {passport: 1.0, vehicle: 1.0}}\n",
        "  - {name: pictures, priority: 1, when: {signal: vision}, action: {type: route, models: [vlm]}}\n",
    )
    router = make_router(body)
    text_only = await router.route(chat())
    assert text_only.signals[0].status is SignalStatus.NOT_MATCHED and text_only.decision == "general"
    with_image = await router.route(json.dumps(chat_with_images(data_uri(image_bytes()))).encode())
    assert with_image.signals[0].status is SignalStatus.UNAVAILABLE


async def test_default_when_nothing_matches_and_first_failed_leaf_is_named(make_router: Callable[..., Router]) -> None:
    router = make_router(
        TWO.replace("{name: hi, type: fake}", "{name: hi, type: fake, behaviour: no_match}").replace(
            "{name: lo, type: fake}", "{name: lo, type: fake, behaviour: no_match}"
        )
    )
    outcome = await router.route(chat())
    assert outcome.decision == "general" and outcome.model is not None and outcome.model.name == "text-model"
    assert outcome.trace[0].blame == "hi" and outcome.trace[0].value is Tri.FALSE


async def test_capability_fallback_skips_text_only_models_for_images(
    chat_with_images: Callable[..., dict[str, object]],
    data_uri: Callable[..., str],
    image_bytes: Callable[..., bytes],
    make_router: Callable[..., Router],
) -> None:
    router = make_router(
        TWO.replace("behaviour", "x")
        if False
        else policy(
            "  - {name: x, type: fake, behaviour: no_match}\n",
            "  - {name: never, priority: 1, when: {signal: x}, action: {type: route, models: [big-text]}}\n",
        )
    )
    outcome = await router.route(json.dumps(chat_with_images(data_uri(image_bytes()))).encode())
    assert outcome.model is not None and outcome.model.name == "vlm"
    assert any("text-only" in n for n in outcome.notes)


async def test_no_capable_model_is_a_clear_400(
    chat_with_images: Callable[..., dict[str, object]],
    data_uri: Callable[..., str],
    image_bytes: Callable[..., bytes],
    make_router: Callable[..., Router],
) -> None:
    router = make_router(
        policy(
            "  - {name: any_request, type: fake}\n",
            "  - {name: text_only, priority: 1, when: {signal: any_request}, action: {type: route, models: [text-model, big-text]}}\n",
        )
    )
    outcome = await router.route(json.dumps(chat_with_images(data_uri(image_bytes()))).encode())
    assert outcome.action == "error" and outcome.status == 400
    reply = wire.immediate_response(outcome)
    error = json.loads(reply.body)["error"]
    assert reply.status == 400 and error["code"] == "no_capable_model"
    assert "text_only" in error["message"] and "text-model" in error["message"]


async def test_context_window_is_respected(make_router: Callable[..., Router]) -> None:
    router = make_router(
        policy(
            "  - {name: x, type: fake, behaviour: no_match}\n",
            "  - {name: never, priority: 1, when: {signal: x}, action: {type: route, models: [vlm]}}\n",
            default="{type: route, models: [text-model, big-text]}",
        )
    )
    outcome = await router.route(chat("word " * 400))  # ~500 tokens > text-model's 100
    assert outcome.model is not None and outcome.model.name == "big-text"
    assert any("window" in n for n in outcome.notes)


async def test_slow_signal_times_out_and_is_unknown_not_false(make_router: Callable[..., Router]) -> None:
    router = make_router(
        policy(
            "  - {name: slow, type: fake, delay_ms: 5000}\n  - {name: fast, type: fake}\n",
            "  - {name: not_slow, priority: 2, when: {all: [{signal: fast}, {not: {signal: slow}}]}, action: {type: route, models: [big-text]}}\n",
        )
    )
    outcome = await router.route(chat())
    slow = next(s for s in outcome.signals if s.name == "slow")
    assert slow.status is SignalStatus.TIMEOUT and not slow.known
    # `not unknown` is unknown, so the decision does not fire on the slow signal's account.
    assert outcome.decision == "general"
    assert outcome.trace[0].value is Tri.UNKNOWN and outcome.trace[0].blame == "slow"


async def test_failing_signal_is_an_error_result_and_routing_fails_open(make_router: Callable[..., Router]) -> None:
    router = make_router(
        policy(
            "  - {name: broken, type: fake, behaviour: raise}\n",
            "  - {name: needs_broken, priority: 1, when: {signal: broken}, action: {type: route, models: [big-text]}}\n",
        )
    )
    outcome = await router.route(chat())
    broken = outcome.signals[0]
    assert broken.status is SignalStatus.ERROR and "fake signal failure" in (broken.error or "")
    assert outcome.decision == "general"


async def test_safety_signal_fails_closed_by_default(make_router: Callable[..., Router]) -> None:
    router = make_router(
        policy(
            "  - {name: guard, type: fake_safety, behaviour: raise}\n",
            "  - {name: blocked, priority: 1, when: {signal: guard}, action: {type: reject, status: 403, message: denied}}\n",
        )
    )
    outcome = await router.route(chat())
    assert outcome.action == "reject" and outcome.status == 403 and outcome.decision == "blocked"


async def test_on_error_match_and_no_match_override_family_defaults(make_router: Callable[..., Router]) -> None:
    open_guard = policy(
        "  - {name: guard, type: fake_safety, behaviour: unavailable, on_error: no_match}\n",
        "  - {name: blocked, priority: 1, when: {signal: guard}, action: {type: reject, status: 403, message: denied}}\n",
    )
    assert (await make_router(open_guard).route(chat())).decision == "general"
    closed = policy(
        "  - {name: router_sig, type: fake, behaviour: unavailable, on_error: match}\n",
        "  - {name: picked, priority: 1, when: {signal: router_sig}, action: {type: route, models: [big-text]}}\n",
    )
    outcome = await make_router(closed).route(chat())
    assert outcome.decision == "picked"
    assert outcome.signals[0].status is SignalStatus.UNAVAILABLE


async def test_on_error_reject_rejects_the_request(make_router: Callable[..., Router]) -> None:
    body = policy(
        "  - {name: must, type: fake, behaviour: hang, on_error: reject}\n",
        "  - {name: d, priority: 1, when: {signal: must}, action: {type: route, models: [big-text]}}\n",
    )
    outcome = await make_router(body).route(chat())
    assert outcome.action == "reject" and outcome.status == 503
    assert "must" in (outcome.message or "") and "timeout" in (outcome.message or "")
    assert json.loads(wire.immediate_response(outcome).body)["error"]["code"] == "signal_unavailable"


async def test_request_deadline_bounds_all_signals(make_router: Callable[..., Router]) -> None:
    settings = Settings.load(None, environ={"VSR_DISPATCH__REQUEST_DEADLINE_MS": "50"})
    body = policy(
        "  - {name: a, type: fake, behaviour: hang, timeout_ms: 100000}\n  - {name: b, type: fake, behaviour: hang, timeout_ms: 100000}\n",
        "  - {name: d, priority: 1, when: {any: [{signal: a}, {signal: b}]}, action: {type: route, models: [big-text]}}\n",
    )
    outcome = await asyncio.wait_for(make_router(body, settings).route(chat()), timeout=30)
    assert {s.status for s in outcome.signals} == {SignalStatus.TIMEOUT}
    assert outcome.decision == "general"


async def test_signals_run_concurrently(make_router: Callable[..., Router]) -> None:
    # Each rendezvous signal waits until the other has started: sequential dispatch would time out.
    body = policy(
        "  - {name: r1, type: rendezvous, group: g1}\n  - {name: r2, type: rendezvous, group: g1}\n",
        "  - {name: both, priority: 1, when: {all: [{signal: r1}, {signal: r2}]}, action: {type: route, models: [big-text]}}\n",
    )
    outcome = await make_router(body).route(chat())
    assert [s.status for s in outcome.signals] == [SignalStatus.MATCHED, SignalStatus.MATCHED]
    assert outcome.decision == "both"


async def test_label_leaves_and_min_score(make_router: Callable[..., Router]) -> None:
    body = policy(
        "  - {name: img, type: fake, labels: {passport: 0.8, xray: 0.3}}\n",
        "  - {name: passport, priority: 3, when: {signal: img, label: passport, min_score: 0.9}, action: {type: route, models: [big-text]}}\n"
        "  - {name: xray, priority: 2, when: {signal: img, label: xray}, action: {type: route, models: [vlm]}}\n",
    )
    outcome = await make_router(body).route(chat())
    assert outcome.decision == "xray"
    assert outcome.trace[0].blame == "img[passport]>=0.9"


async def test_client_model_is_honoured_only_when_no_rule_fires(make_router: Callable[..., Router]) -> None:
    body = "client_models: [big-text]\n" + TWO.replace(
        "{name: lo, type: fake}", "{name: lo, type: fake, behaviour: no_match}"
    )
    router = make_router(body)
    fired = await router.route(
        chat(model="big-text")
        if False
        else json.dumps({"model": "vlm", "messages": [{"role": "user", "content": "x"}]}).encode()
    )
    assert fired.decision == "high"
    quiet = make_router(body.replace("{name: hi, type: fake}", "{name: hi, type: fake, behaviour: no_match}"))
    picked = await quiet.route(
        json.dumps({"model": "big-text", "messages": [{"role": "user", "content": "x"}]}).encode()
    )
    assert picked.decision == "general" and picked.model is not None and picked.model.name == "big-text"
    refused = await quiet.route(json.dumps({"model": "vlm", "messages": [{"role": "user", "content": "x"}]}).encode())
    assert refused.model is not None and refused.model.name == "text-model"
    assert any("not selectable" in n for n in refused.notes)


async def test_malformed_request_becomes_an_error_outcome(make_router: Callable[..., Router]) -> None:
    outcome = await make_router(TWO).route(b"{oops")
    assert outcome.action == "error" and outcome.status == 400 and outcome.request is None
    body = json.loads(wire.immediate_response(outcome).body)
    assert body["error"]["code"] == "invalid_json"


async def test_corrupt_image_found_by_a_signal_is_a_request_error(
    chat_with_images: Callable[..., dict[str, object]],
    data_uri: Callable[..., str],
    image_bytes: Callable[..., bytes],
    make_router: Callable[..., Router],
) -> None:
    from extproc.signals.base import Evaluation, Signal, SignalContext

    class PixelReader(Signal):
        async def evaluate(self, request, ctx: SignalContext) -> Evaluation:  # type: ignore[no-untyped-def]
            for image in request.images:
                image.pixels()
            return Evaluation(matched=True)

    router = make_router(TWO)
    router.policy.signals["hi"] = PixelReader(router.policy.signals["hi"].spec)
    data = image_bytes(size=(64, 64))
    outcome = await router.route(json.dumps(chat_with_images(data_uri(data[:-40]))).encode())
    assert outcome.action == "error" and outcome.status == 422


@pytest.mark.parametrize("stream", [False, True])
async def test_clarify_is_an_assistant_reply(stream: bool, make_router: Callable[..., Router]) -> None:
    body = policy(
        "  - {name: ask, type: fake}\n",
        "  - {name: clarify_it, priority: 1, when: {signal: ask}, action: {type: clarify, message: 'Which one?'}}\n",
    )
    outcome = await make_router(body).route(chat(stream=stream))
    reply = wire.immediate_response(outcome)
    assert reply.status == 200 and reply.headers["x-vsr-decision"] == "clarify_it"
    if stream:
        assert reply.headers["content-type"] == "text/event-stream"
        events = [line[6:] for line in reply.body.decode().splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        text = "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1])
        assert text == "Which one?"
    else:
        data = json.loads(reply.body)
        assert data["object"] == "chat.completion" and data["choices"][0]["message"]["content"] == "Which one?"


async def test_overload_does_not_pile_up_abandoned_work_on_the_executor(
    executor_work_started: list[float], make_router: Callable[..., Router]
) -> None:
    """Requests that gave up at their deadline take their queued heavy jobs with them, so a
    burst cannot leave the one executor busy with work nobody waits for any more."""
    settings = Settings.load(None, environ={"VSR_DISPATCH__REQUEST_DEADLINE_MS": "300"})
    body = policy(
        "  - {name: heavy, type: executor_work, work_ms: 100, timeout_ms: 10000}\n",
        "  - {name: d, priority: 1, when: {signal: heavy}, action: {type: route, models: [big-text]}}\n",
    )
    router = make_router(body, settings)
    outcomes = await asyncio.gather(*(router.route(chat(f"request {i}")) for i in range(20)))
    statuses = [o.signals[0].status for o in outcomes]
    assert statuses.count(SignalStatus.TIMEOUT) >= 10  # 20 x 100 ms of work cannot fit in 300 ms
    await asyncio.sleep(0.3)  # let the job that was running when the deadline passed finish
    ran = len(executor_work_started)
    assert ran < 10, f"{ran} jobs ran: abandoned jobs were not cancelled"
    late = await router.route(chat("after the burst"))
    assert late.signals[0].status is SignalStatus.MATCHED  # the executor is free again at once
    router.close()


async def test_cheaper_heavy_signals_run_first_and_can_spare_the_costly_ones(
    make_router: Callable[..., Router],
) -> None:
    body = policy(
        "  - {name: vision, type: fake, labels: {passport: 0.9}}\n"
        "  - {name: ocr, type: fake_ocr}\n"
        "  - {name: other_vision, type: fake, behaviour: no_match}\n",
        "  - {name: identity, priority: 2, when: {any: [{signal: ocr}, {signal: vision, label: passport}]}, action: {type: route, models: [vlm]}}\n"
        "  - {name: other, priority: 1, when: {signal: other_vision}, action: {type: route, models: [big-text]}}\n",
    )
    outcome = await make_router(body).route(chat())
    assert outcome.decision == "identity"
    assert {s.name for s in outcome.signals} == {"vision"}  # the vision label settled it: no OCR
    gated = await make_router(body.replace("labels: {passport: 0.9}", "behaviour: no_match")).route(chat())
    # vision said no, so OCR ran for `identity` and settled it; `other` was never needed
    assert {s.name for s in gated.signals} == {"vision", "ocr"}
    assert gated.decision == "identity"


NEVER_WINS = policy(
    "  - {name: vision, type: fake_image, behaviour: unavailable, labels: {passport: 1.0, vehicle: 1.0}}\n"
    "  - {name: costly, type: fake, behaviour: no_match}\n"
    "  - {name: second, type: fake}\n",
    "  - {name: pictures, priority: 4, when: {signal: vision, label: passport}, action: {type: route, models: [vlm]}}\n"
    "  - {name: blocked, priority: 3, when: {all: [{signal: costly}, {signal: vision, label: vehicle}]}, action: {type: route, models: [vlm]}}\n"
    "  - {name: after, priority: 2, when: {signal: second}, action: {type: route, models: [vlm]}}\n",
)


async def test_a_decision_no_pending_signal_can_make_true_does_not_run_them(
    chat_with_images: Callable[..., dict[str, object]],
    data_uri: Callable[..., str],
    image_bytes: Callable[..., bytes],
    make_router: Callable[..., Router],
) -> None:
    """`blocked` also needs `vision`, which could not run: it can never win, so `costly` is not run
    for it (as the default policy's out_of_domain_image skips its MiniLM signal without a vision model)."""
    image_request = json.dumps(chat_with_images(data_uri(image_bytes()))).encode()
    outcome = await make_router(NEVER_WINS).route(image_request)
    assert {s.name for s in outcome.signals} == {"vision", "second"}
    assert outcome.decision == "after"
    assert [(t.name, t.value) for t in outcome.trace][:2] == [("pictures", Tri.UNKNOWN), ("blocked", Tri.UNKNOWN)]
    # ...while a decision the pending signal can still make true runs it.
    either = NEVER_WINS.replace(
        "{all: [{signal: costly}, {signal: vision, label: vehicle}]}",
        "{any: [{signal: costly}, {signal: vision, label: vehicle}]}",
    )
    outcome = await make_router(either).route(image_request)
    assert "costly" in {s.name for s in outcome.signals}


async def test_a_timed_out_signal_does_not_count_as_undecided_for_good(
    chat_with_images: Callable[..., dict[str, object]],
    data_uri: Callable[..., str],
    image_bytes: Callable[..., bytes],
    make_router: Callable[..., Router],
) -> None:
    """Had `vision` answered, `blocked` might have matched: `costly` still runs and settles it as
    false, so the request routes instead of being shed for a decision left open by the timeout."""
    body = NEVER_WINS.replace("behaviour: unavailable", "behaviour: hang")
    outcome = await make_router(body).route(json.dumps(chat_with_images(data_uri(image_bytes()))).encode())
    statuses = {s.name: s.status for s in outcome.signals}
    assert statuses["vision"] is SignalStatus.TIMEOUT and "costly" in statuses
    assert outcome.decision == "after" and outcome.status == 200
