"""next_needed's cursor: a dispatch round may start at the decision the previous round stopped at,
because the decisions before it stay false or out of reach as results arrive. Checked against
the walk from the top on random orders and outcomes of the signals."""

from __future__ import annotations

import random
from collections.abc import Callable

from extproc.policy.engine import next_needed
from extproc.policy.load import PolicyError
from extproc.router import Router
from extproc.signals.base import SignalResult, SignalStatus

NAMES = [f"s{i}" for i in range(8)]
DECISIONS = 6


def _random_condition(rng: random.Random, names: list[str], depth: int = 0) -> str:
    if depth >= 2 or rng.random() < 0.4:
        leaf = f"{{signal: {rng.choice(names)}}}"
        return f"{{not: {leaf}}}" if rng.random() < 0.15 else leaf
    kind = rng.choice(["all", "any"])
    children = ", ".join(_random_condition(rng, names, depth + 1) for _ in range(rng.randint(2, 3)))
    return f"{{{kind}: [{children}]}}"


def _policy(rng: random.Random) -> str:
    """Each decision: its own anchor signal and a random condition over the others (so that few
    decisions are shadowed by a higher one, which the loader refuses)."""
    signals = "".join(f"  - {{name: {n}, type: fake, on_error: {rng.choice(['no_match', 'match'])}}}\n" for n in NAMES)
    decisions = ""
    for i in range(DECISIONS):
        others = [n for n in NAMES if n != NAMES[i]]
        when = f"{{all: [{{signal: {NAMES[i]}}}, {_random_condition(rng, others)}]}}"
        decisions += (
            f"  - {{name: d{i}, priority: {100 - i}, when: {when}, action: {{type: route, models: [big-text]}}}}\n"
        )
    default = "  name: general\n  action: {type: route, models: [vlm]}\n"
    return f"signal_timeout_ms: 200\nsignals:\n{signals}decisions:\n{decisions}default:\n{default}"


def _router(make_router: Callable[..., Router], rng: random.Random) -> Router:
    """A router on a random policy the loader accepts (it refuses decisions that can never be reached)."""
    for _ in range(200):
        try:
            router: Router = make_router(_policy(rng))
            return router
        except PolicyError:
            continue
    raise AssertionError("no random policy compiled")


def _result(rng: random.Random, name: str) -> SignalResult:
    status = rng.choice(
        [
            SignalStatus.MATCHED,
            SignalStatus.NOT_MATCHED,
            SignalStatus.NOT_MATCHED,
            SignalStatus.TIMEOUT,
            SignalStatus.ERROR,
        ]
    )
    return SignalResult(name=name, type="fake", status=status, score=1.0 if status is SignalStatus.MATCHED else 0.0)


def _rounds(router: Router, rng: random.Random, skip_one_more: bool = False) -> list[tuple[list[str], list[str]]]:
    """(from the cursor, from the top) at each round of one request whose signals answer in a random order."""
    policy = router.policy
    order = list(NAMES)
    rng.shuffle(order)
    results: dict[str, SignalResult] = {}
    pairs = []
    cursor = 0
    for name in order:
        results[name] = _result(rng, name)
        needed, index = next_needed(policy, results, cursor)
        pairs.append((needed, next_needed(policy, results)[0]))
        cursor = index + 1 if skip_one_more and needed else index
    return pairs


def test_a_round_started_at_the_cursor_asks_for_what_the_walk_from_the_top_asks(
    make_router: Callable[..., Router],
) -> None:
    rng = random.Random(43)
    compared = asked = 0
    for _ in range(30):
        router = _router(make_router, rng)
        for _ in range(10):
            for from_cursor, from_top in _rounds(router, rng):
                assert from_cursor == from_top
                compared += 1
                asked += bool(from_top)
    assert compared == 30 * 10 * len(NAMES) and asked > compared // 10  # the rounds did ask for signals


def test_the_check_catches_a_cursor_that_skips_an_undecided_decision(make_router: Callable[..., Router]) -> None:
    rng = random.Random(43)
    differences = 0
    for _ in range(30):
        router = _router(make_router, rng)
        for _ in range(10):
            differences += sum(a != b for a, b in _rounds(router, rng, skip_one_more=True))
    assert differences > 0
