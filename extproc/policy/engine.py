"""The decision engine: rule trees over signal results, priority, capabilities, the default.

Pure and synchronous: given a compiled policy, a parsed request and the signal results, it
returns what to do and why. The router, the CLI and replay all call this one function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from extproc.errors import ModelNotFound, NoCapableModel, RequestError
from extproc.policy.conditions import Leaf, Tri, can_still_be_true, evaluate, leaves, value
from extproc.policy.derived_eval import DerivedView
from extproc.policy.load import CompiledPolicy
from extproc.policy.reasoning import ReasoningFamily, ReasoningSetting
from extproc.policy.schema import (
    ClarifyAction,
    Decision,
    DefaultDecision,
    ModelSpec,
    Plugins,
    RejectAction,
    RouteAction,
    ToolRule,
)
from extproc.policy.selection import FleetView, Selected, select
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import Signal, SignalResult, SignalStatus

ActionKind = Literal["route", "reject", "clarify", "error"]


@dataclass(frozen=True, slots=True)
class DecisionTrace:
    name: str
    priority: int | None  # None for the default decision
    value: Tri
    blame: str | None = None  # the leaf that made it false, or left it unknown
    blame_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "priority": self.priority,
            "matched": self.value is Tri.TRUE,
            "value": self.value.name.lower(),
            "failed_leaf": self.blame,
            "failed_at": self.blame_path,
        }


@dataclass(slots=True)
class EngineResult:
    """What to do with a request and why; `decision` is None only for a request that failed to parse."""

    action: ActionKind
    decision: str | None
    plugins: Plugins = field(default_factory=Plugins)
    model: ModelSpec | None = None
    status: int = 200
    message: str | None = None
    code: str | None = None
    error: RequestError | None = None
    trace: list[DecisionTrace] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # model selection and fail-closed explanations
    # Overload: the decision won only because a timed-out signal counted as a match (fail_safe), or
    # the request was shed (429) because a decision it depends on could not be settled in time.
    fail_safe: bool = False
    shed: bool = False
    retry_after_s: int | None = None
    # The route's reasoning setting and its model's families-table row (None: bodies untouched).
    reasoning: ReasoningSetting | None = None
    reasoning_family: ReasoningFamily | None = None
    # Derived signals' results (scores, partitions) as the decision saw them, for the trace and the log.
    derived: dict[str, SignalResult] = field(default_factory=dict)
    selection: Selected | None = None  # which capable candidate, by which algorithm, and why
    unknown_model: str | None = None  # the client's `model` the policy does not know (unknown_models: auto/header)

    @classmethod
    def request_error(cls, exc: RequestError) -> EngineResult:
        """A request that cannot be decided (malformed, too large, a corrupt image): its error, as is."""
        return cls(action="error", decision=None, status=exc.status, error=exc)


def leaf_value(leaf: Leaf, result: SignalResult | None, signals: Mapping[str, Signal]) -> Tri:
    """A leaf's truth value from its signal's result; an unknown result follows the signal's
    `on_error`, looked up in `signals` only then (the hot path decides on known results)."""
    if result is None or not result.known:
        signal = signals.get(leaf.signal)
        on_error = signal.on_error if signal is not None else "no_match"
        return Tri.TRUE if on_error == "match" else Tri.UNKNOWN
    if leaf.label is not None:
        score = result.labels.get(leaf.label)
        if score is None or score <= 0.0:
            return Tri.FALSE
        return Tri.of(leaf.min_score is None or score >= leaf.min_score)
    if not result.matched:
        return Tri.FALSE
    return Tri.of(leaf.min_score is None or result.score >= leaf.min_score)


def needed_signals(policy: CompiledPolicy, results: Mapping[str, SignalResult]) -> list[str]:
    """Signals that must still run before the winning decision is certain (`next_needed`)."""
    return next_needed(policy, results)[0]


def next_needed(policy: CompiledPolicy, results: Mapping[str, SignalResult], start: int = 0) -> tuple[list[str], int]:
    """Signals that must still run before the winning decision is certain; empty once it is.
    Also the index of the decision they are for: a later call for the same request, with more
    results, may start there (`start`), since every decision before it stays passed over.

    Signals not yet run count as unknown. Walking decisions by priority, one that is false
    stays false whatever the pending signals say, and the first one that is true wins
    whatever they say (Kleene logic is monotone), so only the pending signals of the first
    undecided decision are worth running next. This is what keeps OCR off requests that
    text already decided, and embeddings off requests a cheap prefilter cleared. A decision
    that no outcome of its pending (or timed-out) signals can make true (it also waits on a
    signal that could not run, such as image labels without a vision model) is passed over
    like a false one: `_choose` never picks it, so its signals are not run for nothing.
    Both hold as results arrive (a result only narrows what a pending signal may say), which is
    what lets a later round skip the decisions before `start`.
    """
    signals = policy.signals
    derived = policy.derived
    view = DerivedView(derived, signals, results, "pending") if derived else None

    def known_or_pending(leaf: Leaf) -> Tri | None:
        if view is not None and leaf.signal in derived:
            answer = view.leaf(leaf)
            if answer.truth is Tri.UNKNOWN and (answer.pending or answer.waiting_on_timeout):
                return None
            return answer.truth
        # A timed-out signal counts as pending: `_choose` weighs what it might have said.
        result = results.get(leaf.signal)
        if result is None or result.status is SignalStatus.TIMEOUT:
            return None
        return leaf_value(leaf, result, signals)

    decisions = policy.decisions
    for index in range(start, len(decisions)):
        decision = decisions[index]
        pending: list[str] = []

        def value_of(leaf: Leaf, pending: list[str] = pending) -> Tri:
            if view is not None and leaf.signal in derived:
                # A score asks only for the inputs that could still change its answer.
                answer = view.leaf(leaf)
                pending.extend(name for name in answer.pending if name not in pending)
                return answer.truth
            result = results.get(leaf.signal)
            if result is None:
                if leaf.signal not in pending:
                    pending.append(leaf.signal)
                return Tri.UNKNOWN
            return leaf_value(leaf, result, signals)

        verdict = value(decision.when, value_of)
        if verdict is Tri.TRUE:
            return [], index
        if verdict is Tri.UNKNOWN and pending:
            if not can_still_be_true(decision.when, known_or_pending):
                continue  # undecided for good (a signal that cannot run): it never wins, whatever they say
            return pending, index
    return [], len(decisions)


def decide(
    policy: CompiledPolicy,
    request: RoutingRequest,
    results: Mapping[str, SignalResult],
    *,
    missing: Literal["unknown", "on_error"] = "on_error",
    fleet: FleetView | None = None,
) -> EngineResult:
    """The winning decision for `results`.

    `missing` says what a signal absent from `results` means: "unknown" when it was skipped
    because no decision needed it (the router's lazy dispatch), "on_error" when it should be
    treated as a failure of that signal (replaying a log under a policy with new signals).
    `fleet`: what selection reads of the models' load, latency and cooldowns (None: order only).
    """
    failure = _signal_failure(policy, results, missing)
    if failure is not None:
        return failure
    choice = _choose(policy, results, missing)
    result = (
        _shed(policy, choice.overloaded, choice)
        if choice.overloaded is not None
        else _apply(policy, request, choice, fleet)
    )
    if choice.view is not None:
        result.derived = choice.view.results_for(list(policy.derived))
    return result


@dataclass(slots=True)
class _Choice:
    """The walk over the decisions: the winner (None: the default), the trace, and the overload."""

    winner: Decision | None
    trace: list[DecisionTrace]
    timed_out: set[str]
    fail_safe: bool = False
    overloaded: Decision | None = None  # the first decision left undecided by a timed-out signal
    view: DerivedView | None = None  # the derived signals' values this walk used


def _signal_failure(
    policy: CompiledPolicy, results: Mapping[str, SignalResult], missing: Literal["unknown", "on_error"]
) -> EngineResult | None:
    """A signal with on_error=reject that could not answer rejects the request outright."""
    for name, signal in policy.signals.items():
        signal_result = results.get(name)
        if signal_result is None and missing == "unknown":
            continue
        if (signal_result is None or not signal_result.known) and signal.on_error == "reject":
            status = signal_result.status.value if signal_result is not None else "missing"
            return EngineResult(
                action="reject",
                decision=f"signal_failure:{name}",
                plugins=Plugins(),
                status=policy.spec.signal_failure_status,
                message=f"request could not be checked: signal {name!r} is {status}",
                code="signal_unavailable",
                notes=[f"{name}: {status}, on_error=reject"],
            )
    return None


def _choose(
    policy: CompiledPolicy, results: Mapping[str, SignalResult], missing: Literal["unknown", "on_error"]
) -> _Choice:
    """Every decision's value, by priority; the first true one wins, unless a timed-out signal
    left an earlier one undecided (fail-safe match, or shed)."""
    signals = policy.signals
    derived = policy.derived
    view = DerivedView(derived, signals, results, missing) if derived else None

    def value_of(leaf: Leaf) -> Tri:
        if view is not None and leaf.signal in derived:
            return view.leaf(leaf).truth
        result = results.get(leaf.signal)
        if result is None and missing == "unknown":
            return Tri.UNKNOWN
        return leaf_value(leaf, result, signals)

    timed_out = {name for name, r in results.items() if r.status is SignalStatus.TIMEOUT}

    def overloaded_as_match(leaf: Leaf) -> Tri:
        return Tri.TRUE if leaf.signal in timed_out else value_of(leaf)

    choice = _Choice(winner=None, trace=[], timed_out=timed_out, view=view)
    for decision in policy.decisions:  # highest priority first
        value, blame = evaluate(decision.when, value_of)
        choice.trace.append(
            DecisionTrace(
                decision.name,
                decision.priority,
                value,
                blame.describe() if blame else None,
                blame.path if blame else None,
            )
        )
        if choice.winner is not None or choice.overloaded is not None:
            continue
        if value is Tri.TRUE:
            choice.winner = decision
        elif value is Tri.UNKNOWN and timed_out and _timeout_matters(decision, timed_out, value_of):
            if decision.fail_safe and evaluate(decision.when, overloaded_as_match)[0] is Tri.TRUE:
                choice.winner, choice.fail_safe = decision, True
            elif policy.spec.overload.action == "shed" and decision.on_overload != "skip":
                choice.overloaded = decision
    return choice


def _shed(policy: CompiledPolicy, overloaded: Decision, choice: _Choice) -> EngineResult:
    """The 429 for a request whose deciding signals timed out under the `shed` overload policy."""
    retry = policy.spec.overload.retry_after_s
    names = ", ".join(sorted(s for s in choice.timed_out if s in _signals_of(overloaded)))
    return EngineResult(
        action="reject",
        decision=f"overloaded:{overloaded.name}",
        status=429,
        message=f"The router is overloaded and could not check this request in time; retry in {retry} s.",
        code="overloaded",
        trace=choice.trace,
        notes=[f"{overloaded.name} undecided: {names} timed out; policy overload: shed"],
        shed=True,
        retry_after_s=retry,
    )


def _apply(
    policy: CompiledPolicy, request: RoutingRequest, choice: _Choice, fleet: FleetView | None = None
) -> EngineResult:
    """The chosen decision's action: reject, clarify, or route to its first capable model."""
    is_default = choice.winner is None
    chosen: Decision | DefaultDecision = choice.winner if choice.winner is not None else policy.default
    trace = choice.trace
    trace.append(DecisionTrace(policy.default.name, None, Tri.TRUE if is_default else Tri.FALSE))

    action = chosen.action
    result = EngineResult(action="route", decision=chosen.name, plugins=chosen.plugins, trace=trace)
    if choice.fail_safe:
        result.fail_safe = True
        result.notes.append(f"fail-safe: {chosen.name} taken because {', '.join(sorted(choice.timed_out))} timed out")
    if isinstance(action, RejectAction):
        result.action, result.status, result.message, result.code = "reject", action.status, action.message, action.code
        return result
    if isinstance(action, ClarifyAction):
        result.action, result.message = "clarify", action.message
        return result
    return _route(policy, request, chosen, action, is_default, result, fleet)


def _route(
    policy: CompiledPolicy,
    request: RoutingRequest,
    chosen: Decision | DefaultDecision,
    action: RouteAction,
    is_default: bool,
    result: EngineResult,
    fleet: FleetView | None = None,
) -> EngineResult:
    """The route's model: the client's pick where the default allows it, else the decision's
    first model that can take the request (images, context window)."""
    candidates = [m for m in (policy.model(name) for name in action.models) if m is not None]
    requested = _client_model(policy, request)
    if requested is not None:
        if is_default:
            candidates = [requested, *[m for m in candidates if m is not requested]]
            result.notes.append(f"client asked for {requested.name!r}; allowed by client_models")
        else:
            result.notes.append(f"client asked for {requested.name!r}; decision {chosen.name!r} overrides it")
    elif request.model and request.model.lower() not in policy.aliases:
        if _known_model(policy, request.model):
            result.notes.append(f"requested model {request.model!r} is not selectable; routed by policy")
        elif policy.spec.unknown_models == "reject":
            result.action, result.status = "error", 404
            result.error = ModelNotFound(f"The model {request.model!r} does not exist", param="model")
            return result
        else:
            if policy.spec.unknown_models == "header":
                result.unknown_model = request.model
            result.notes.append(f"requested model {request.model!r} is unknown; routed by policy (unknown_models)")

    spec = action.selection
    # Ordered without failover needs only the first capable model: the rest are not looked at.
    capable = _capable(candidates, request, result.notes, first_only=spec.algorithm == "ordered" and not spec.failover)
    if not capable:
        need = "images" if request.has_images else "this request"
        result.action, result.status = "error", 400
        result.error = NoCapableModel(
            f"decision {chosen.name!r} routes to {[m.name for m in candidates]}, but none can accept {need}: "
            + "; ".join(result.notes)
        )
        return result
    if requested is not None and is_default:  # the client's pick stands: no selection past it
        selected = Selected(capable[0], "ordered", f"client:{capable[0].name}", None)
    else:
        selected = select(
            capable,
            spec,
            fleet,
            input_tokens=request.estimated_tokens() if spec.algorithm == "cost" else 0,
            max_output_tokens=_max_output(request) if spec.algorithm == "cost" else None,
        )
    if spec.algorithm != "ordered" or selected.model is not capable[0]:
        result.notes.append(f"selection: {selected.reason}")
    result.selection = selected
    model = result.model = selected.model
    if action.reasoning is not None:
        result.reasoning = action.reasoning
        result.reasoning_family = policy.spec.reasoning_family(model)
    return result


def _signals_of(decision: Decision) -> set[str]:
    return {leaf.signal for leaf in leaves(decision.when)}


def _timeout_matters(decision: Decision, timed_out: set[str], value_of: Callable[[Leaf], Tri]) -> bool:
    """Would the decision come out differently had its timed-out signals answered? (Yes / no as
    the two extremes; when both leave it the same, other unknowns decide it, not the overload.)"""
    if _signals_of(decision).isdisjoint(timed_out):
        return False

    def as_(truth: Tri) -> Callable[[Leaf], Tri]:
        return lambda leaf: truth if leaf.signal in timed_out else value_of(leaf)

    return value(decision.when, as_(Tri.TRUE)) != value(decision.when, as_(Tri.FALSE))


def _known_model(policy: CompiledPolicy, asked: str) -> bool:
    """Whether `asked` names a policy model (its name or the id its server knows it by)."""
    return any(asked in (m.name, m.target_model) for m in policy.spec.models)


def _client_model(policy: CompiledPolicy, request: RoutingRequest) -> ModelSpec | None:
    """The concrete model the client asked for, if the policy lets clients pick it."""
    asked = request.model
    if not asked or asked.lower() in policy.aliases:
        return None
    for name in policy.spec.client_models:
        model = policy.model(name)
        if model is not None and asked in (model.name, model.target_model):
            return model
    return None


def _max_output(request: RoutingRequest) -> int | None:
    for key in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        value = request.raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _capable(
    candidates: list[ModelSpec], request: RoutingRequest, notes: list[str], *, first_only: bool = False
) -> list[ModelSpec]:
    """The candidates that can take the request (images, context window), in order."""
    tokens: int | None = None
    capable: list[ModelSpec] = []
    for model in candidates:
        if request.has_images and not model.accepts("image"):
            notes.append(f"skipped {model.name}: text-only model, request has images")
            continue
        if model.context_window is not None:
            if tokens is None:
                tokens = request.estimated_tokens()
            if tokens > model.context_window:
                notes.append(f"skipped {model.name}: ~{tokens} tokens exceed its {model.context_window} window")
                continue
        capable.append(model)
        if first_only:
            break
    return capable


def derived_results(
    policy: CompiledPolicy, results: Mapping[str, SignalResult], *, missing: Literal["unknown", "on_error"] = "unknown"
) -> dict[str, SignalResult]:
    """Each derived signal's result over `results`, for the trace and the decision log: its value,
    or the interval its inputs still allow, with every input's contribution."""
    if not policy.derived:
        return {}
    view = DerivedView(policy.derived, policy.signals, results, missing)
    return view.results_for(list(policy.derived))


def decide_tool_call(policy: CompiledPolicy, results: Mapping[str, SignalResult]) -> ToolRule | None:
    """The first tool rule, by priority, that is true for one tool call's signal results (None:
    no rule fired). Unknown results follow each signal's `on_error`, as for requests: safety
    signals fail closed, so a detector that could not run counts as a match."""

    def value_of(leaf: Leaf) -> Tri:
        return leaf_value(leaf, results.get(leaf.signal), policy.tool_signals)

    for rule in policy.tool_rules:  # highest priority first
        truth, _ = evaluate(rule.when, value_of)
        if truth is Tri.TRUE:
            return rule
    return None
