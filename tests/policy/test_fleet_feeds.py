"""What feeds the fleet: vLLM's Prometheus text (today's and older gauge names), a scrape that
fails (the load grows stale, never an error), and replicas sharing through a real redis-server."""

from __future__ import annotations

import asyncio

import pytest

from extproc.fleet.scrape import Scraper, parse_load
from extproc.fleet.shared import SharedFleet
from extproc.fleet.state import Fleet
from extproc.testing.redis_server import redis_available, running_redis

V1_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 3.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 7.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.42
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-8B"} 0.61
vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-8B"} 12.0
"""
V0_METRICS = 'vllm:num_requests_running{model_name="m"} 1\nvllm:num_requests_waiting{model_name="m"} 0\nvllm:gpu_cache_usage_perc{model_name="m"} 0.3\n'


def test_vllm_gauges_are_summed_and_kv_use_is_the_highest() -> None:
    load = parse_load(V1_METRICS)
    assert load is not None and (load.running, load.waiting, load.kv_cache) == (5.0, 7.0, 0.61)
    old = parse_load(V0_METRICS)
    assert old is not None and old.kv_cache == 0.3
    assert parse_load("process_cpu_seconds_total 3\n") is None  # not a vLLM server


class FakeResponse:
    def __init__(self, status: int, text: str) -> None:
        self.status_code, self.text, self.content = status, text, text.encode()


class FakeClient:
    def __init__(self, answers: dict[str, FakeResponse | Exception]) -> None:
        self.answers = answers

    async def get(self, url: str) -> FakeResponse:
        answer = self.answers[url]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_a_failed_scrape_keeps_the_last_load_which_grows_stale() -> None:
    now = [100.0]
    fleet = Fleet(clock=lambda: now[0])
    scraper = Scraper(fleet)
    scraper.set_targets({"a": "http://a/metrics", "b": "http://b/metrics"})
    ok = FakeClient({"http://a/metrics": FakeResponse(200, V1_METRICS), "http://b/metrics": OSError("refused")})
    await scraper.scrape_once(ok)
    assert fleet.state("a").waiting == 7.0 and fleet.state("b").load_age_s is None
    assert scraper.errors == {"http://b/metrics": 1}
    now[0] += 30.0
    await scraper.scrape_once(FakeClient({"http://a/metrics": FakeResponse(503, ""), "http://b/metrics": OSError()}))
    assert fleet.state("a").load_age_s == 30.0  # the last load, now 30 s old: stale for selection


@pytest.mark.skipif(not redis_available(), reason="redis-server is not installed")
async def test_two_replicas_share_latency_and_cooldowns_through_redis() -> None:
    with running_redis() as url:
        one, two = Fleet(cooldown_after=1, cooldown_s=60.0), Fleet()
        first = SharedFleet(one, url, replica="one", interval_s=0.05)
        second = SharedFleet(two, url, replica="two", interval_s=0.05)
        for shared in (first, second):
            shared.set_models(["a", "b"])
        try:
            for _ in range(5):
                one.observe("a", failed=False, latency_s=0.3)
            one.observe("b", failed=True, latency_s=None)
            await first.sync_once()
            await second.sync_once()
            seen_a, seen_b = two.state("a"), two.state("b")
            assert seen_a.latency_ms == pytest.approx(300.0, rel=0.01) and seen_a.samples > 4.0
            assert seen_b.cooling_s > 55.0  # replica two skips b without ever calling it
            assert two.state("a").cooling_s == 0.0 and not two.records["a"].requests
        finally:
            await first.stop()
            await second.stop()
    # Redis gone: syncing costs an error count, never an exception
    lonely = SharedFleet(Fleet(), url, replica="x", timeout_s=0.05)
    lonely.set_models(["a"])
    await lonely.sync_once()
    assert lonely.errors == 1
    await lonely.stop()
    await asyncio.sleep(0)
