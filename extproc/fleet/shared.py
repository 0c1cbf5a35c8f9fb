"""Replicas share what they observe through Redis (the conversations store's server).

Each replica writes its own view of each model it has observed (decayed latency and its weight,
cooldown end, wall-clock time) into one hash per model, `vsr:fleet:<model>`, field = the
replica's id, every `interval_s`; and reads the other replicas' fields back into `Fleet.peers`.
Selection merges them: latency weighted by each view's decayed weight, cooldown the latest end.
Eventually consistent: a replica sees another's failures up to one interval (plus a Redis round
trip) late, and a replica that stopped writing fades with the half-life (its hash field expires
with the key's TTL). A Redis that is down leaves each replica with its own view; never an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from collections.abc import Iterable
from typing import Any

from extproc.fleet.background import BackgroundLoop
from extproc.fleet.state import Fleet, ModelRecord, PeerState

log = logging.getLogger("extproc.fleet")
_LOG_EVERY_S = 30.0


class SharedFleet(BackgroundLoop):
    def __init__(
        self,
        fleet: Fleet,
        url: str,
        *,
        replica: str | None = None,
        interval_s: float = 1.0,
        timeout_s: float = 0.1,
        prefix: str = "vsr:fleet:",
        ttl_s: int = 300,
    ) -> None:
        import redis.asyncio as redis_asyncio

        self.fleet = fleet
        self.replica = replica or f"{socket.gethostname()}:{os.getpid()}"
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.models: list[str] = []  # the policy's models: whose views are read
        self.errors = 0
        self._dirty: set[str] = set()
        self._client: Any = redis_asyncio.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=True
        )
        self._task: asyncio.Task[None] | None = None
        self._last_log = 0.0
        fleet.on_change = self._changed

    def set_models(self, models: Iterable[str]) -> None:
        self.models = list(models)

    def _changed(self, model: str, record: ModelRecord) -> None:
        self._dirty.add(model)

    async def stop(self) -> None:
        await super().stop()
        await self._client.aclose()

    async def _run(self) -> None:
        while True:
            await self.sync_once()
            await asyncio.sleep(self.interval_s)

    async def sync_once(self) -> None:
        """Write this replica's changed views, then read the others'."""
        try:
            await asyncio.wait_for(self._sync(), self.timeout_s * 4 + 0.1 * len(self.models))
        except Exception as exc:  # redis.RedisError, OSError, TimeoutError: keep our own view
            self.errors += 1
            now = time.monotonic()
            if now - self._last_log >= _LOG_EVERY_S:
                self._last_log = now
                log.warning("fleet share unreachable", extra={"error": f"{type(exc).__name__}: {exc}"})

    async def _sync(self) -> None:
        dirty, self._dirty = self._dirty, set()
        pipe = self._client.pipeline(transaction=False)
        for model in sorted(dirty):
            view = self.fleet.shared_view(model)
            pipe.hset(
                self.prefix + model,
                self.replica,
                json.dumps({"l": view.latency_ms, "w": round(view.weight, 4), "at": view.at, "c": view.cooling_until}),
            )
            pipe.expire(self.prefix + model, self.ttl_s)
        for model in self.models:
            pipe.hgetall(self.prefix + model)
        answers = await pipe.execute()
        for model, fields in zip(self.models, answers[2 * len(dirty) :], strict=True):
            for replica, raw in (fields or {}).items():
                if replica == self.replica:
                    continue
                peer = _peer(raw)
                if peer is not None:
                    self.fleet.set_peer(model, replica, peer)


def _peer(raw: str) -> PeerState | None:
    try:
        data = json.loads(raw)
        latency = data.get("l")
        return PeerState(
            latency_ms=float(latency) if latency is not None else None,
            weight=float(data["w"]),
            at=float(data["at"]),
            cooling_until=float(data.get("c") or 0.0),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
