"""Model selection: which of a route's capable candidates serves the request, and why.

Pure: the fleet's state comes in through `FleetView` (what the router observed and scraped,
`extproc.fleet`), so the engine, explain and replay call the same function. Capability filtering
comes first (the engine's); then models cooling down after failures are set aside (unless all
are); then the route's algorithm picks:

- `ordered`: the first (the behaviour before selection existed, and the default);
- `weighted`: at random, in proportion to the route's weights;
- `least_loaded`: the fewest requests in flight at the server (waiting counts four times running,
  then KV-cache use), from each model's vLLM `/metrics`; stale or missing load -> ordered;
- `latency`: the lowest decayed time to the first answer byte the router observed; each
  candidate gets `min_samples` requests first (warm-up), and `explore` of the traffic goes to
  another candidate so a model that got faster or recovered is noticed;
- `cost`: the lowest estimated price of this request (input tokens, and max_tokens or the
  route's expected output, at the card's per-million prices); models without a price -> last.

The `reason` is what `x-vsr-selection` shows, e.g. `latency:general-b 41ms<120ms`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from extproc.policy.schema import ModelSpec
from extproc.policy.selection_schema import SelectionSpec

WAITING_WEIGHT = 4.0  # a queued request costs more than a running one: it has not started


@dataclass(frozen=True, slots=True)
class ModelState:
    """What the fleet knows of one model now; None fields: nothing known (or too old)."""

    cooling_s: float = 0.0  # seconds of cooldown left (0: not cooling down)
    latency_ms: float | None = None  # decayed time to the first answer byte
    samples: float = 0.0  # the decayed weight behind `latency_ms`
    running: float | None = None
    waiting: float | None = None
    kv_cache: float | None = None  # 0..1
    load_age_s: float | None = None  # how old the scraped load is (None: never scraped)


UNKNOWN = ModelState()


class FleetView(Protocol):
    def state(self, model: str) -> ModelState: ...

    def draw(self) -> float:
        """A uniform random number in [0, 1) (weighted shares, exploration); tests fix it."""
        ...


FAILOVER_JOIN = "__or__"


def failover_cluster(primary: str, fallback: str) -> str:
    """The aggregate cluster Envoy renders for `primary` failing over to `fallback` (ops.envoy_config)."""
    return f"{primary}{FAILOVER_JOIN}{fallback}"


@dataclass(frozen=True, slots=True)
class Selected:
    model: ModelSpec
    algorithm: str
    reason: str  # the x-vsr-selection value
    fallback: ModelSpec | None = None  # the next capable candidate (Envoy's failover target)
    failover: bool = False  # the route asks Envoy to fail over to `fallback`

    @property
    def cluster(self) -> str:
        """Where Envoy sends it: the model's cluster, or the failover aggregate over it and the fallback's."""
        if self.failover and self.fallback is not None:
            return failover_cluster(self.model.cluster, self.fallback.cluster)
        return self.model.cluster

    @property
    def shown(self) -> bool:
        """Whether the client is told (x-vsr-selection): routes that select, or fail over."""
        return self.algorithm != "ordered" or self.failover

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "model": self.model.name,
            "reason": self.reason,
            "cluster": self.cluster,
            "fallback": self.fallback.name if self.fallback is not None else None,
        }


def select(
    candidates: Sequence[ModelSpec],
    spec: SelectionSpec,
    fleet: FleetView | None,
    *,
    input_tokens: int = 0,
    max_output_tokens: int | None = None,
) -> Selected:
    """The chosen candidate among `candidates` (capable ones, in the route's order; not empty)."""
    algorithm = spec.algorithm
    if fleet is None and algorithm == "cost" and len(candidates) > 1:  # prices need no fleet (explain, replay)
        chosen, why = _cost(candidates, spec, input_tokens, max_output_tokens)
        return Selected(chosen, algorithm, f"cost:{chosen.name}{why}", _next(candidates, chosen), spec.failover)
    if fleet is None or len(candidates) == 1:
        reason = f"{algorithm}:{candidates[0].name}"
        if fleet is None and algorithm != "ordered" and len(candidates) > 1:
            reason += " no-fleet->ordered"
        return Selected(candidates[0], algorithm, reason, _next(candidates, candidates[0]), spec.failover)
    states = {m.name: fleet.state(m.name) for m in candidates}
    available = [m for m in candidates if states[m.name].cooling_s <= 0.0]
    note = ""
    if not available:  # all failing: keep serving in order rather than refuse
        available, note = list(candidates), " all-cooling"
    elif len(available) < len(candidates):
        note = " skipped:" + ",".join(m.name for m in candidates if m not in available)
    if algorithm == "weighted":
        chosen, why = _weighted(available, spec, fleet.draw())
    elif algorithm == "least_loaded":
        chosen, why = _least_loaded(available, spec, states)
    elif algorithm == "latency":
        chosen, why = _latency(available, spec, states, fleet)
    elif algorithm == "cost":
        chosen, why = _cost(available, spec, input_tokens, max_output_tokens)
    else:
        chosen, why = available[0], ""
    fallback = _next([m for m in candidates if m in available] or list(candidates), chosen)
    return Selected(chosen, algorithm, f"{algorithm}:{chosen.name}{why}{note}", fallback, spec.failover)


def _next(candidates: Sequence[ModelSpec], chosen: ModelSpec) -> ModelSpec | None:
    """The first other candidate on another cluster: where Envoy fails over to."""
    return next((m for m in candidates if m is not chosen and m.cluster != chosen.cluster), None)


def _weighted(available: Sequence[ModelSpec], spec: SelectionSpec, draw: float) -> tuple[ModelSpec, str]:
    weights = [max(spec.weights.get(m.name, 0.0), 0.0) for m in available]
    total = sum(weights)
    if total <= 0.0:  # every weighted model is cooling down: the rest, in order
        return available[0], " no-weighted-candidate->ordered"
    point = draw * total
    for model, weight in zip(available, weights, strict=True):
        if point < weight:
            return model, f" {weight / total:.0%}"
        point -= weight
    last = max(range(len(available)), key=lambda i: (weights[i] > 0, i))
    return available[last], f" {weights[last] / total:.0%}"


def _least_loaded(
    available: Sequence[ModelSpec], spec: SelectionSpec, states: dict[str, ModelState]
) -> tuple[ModelSpec, str]:
    def fresh(state: ModelState) -> bool:
        return state.load_age_s is not None and state.load_age_s <= spec.stale_after_s and state.running is not None

    scored = [(m, states[m.name]) for m in available]
    known = [(m, s) for m, s in scored if fresh(s)]
    if not known:
        return available[0], " load-stale->ordered"

    def load(state: ModelState) -> tuple[float, float]:
        return ((state.running or 0.0) + WAITING_WEIGHT * (state.waiting or 0.0), state.kv_cache or 0.0)

    best, state = min(known, key=lambda pair: load(pair[1]))  # min keeps the earliest of equals
    others = [load(s)[0] for m, s in known if m is not best]
    tail = f"<{min(others):g}" if others else ""
    stale = [m.name for m, s in scored if not fresh(s)]
    return best, f" load={load(state)[0]:g}{tail}" + (f" stale:{','.join(stale)}" if stale else "")


def _latency(
    available: Sequence[ModelSpec], spec: SelectionSpec, states: dict[str, ModelState], fleet: FleetView
) -> tuple[ModelSpec, str]:
    cold = [m for m in available if states[m.name].latency_ms is None or states[m.name].samples < spec.min_samples]
    if cold:  # warm-up: the least-sampled candidate first
        pick = min(cold, key=lambda m: states[m.name].samples)
        return pick, " warm-up"
    best = min(available, key=lambda m: states[m.name].latency_ms or 0.0)
    if spec.explore > 0.0 and len(available) > 1 and fleet.draw() < spec.explore:
        others = [m for m in available if m is not best]
        pick = others[min(int(fleet.draw() * len(others)), len(others) - 1)]
        return pick, f" explore {states[pick.name].latency_ms:.0f}ms>{states[best.name].latency_ms:.0f}ms"
    second = min((states[m.name].latency_ms or 0.0 for m in available if m is not best), default=None)
    tail = f"<{second:.0f}ms" if second is not None else ""
    return best, f" {states[best.name].latency_ms:.0f}ms{tail}"


def estimated_cost(model: ModelSpec, input_tokens: int, output_tokens: int) -> float | None:
    if model.cost is None:
        return None
    return (input_tokens * model.cost.input_per_million + output_tokens * model.cost.output_per_million) / 1e6


def _cost(
    available: Sequence[ModelSpec], spec: SelectionSpec, input_tokens: int, max_output_tokens: int | None
) -> tuple[ModelSpec, str]:
    output = max_output_tokens if max_output_tokens is not None else spec.expected_output_tokens
    priced = [(m, c) for m in available if (c := estimated_cost(m, input_tokens, output)) is not None]
    if not priced:
        return available[0], " unpriced->ordered"
    best, price = min(priced, key=lambda pair: pair[1])
    others = [c for m, c in priced if m is not best]
    tail = f"<{min(others):.6g}" if others else ""
    return best, f" {price:.6g}{tail}"
