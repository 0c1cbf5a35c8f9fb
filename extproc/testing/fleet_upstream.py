"""Stand-in vLLM servers for model-selection tests and benchmarks: each serves chat completions,
`GET /health` and a vLLM-format Prometheus `/metrics`, and can be made slow (`delay_s`), loaded
(`running`, `waiting`, `kv_cache` as its gauges say) or failing (`fail`: 503 answers, `down`:
every connection refused because the listener is closed). They run on one event loop in a
background thread, so a synchronous test drives them while Envoy calls them.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class StandIn:
    name: str
    port: int
    delay_s: float = 0.0
    fail: bool = False  # answer inference requests with 503 (as vLLM does while it cannot serve)
    running: float = 0.0
    waiting: float = 0.0
    kv_cache: float = 0.0
    served: Counter[str] = field(default_factory=Counter)  # the body's model, per request answered
    _runner: web.AppRunner | None = None
    _site: web.TCPSite | None = None

    def metrics_text(self) -> str:
        labels = f'{{engine="0",model_name="{self.name}"}}'
        return (
            "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{labels} {self.running}\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            f"vllm:num_requests_waiting{labels} {self.waiting}\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            f"vllm:kv_cache_usage_perc{labels} {self.kv_cache}\n"
        )


class StandIns:
    """Several stand-ins on loopback ports; `down(name)` closes one's listener, `up(name)` reopens it."""

    def __init__(self, stand_ins: list[StandIn]) -> None:
        self.by_name = {s.name: s for s in stand_ins}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __getitem__(self, name: str) -> StandIn:
        return self.by_name[name]

    def start(self) -> StandIns:
        self._thread.start()
        for stand_in in self.by_name.values():
            self._call(self._open(stand_in))
        return self

    def stop(self) -> None:
        for stand_in in self.by_name.values():
            self._call(self._close(stand_in))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def down(self, name: str) -> None:
        self._call(self._close(self.by_name[name]))

    def up(self, name: str) -> None:
        self._call(self._open(self.by_name[name]))

    def _call(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(10)

    async def _open(self, stand_in: StandIn) -> None:
        if stand_in._runner is not None:
            return
        app = web.Application()

        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._handle(stand_in, request)

        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", stand_in.port, reuse_address=True)
        await site.start()
        stand_in._runner, stand_in._site = runner, site

    async def _close(self, stand_in: StandIn) -> None:
        runner, stand_in._runner, stand_in._site = stand_in._runner, None, None
        if runner is not None:
            await runner.cleanup()

    async def _handle(self, stand_in: StandIn, request: web.Request) -> web.StreamResponse:
        if request.path == "/health":
            return web.Response(status=503 if stand_in.fail else 200)
        if request.path == "/metrics":
            return web.Response(text=stand_in.metrics_text(), content_type="text/plain")
        body = await request.read()
        if stand_in.delay_s:
            await asyncio.sleep(stand_in.delay_s)
        if stand_in.fail:
            error = {"error": {"message": "stand-in failing", "type": "service_unavailable", "code": 503}}
            return web.json_response(error, status=503, headers={"x-stand-in": stand_in.name})
        try:
            model = str(json.loads(body).get("model"))
        except (ValueError, AttributeError):
            model = "?"
        stand_in.served[model] += 1
        answer = {
            "id": f"chatcmpl-{stand_in.name}-{time.monotonic_ns()}",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": stand_in.name}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return web.json_response(answer, headers={"x-stand-in": stand_in.name})
