"""Prometheus metrics for the router, cheap on the request path.

Every observation happens on the server's event loop thread (the ext_proc servicer, the
reloader) and so does every scrape (the admin server runs on the same loop), so the
aggregates below are plain dicts and lists with no locks: a counter increment is a dict
update (~0.1 us) and a histogram observation a bisect (~0.1 us), about five times cheaper
than prometheus-client's locked children. prometheus-client renders them at scrape time
through a custom collector (`collect`), alongside gauges read from live state (in-flight
requests, model status, cache counters) that cost nothing per request.

Label values come from the policy (decision, model and signal names), from fixed sets in
the code (outcome, status, phase, stage, error code), never from client input, so the
number of series is bounded by the policies loaded since start.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.utils import floatToGoString

from extproc.models.lru import CachingModel
from extproc.observability.row import DecisionRow

if TYPE_CHECKING:
    from extproc.cache.service import SemanticCache
    from extproc.conversations.service import Conversations
    from extproc.fleet.state import Fleet
    from extproc.models.executor import HeavyExecutor
    from extproc.observability.decision_log import DecisionLog
    from extproc.outcome import RoutingOutcome
    from extproc.router import Router

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Seconds. The text path lives in 10 us .. 1 ms, images in 10 ms .. 1 s, timeouts at seconds.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
ROUTE_STAGES = ("parse", "signals", "decide", "total")


class Histogram:
    """Bucket counts (non-cumulative; +Inf last) and a sum; rendered cumulatively at scrape."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bucket (Prometheus' `le`).
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            out.append((_go_float(bound), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


@dataclass(frozen=True, slots=True)
class CacheStats:
    cache: str
    hits: int
    misses: int


Collect = Callable[[], Iterable[Metric]]


class Metrics:
    """The router's metrics. Call the `record_*` / `observe_*` methods from the event loop."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, str], int] = {}  # (decision, model, outcome) -> n
        self.request_errors: dict[str, int] = {}  # error code -> n
        self.signal_latency: dict[tuple[str, ...], Histogram] = {}  # (signal, type)
        self.signal_results: dict[tuple[str, str], int] = {}  # (signal, status) -> n
        self.route_latency = {stage: Histogram() for stage in ROUTE_STAGES}
        self.phase_latency: dict[str, Histogram] = {}  # ext_proc phase
        self.images = 0
        self.image_bytes = 0
        self.shed: dict[str, int] = {}  # the decision overload left undecided -> n (answered 429)
        self.fail_safe: dict[str, int] = {}  # decision taken fail-safe under overload -> n
        self.reloads: dict[str, int] = {}  # success / failure / unchanged
        self.last_reload: dict[str, float] = {}  # result -> unix time
        self._sources: list[Collect] = []
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    # -- the request path ----------------------------------------------------------------------
    def record_outcome(self, outcome: RoutingOutcome, row: DecisionRow | None = None) -> None:
        """Count one routed (or refused) request: decision, model, outcome, signals, latencies, images.
        The labels are the decision row's (`row` when the caller has built it already)."""
        if row is None:
            row = DecisionRow.of(outcome)
        decision = row.decision or "none"
        key = (decision, row.model or "none", row.action)
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1
        if row.error is not None:
            self.request_errors[row.error] = self.request_errors.get(row.error, 0) + 1
        if row.overload is not None:
            counts = self.shed if row.overload == "shed" else self.fail_safe
            name = decision.removeprefix("overloaded:")
            counts[name] = counts.get(name, 0) + 1
        latency = self.signal_latency
        results = self.signal_results
        for signal in outcome.signals:
            hist = latency.get((signal.name, signal.type))
            if hist is None:
                hist = latency[(signal.name, signal.type)] = Histogram()
            hist.observe(signal.latency_ms / 1000.0)
            rkey = (signal.name, signal.status.value)
            results[rkey] = results.get(rkey, 0) + 1
        stages = self.route_latency
        for stage, ms in outcome.timings_ms.items():
            hist = stages.get(stage)
            if hist is not None:
                hist.observe(ms / 1000.0)
        request = outcome.request
        if request is not None and request.images:
            self.images += len(request.images)
            self.image_bytes += sum(image.byte_size for image in request.images)

    def record_failure(self, outcome: str) -> None:
        """A request the router could not answer itself (`not_ready`, `internal_error`)."""
        key = ("none", "none", outcome)
        self.requests[key] = self.requests.get(key, 0) + 1

    def observe_phase(self, phase: str, seconds: float) -> None:
        hist = self.phase_latency.get(phase)
        if hist is None:
            hist = self.phase_latency[phase] = Histogram()
        hist.observe(seconds)

    def record_reload(self, result: str) -> None:
        self.reloads[result] = self.reloads.get(result, 0) + 1
        self.last_reload[result] = time.time()

    # -- scraping ------------------------------------------------------------------------------
    def add_source(self, collect: Collect) -> None:
        """Add metrics read from live state at scrape time (gauges, counters kept elsewhere)."""
        self._sources.append(collect)

    def exposition(self) -> bytes:
        data: bytes = generate_latest(self.registry)
        return data

    def collect(self) -> Iterator[Metric]:
        yield _counters(
            "vsr_requests",
            "Requests by winning decision, model and outcome",
            ["decision", "model", "outcome"],
            self.requests,
        )
        yield _counters("vsr_request_errors", "Requests answered with an error, by code", ["code"], self.request_errors)
        yield _counters(
            "vsr_signal_results",
            "Signal results by status (matched, not_matched, unavailable, error, timeout)",
            ["signal", "status"],
            self.signal_results,
        )
        yield _histograms(
            "vsr_signal_latency_seconds", "Signal evaluation latency", ["signal", "type"], self.signal_latency
        )
        yield _histograms(
            "vsr_route_latency_seconds",
            "Router latency by stage: parse, signals, decide, total (the decision latency)",
            ["stage"],
            {(stage,): hist for stage, hist in self.route_latency.items()},
        )
        yield _histograms(
            "vsr_extproc_phase_seconds",
            "Time spent answering each ext_proc phase",
            ["phase"],
            {(phase,): hist for phase, hist in self.phase_latency.items()},
        )
        yield _counters(
            "vsr_requests_shed",
            "Requests answered 429 because a decision they depend on could not be settled in time (overload: shed)",
            ["decision"],
            self.shed,
        )
        yield _counters(
            "vsr_failsafe_routes",
            "Requests routed by a fail_safe decision because one of its signals timed out under overload",
            ["decision"],
            self.fail_safe,
        )
        images = CounterMetricFamily("vsr_images", "Decoded request images seen")
        images.add_metric([], self.images)
        yield images
        image_bytes = CounterMetricFamily("vsr_image_bytes", "Bytes of decoded request images seen")
        image_bytes.add_metric([], self.image_bytes)
        yield image_bytes

        reloads = CounterMetricFamily(
            "vsr_policy_reloads",
            "Policy reloads by result (success, failure, unchanged, envoy_stale)",
            labels=["result"],
        )
        last = GaugeMetricFamily(
            "vsr_policy_last_reload_timestamp_seconds", "Unix time of the last reload, by result", labels=["result"]
        )
        for result in ("success", "failure", "unchanged"):
            reloads.add_metric([result], self.reloads.get(result, 0))
            if result in self.last_reload:
                last.add_metric([result], self.last_reload[result])
        yield reloads
        yield last
        for source in self._sources:
            yield from source()


def cache_metrics(stats: Iterable[CacheStats]) -> list[Metric]:
    hits = CounterMetricFamily("vsr_cache_hits", "Cache hits, by cache", labels=["cache"])
    misses = CounterMetricFamily("vsr_cache_misses", "Cache misses, by cache", labels=["cache"])
    ratio = GaugeMetricFamily("vsr_cache_hit_ratio", "Hits / (hits + misses) since start, by cache", labels=["cache"])
    for s in stats:
        hits.add_metric([s.cache], s.hits)
        misses.add_metric([s.cache], s.misses)
        lookups = s.hits + s.misses
        ratio.add_metric([s.cache], s.hits / lookups if lookups else 0.0)
    return [hits, misses, ratio]


def model_cache_stats(models: Iterable[tuple[str, object]]) -> list[CacheStats]:
    """Hit/miss counters of the loaded models that keep caches (vision embeddings, OCR results, ...)."""
    out: list[CacheStats] = []
    for name, model in models:
        if isinstance(model, CachingModel):
            for suffix, cache in model.caches().items():
                out.append(CacheStats(f"{name}_{suffix}" if suffix else name, cache.hits, cache.misses))
    return out


def executor_metrics(executor: HeavyExecutor) -> list[Metric]:
    """The heavy executor's queue and refusals, and its coalesced encoder batches (models/executor.py)."""
    refused = CounterMetricFamily(
        "vsr_heavy_refused", "Heavy jobs and encoder texts refused because they would finish after the deadline"
    )
    refused.add_metric([], executor.refused)
    pending = GaugeMetricFamily("vsr_heavy_pending", "Heavy jobs queued or running now")
    pending.add_metric([], executor.pending)
    batches = CounterMetricFamily("vsr_encoder_batches", "Batched sentence-encoder calls (texts of several requests)")
    texts = CounterMetricFamily("vsr_encoder_texts", "Texts encoded in those calls")
    shared = CounterMetricFamily("vsr_encoder_shared_texts", "Texts a signal found queued or in flight already")
    coalescers = executor.coalescers()
    batches.add_metric([], sum(c.batches for c in coalescers))
    texts.add_metric([], sum(c.items for c in coalescers))
    shared.add_metric([], sum(c.shared for c in coalescers))
    return [refused, pending, batches, texts, shared]


def _counters(name: str, documentation: str, labels: list[str], counts: Mapping[Any, int]) -> CounterMetricFamily:
    """A counter family from counts keyed by a label value (one label) or by a tuple of label values."""
    family = CounterMetricFamily(name, documentation, labels=labels)
    for key, n in sorted(counts.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], n)
    return family


def _go_float(value: float) -> str:
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


def _histograms(
    name: str, documentation: str, labels: list[str], hists: Mapping[tuple[str, ...], Histogram]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=labels)
    for label_values, hist in sorted(hists.items()):
        family.add_metric(list(label_values), hist.buckets(), hist.total)
    return family


def live_metrics(*, in_flight: int, router: Router | None, decision_log: DecisionLog | None) -> list[Metric]:
    """Gauges and counters read from live state at scrape time: nothing per request."""
    out: list[Metric] = []
    gauge = GaugeMetricFamily("vsr_in_flight_requests", "ext_proc streams being handled now")
    gauge.add_metric([], in_flight)
    out.append(gauge)
    info = GaugeMetricFamily("vsr_policy_info", "The active policy (value 1), by version", labels=["version"])
    if router is not None:
        info.add_metric([router.policy.version], 1)
    out.append(info)
    loaded = GaugeMetricFamily("vsr_model_loaded", "1 when the model is loaded, 0 when unavailable", labels=["model"])
    models: list[tuple[str, object]] = []
    if router is not None:
        for status in router.models.statuses():
            loaded.add_metric([status.name], 1 if status.loaded else 0)
            if status.loaded:
                models.append((status.name, router.models.get(status.name, _not_loaded)))
    out.append(loaded)
    out.extend(cache_metrics(model_cache_stats(models)))
    if router is not None:
        out.extend(executor_metrics(router.executor))
    if decision_log is not None:
        records = CounterMetricFamily(
            "vsr_decision_log_records", "Decision log records by result (written, dropped, error)", labels=["result"]
        )
        records.add_metric(["written"], decision_log.written)
        records.add_metric(["dropped"], decision_log.dropped)
        records.add_metric(["error"], decision_log.write_errors)
        out.append(records)
        rotations = CounterMetricFamily("vsr_decision_log_rotations", "Decision log file rotations")
        rotations.add_metric([], decision_log.rotations)
        out.append(rotations)
    return out


def _not_loaded() -> Any:
    from extproc.models.registry import ModelUnavailable

    raise ModelUnavailable("not loaded")


class SemanticCacheMetrics:
    """The semantic cache's figures: lookups by outcome, stores by result, evictions, entries,
    completion tokens saved, and lookup latency by outcome (observed through `on_lookup`)."""

    def __init__(self, cache: SemanticCache) -> None:
        self.cache = cache
        self.latency: dict[tuple[str, ...], Histogram] = {}
        cache.on_lookup = self.observe

    def observe(self, state: str, seconds: float) -> None:
        hist = self.latency.get((state,))
        if hist is None:
            hist = self.latency[(state,)] = Histogram()
        hist.observe(seconds)

    def collect(self) -> list[Metric]:
        counters = self.cache.counters
        lookups = _counters(
            "vsr_semantic_cache_lookups",
            "Semantic cache lookups by outcome (hit, miss, bypass) and reason (exact, semantic, no-cache, ...)",
            ["outcome", "reason"],
            {(state, reason or "none"): n for (state, reason), n in counters.lookups.items() if state != "off"},
        )
        stores = _counters(
            "vsr_semantic_cache_stores",
            "Upstream answers offered to the cache, by result (stored, or why not)",
            ["result"],
            counters.stores,
        )
        evictions = CounterMetricFamily("vsr_semantic_cache_evictions", "Entries evicted to stay within bounds")
        evictions.add_metric([], counters.evictions)
        saved = CounterMetricFamily(
            "vsr_semantic_cache_completion_tokens_saved",
            "Completion tokens served from the cache instead of an upstream",
        )
        saved.add_metric([], counters.tokens_saved)
        entries, size = self.cache.backend.stats() if self.cache.backend.name == "memory" else (-1, -1)
        held = GaugeMetricFamily("vsr_semantic_cache_entries", "Entries held (in-process backend)")
        held.add_metric([], entries)
        held_bytes = GaugeMetricFamily("vsr_semantic_cache_bytes", "Bytes held (in-process backend)")
        held_bytes.add_metric([], size)
        latency = _histograms(
            "vsr_semantic_cache_lookup_seconds", "Lookup latency by outcome", ["outcome"], self.latency
        )
        families = [lookups, stores, evictions, saved, held, held_bytes, latency]
        if self.cache.load is not None:  # admission: adaptive
            busy = GaugeMetricFamily(
                "vsr_semantic_cache_admission_load",
                "Server load as adaptive admission reads it (the largest of the event loop's working share, "
                "the process's CPU against one core and the CPU in use); at or over cache.admission_busy only "
                "repeated questions are stored",
            )
            busy.add_metric([], self.cache.load.share)
            families.append(busy)
        return families


class ConversationMetrics:
    """The conversation store's figures: lookups by outcome (followed, same, moved, new) and reason
    (store_error when the store could not answer), what answers taught it, store failures by
    operation, and lookup latency by outcome."""

    def __init__(self, conversations: Conversations) -> None:
        self.conversations = conversations
        self.latency: dict[tuple[str, ...], Histogram] = {}
        conversations.on_lookup = self.observe

    def observe(self, state: str, seconds: float) -> None:
        hist = self.latency.get((state,))
        if hist is None:
            hist = self.latency[(state,)] = Histogram()
        hist.observe(seconds)

    def collect(self) -> list[Metric]:
        counters = self.conversations.counters
        store = self.conversations.store
        return [
            _counters(
                "vsr_conversation_lookups",
                "Conversation lookups by outcome (followed, same, moved, new) and reason",
                ["outcome", "reason"],
                {(state, reason or "none"): n for (state, reason), n in counters.lookups.items() if state != "off"},
            ),
            _counters(
                "vsr_conversation_learned",
                "Upstream answers read for the conversation store, by what they taught (session, response) or why not",
                ["result"],
                counters.learned,
            ),
            _counters(
                "vsr_conversation_store_errors",
                "Conversation store calls that failed (the request routed as a new conversation)",
                ["store", "operation"],
                {(store.name, op): n for op, n in store.errors.items()},
            ),
            _histograms("vsr_conversation_lookup_seconds", "Lookup latency by outcome", ["outcome"], self.latency),
        ]


class FleetMetrics:
    """Model selection's view of each policy model: observed latency, scraped load, cooldowns,
    and the answers and failures the router saw (`extproc.fleet`)."""

    def __init__(self, fleet: Fleet, router: Callable[[], Router | None]) -> None:
        self.fleet = fleet
        self.router = router

    def collect(self) -> list[Metric]:
        router = self.router()
        names = [m.name for m in router.policy.spec.models] if router is not None else sorted(self.fleet.records)
        snapshot = self.fleet.snapshot(names)
        gauges = {
            "latency_ms": ("vsr_model_latency_ms", "Decayed time to the first answer byte the router observed"),
            "running": ("vsr_model_requests_running", "Requests running at the model's server (its vLLM /metrics)"),
            "waiting": ("vsr_model_requests_waiting", "Requests waiting at the model's server (its vLLM /metrics)"),
            "kv_cache": ("vsr_model_kv_cache_usage", "KV-cache use at the model's server, 0..1 (its vLLM /metrics)"),
            "cooling_s": ("vsr_model_cooldown_seconds", "Seconds left of the model's cooldown after failures"),
        }
        families: list[Metric] = []
        for key, (name, documentation) in gauges.items():
            family = GaugeMetricFamily(name, documentation, labels=["model"])
            for model, row in snapshot.items():
                if row[key] is not None:
                    family.add_metric([model], float(row[key]))
            families.append(family)
        for key, name, documentation in (
            ("requests", "vsr_model_answers", "Upstream answers the router observed for selection"),
            ("failures", "vsr_model_failures", "Answers that failed (5xx, connection failures)"),
            ("cooldowns", "vsr_model_cooldowns", "Times the model was cooled down after failures"),
            ("failovers", "vsr_model_failovers", "Requests Envoy moved off the model onto the route's fallback"),
            ("took_over", "vsr_model_failover_answers", "Requests the model answered as another model's fallback"),
        ):
            families.append(_counters(name, documentation, ["model"], {(m,): r[key] for m, r in snapshot.items()}))
        return families
