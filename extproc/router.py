"""The Router: bytes of an OpenAI request in, a RoutingOutcome out. Every edge uses it."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from extproc.errors import RequestError
from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.outcome import RoutingOutcome
from extproc.policy.engine import EngineResult, decide, next_needed
from extproc.policy.load import CompiledPolicy, load_policy
from extproc.policy.selection import FleetView
from extproc.protocol.openai import api_for_path, parse_request
from extproc.protocol.request import RoutingRequest
from extproc.settings import Settings
from extproc.signals.base import BuildContext, SignalResult
from extproc.signals.dispatch import Dispatcher
from extproc.signals.registry import SignalCatalog

log = logging.getLogger(__name__)


class Router:
    def __init__(
        self,
        settings: Settings,
        policy: CompiledPolicy,
        *,
        executor: HeavyExecutor,
        models: ModelRegistry,
        catalog: SignalCatalog | None = None,
    ) -> None:
        self.settings = settings
        self.executor = executor
        self.models = models
        self.catalog = catalog or SignalCatalog()
        self._policy = policy
        self._limits = settings.limits.image_limits()
        # What model selection reads of the fleet (the server sets it: extproc.fleet); None: order only.
        self.fleet: FleetView | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, catalog: SignalCatalog | None = None) -> Router:
        """Load the policy named in `settings`, building its signals (and their models)."""
        executor = HeavyExecutor(settings.dispatch.executor_workers, settings.dispatch.torch_threads)
        models = ModelRegistry()
        ctx = BuildContext(settings=settings, executor=executor, models=models)
        policy = load_policy(settings.policy_path, ctx, catalog=catalog)
        return cls(settings, policy, executor=executor, models=models, catalog=catalog)

    @property
    def policy(self) -> CompiledPolicy:
        return self._policy

    def build_context(self) -> BuildContext:
        return BuildContext(settings=self.settings, executor=self.executor, models=self.models)

    def load(self, path: Path | str | None = None) -> CompiledPolicy:
        """Validate and build a policy (models included) without swapping it in.

        Loaded models are reused; models that failed before are tried again.
        """
        self.models.forget_failures()
        return load_policy(path or self.settings.policy_path, self.build_context(), catalog=self.catalog)

    def swap(self, policy: CompiledPolicy) -> CompiledPolicy:
        """Make `policy` active; in-flight requests finish on the one they started with."""
        previous, self._policy = self._policy, policy
        return previous

    async def route(
        self,
        body: bytes,
        *,
        path: str = "/v1/chat/completions",
        request_id: str | None = None,
        received: float | None = None,
    ) -> RoutingOutcome:
        """The outcome for one request body. `received`: when its message arrived (time.monotonic());
        the request deadline counts from then, so the time the body waited and its parsing are
        inside the deadline Envoy's message timeout is sized from (ops/envoy_config/options.py)."""
        started = time.perf_counter()
        deadline = (
            received if received is not None else time.monotonic()
        ) + self.settings.dispatch.request_deadline_ms / 1000.0
        policy = self._policy  # one policy for the whole request, even across a reload
        try:
            request = parse_request(
                body,
                path=path,
                limits=self._limits,
                max_body_bytes=self.settings.limits.max_body_bytes,
                max_depth=self.settings.limits.max_json_depth,
            )
        except RequestError as exc:
            elapsed_ms = (time.perf_counter() - started) * 1000.0
            return RoutingOutcome(
                EngineResult.request_error(exc),
                policy.version,
                timings_ms={"total": elapsed_ms},
                request_id=request_id,
                path_api=api_for_path(path),
            )
        outcome = await self.route_request(request, policy=policy, started=started, deadline=deadline)
        outcome.request_id = request_id
        return outcome

    def shed_unread(self, *, waited_s: float, request_id: str | None = None) -> RoutingOutcome:
        """The answer to a request the server read too late to check it in time (the event loop was
        `waited_s` behind): 429 + Retry-After, as the policy's own shedding answers, never a route."""
        policy = self._policy
        retry = policy.spec.overload.retry_after_s
        result = EngineResult(
            action="reject",
            decision="overloaded:server",
            status=429,
            message=f"The router is overloaded and could not check this request in time; retry in {retry} s.",
            code="overloaded",
            notes=[f"read {waited_s * 1000.0:.0f} ms after it arrived (the server is behind): shed unread"],
            shed=True,
            retry_after_s=retry,
        )
        return RoutingOutcome(result, policy.version, timings_ms={"total": 0.0}, request_id=request_id)

    async def route_request(
        self,
        request: RoutingRequest,
        *,
        policy: CompiledPolicy | None = None,
        started: float | None = None,
        deadline: float | None = None,
    ) -> RoutingOutcome:
        policy = policy or self._policy
        started = started if started is not None else time.perf_counter()
        parsed = time.perf_counter()
        if deadline is None:
            deadline = time.monotonic() + self.settings.dispatch.request_deadline_ms / 1000.0
        dispatcher = Dispatcher(self.executor, policy.spec.signal_timeout_ms)
        try:
            results = await self._dispatch_lazily(policy, dispatcher, request, deadline)
        except RequestError as exc:
            elapsed_ms = (time.perf_counter() - started) * 1000.0
            return RoutingOutcome(
                EngineResult.request_error(exc), policy.version, request=request, timings_ms={"total": elapsed_ms}
            )
        signalled = time.perf_counter()
        result = decide(policy, request, results, missing="unknown", fleet=self.fleet)
        skipped = [name for name in policy.signals if name not in results]
        if result.derived:
            results = {**results, **result.derived}
        if skipped:
            result.notes.append(f"not needed, not run: {', '.join(skipped)}")
        done = time.perf_counter()
        return RoutingOutcome(
            result,
            policy.version,
            request=request,
            signals=list(results.values()),
            timings_ms={
                "parse": (parsed - started) * 1000.0,
                "signals": (signalled - parsed) * 1000.0,
                "decide": (done - signalled) * 1000.0,
                "total": (done - started) * 1000.0,
            },
        )

    @staticmethod
    async def _dispatch_lazily(
        policy: CompiledPolicy, dispatcher: Dispatcher, request: RoutingRequest, deadline: float
    ) -> dict[str, SignalResult]:
        """Cheap signals first, then only the heavy ones the undecided decisions still need."""
        signals = policy.signals
        results = await dispatcher.run(
            [s for s in signals.values() if s.inline or dispatcher.answers_without_running(s, request)],
            request,
            deadline,
        )
        needed, first = next_needed(policy, results)
        while needed:
            # The cheapest cost class first: it may settle the decision without the rest.
            cheapest = min(signals[name].cost for name in needed)
            batch = [signals[name] for name in needed if signals[name].cost == cheapest]
            results.update(await dispatcher.run(batch, request, deadline))
            # The decisions before `first` stay false or out of reach with more results: skip them.
            needed, first = next_needed(policy, results, first)
        return results

    def close(self) -> None:
        self.executor.shutdown()
