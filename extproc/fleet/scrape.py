"""Load from each vLLM server's own Prometheus endpoint (`metrics_url` on the model card).

The gauges vLLM exports (checked against vLLM's metrics docs, v0 and V1 engines):
`vllm:num_requests_running`, `vllm:num_requests_waiting`, and the KV-cache use as
`vllm:kv_cache_usage_perc` (V1; 0..1) or, before it was renamed, `vllm:gpu_cache_usage_perc`.
A server with several engines or models reports one sample per label set: requests are summed,
KV-cache use is the highest. A server that does not answer keeps its last load, which grows
stale (`stale_after_s` on the route) and selection falls back to order.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from extproc.fleet.background import BackgroundLoop
from extproc.fleet.state import Fleet

log = logging.getLogger("extproc.fleet")

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
MAX_BODY = 4 * 1024 * 1024
_LOG_EVERY_S = 30.0
# A sample line: name, optional {labels} (values may hold spaces and braces inside quotes), value.
_SAMPLE = re.compile(r'^(vllm:[A-Za-z0-9_:]+)(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')


@dataclass(frozen=True, slots=True)
class Load:
    running: float
    waiting: float
    kv_cache: float | None


def parse_load(text: str) -> Load | None:
    """The load in a Prometheus text exposition; None when it has no vLLM request gauges."""
    running = waiting = 0.0
    kv: float | None = None
    seen = False
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found is None:
            continue
        name = found.group(1)
        try:
            value = float(found.group(2))
        except ValueError:
            continue
        if name == RUNNING:
            running, seen = running + value, True
        elif name == WAITING:
            waiting, seen = waiting + value, True
        elif name in KV_CACHE:
            kv = value if kv is None else max(kv, value)
    return Load(running, waiting, kv) if seen else None


class Scraper(BackgroundLoop):
    """Scrapes every model's `metrics_url` each `interval_s` into the fleet (one task)."""

    def __init__(self, fleet: Fleet, *, interval_s: float = 2.0, timeout_s: float = 1.0) -> None:
        self.fleet = fleet
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.targets: dict[str, str] = {}  # model name -> metrics_url (set from the policy)
        self.errors: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._last_log = 0.0

    def set_targets(self, targets: Mapping[str, str]) -> None:
        self.targets = dict(targets)

    async def _run(self) -> None:
        import httpx

        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            while True:
                await self.scrape_once(client)
                await asyncio.sleep(self.interval_s)

    async def scrape_once(self, client: object) -> None:
        targets = self.targets
        if not targets:
            return
        # One GET per distinct URL (models served by one server share it).
        urls = sorted(set(targets.values()))
        loads = await asyncio.gather(*(self._get(client, url) for url in urls))
        by_url = dict(zip(urls, loads, strict=True))
        for model, url in targets.items():
            load = by_url[url]
            if load is not None:
                self.fleet.set_load(model, running=load.running, waiting=load.waiting, kv_cache=load.kv_cache)

    async def _get(self, client: object, url: str) -> Load | None:
        try:
            response = await client.get(url)  # type: ignore[attr-defined]
            if response.status_code != 200 or len(response.content) > MAX_BODY:
                raise ValueError(f"status {response.status_code}")
            load = parse_load(response.text)
            if load is None:
                raise ValueError("no vllm:num_requests_* gauges")
            return load
        except Exception as exc:  # a server that does not answer: its load grows stale
            self.errors[url] = self.errors.get(url, 0) + 1
            now = time.monotonic()
            if now - self._last_log >= _LOG_EVERY_S:
                self._last_log = now
                log.warning("metrics scrape failed", extra={"url": url, "error": f"{type(exc).__name__}: {exc}"})
            return None
