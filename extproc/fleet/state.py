"""What the router knows of each model's server: observed latency and failures, scraped load.

One `Fleet` per server process. The response phase feeds it (`observe`: status and time to the
first answer byte of each routed request), the scraper feeds it load (`set_load`), and selection
reads it (`state`, the `FleetView` of `extproc.policy.selection`). With Redis configured, the
other replicas' observations are merged in (`extproc.fleet.shared`): `peers` holds their latest.

Latency is an exponentially decayed mean: a sample's weight halves every `half_life_s`, so an
estimate nobody refreshes fades (its weight drops under the route's `min_samples`) and the model
is tried again. Failures: `cooldown_after` failures in a row (5xx, connection failures, Envoy's
upstream-failure flags) cool the model down for `cooldown_s`; once that passes it is tried again,
one failure cools it again, one success clears it. Failovers (a failover route's request answered
by its fallback, as Envoy tells the store phase) count on both models.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from extproc.policy.selection import UNKNOWN, ModelState

MAX_WEIGHT = 20.0  # the most recent ~20 samples dominate: old ones cannot outvote a change


@dataclass(slots=True)
class PeerState:
    """Another replica's view of one model (shared through Redis)."""

    latency_ms: float | None
    weight: float
    at: float  # wall-clock seconds when it was written
    cooling_until: float  # wall-clock seconds (0: not cooling)


@dataclass(slots=True)
class ModelRecord:
    latency_ms: float | None = None
    weight: float = 0.0
    last_sample: float = 0.0  # monotonic
    failures_in_row: int = 0
    cooling_until: float = 0.0  # monotonic
    requests: int = 0
    failures: int = 0
    cooldowns: int = 0
    failovers: int = 0  # requests Envoy moved off this model onto the route's fallback
    took_over: int = 0  # requests this model answered as another's fallback
    running: float | None = None
    waiting: float | None = None
    kv_cache: float | None = None
    load_at: float | None = None  # monotonic
    peers: dict[str, PeerState] = field(default_factory=dict)


class Fleet:
    """Observations per model name; `state(name)` is what selection reads."""

    def __init__(
        self,
        *,
        half_life_s: float = 30.0,
        cooldown_after: int = 3,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if half_life_s <= 0 or cooldown_after < 1 or cooldown_s < 0:
            raise ValueError("fleet: half_life_s > 0, cooldown_after >= 1 and cooldown_s >= 0 are required")
        self.half_life_s = half_life_s
        self.cooldown_after = cooldown_after
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.wall_clock = wall_clock
        self.rng = rng
        self.records: dict[str, ModelRecord] = {}
        self.on_change: Callable[[str, ModelRecord], None] | None = None  # the Redis publisher

    # -- selection reads ------------------------------------------------------------------------

    def draw(self) -> float:
        return self.rng()

    def state(self, model: str) -> ModelState:
        record = self.records.get(model)
        if record is None:
            return UNKNOWN
        now = self.clock()
        latency, weight = self._latency(record, now)
        cooling = max(record.cooling_until - now, 0.0)
        if record.peers:
            wall = self.wall_clock()
            for peer in record.peers.values():
                cooling = max(cooling, peer.cooling_until - wall)
                if peer.latency_ms is not None and peer.weight > 0:
                    peer_weight = peer.weight * self._decay(max(wall - peer.at, 0.0))
                    total = weight + peer_weight
                    if total > 0:
                        latency = ((latency or 0.0) * weight + peer.latency_ms * peer_weight) / total
                        weight = total
        return ModelState(
            cooling_s=cooling,
            latency_ms=latency,
            samples=weight,
            running=record.running,
            waiting=record.waiting,
            kv_cache=record.kv_cache,
            load_age_s=None if record.load_at is None else now - record.load_at,
        )

    def _decay(self, age_s: float) -> float:
        return float(0.5 ** (age_s / self.half_life_s))

    def _latency(self, record: ModelRecord, now: float) -> tuple[float | None, float]:
        if record.latency_ms is None:
            return None, 0.0
        return record.latency_ms, record.weight * self._decay(max(now - record.last_sample, 0.0))

    # -- what feeds it --------------------------------------------------------------------------

    def record(self, model: str) -> ModelRecord:
        found = self.records.get(model)
        if found is None:
            found = self.records[model] = ModelRecord()
        return found

    def observe(self, model: str, *, failed: bool, latency_s: float | None) -> None:
        """One answer of `model`: failed (5xx, no connection), else its time to the first byte."""
        record = self.record(model)
        now = self.clock()
        record.requests += 1
        if failed:
            record.failures += 1
            record.failures_in_row += 1
            if record.failures_in_row >= self.cooldown_after and record.cooling_until <= now:
                record.cooling_until = now + self.cooldown_s
                record.cooldowns += 1
        else:
            record.failures_in_row = 0
            record.cooling_until = 0.0
            if latency_s is not None and latency_s >= 0.0:
                sample = latency_s * 1000.0
                _, weight = self._latency(record, now)
                record.latency_ms = (
                    sample
                    if record.latency_ms is None or weight <= 0
                    else ((record.latency_ms * weight + sample) / (weight + 1.0))
                )
                record.weight = min(weight + 1.0, MAX_WEIGHT)
                record.last_sample = now
        if self.on_change is not None:
            self.on_change(model, record)

    def observe_failover(self, model: str, fallback: str) -> None:
        """Envoy retried (or spilled) a request of `model` onto `fallback`: counted on both."""
        self.record(model).failovers += 1
        self.record(fallback).took_over += 1

    def set_load(self, model: str, *, running: float, waiting: float, kv_cache: float | None) -> None:
        record = self.record(model)
        record.running, record.waiting, record.kv_cache = running, waiting, kv_cache
        record.load_at = self.clock()

    def set_peer(self, model: str, replica: str, peer: PeerState) -> None:
        self.record(model).peers[replica] = peer

    def shared_view(self, model: str) -> PeerState:
        """This replica's own view of `model`, as the other replicas will read it."""
        record = self.record(model)
        now, wall = self.clock(), self.wall_clock()
        latency, weight = self._latency(record, now)
        cooling = record.cooling_until - now
        return PeerState(latency, weight, wall, wall + cooling if cooling > 0 else 0.0)

    # -- what it shows --------------------------------------------------------------------------

    def snapshot(self, models: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Per model: the state selection reads and the counters (console, admin, metrics)."""
        names = list(models) if models is not None else sorted(self.records)
        out: dict[str, dict[str, Any]] = {}
        for name in names:
            state = self.state(name)
            record = self.records.get(name) or ModelRecord()
            out[name] = {
                "latency_ms": None if state.latency_ms is None else round(state.latency_ms, 1),
                "samples": round(state.samples, 2),
                "cooling_s": round(state.cooling_s, 1),
                "running": state.running,
                "waiting": state.waiting,
                "kv_cache": state.kv_cache,
                "load_age_s": None if state.load_age_s is None else round(state.load_age_s, 1),
                "requests": record.requests,
                "failures": record.failures,
                "cooldowns": record.cooldowns,
                "failovers": record.failovers,
                "took_over": record.took_over,
                "peers": len(record.peers),
            }
        return out
