"""The console's fleet panel in a real headless browser (Debian's Chromium driven by Playwright)
against the real stack: Envoy, `extproc serve`, and stand-in vLLM servers (`extproc.testing.
fleet_upstream`) that can fail. A model answering 503 on a failover route: Envoy retries on the
fallback, the router counts the failovers, and the panel shows them, the cooldown that follows,
the routes' algorithms and the recent selections. Browser discovery and skipping as in
`test_console_browser` (whose fixtures this module reuses)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from extproc.ops.stack import free_port
from extproc.testing.fleet_upstream import StandIn, StandIns
from tests.integration.conftest import LoggedStack, fleet_stack_config, running_stack
from tests.integration.test_console_browser import Page, browser, expect, playwright_api, screenshots

pytestmark = pytest.mark.integration
__all__ = ["browser", "playwright_api", "screenshots"]  # the fixtures this module uses

POLICY = """
version: 1
models:
  - {{name: model-a, cluster: ca, address: "127.0.0.1:{a}", metrics_url: "http://127.0.0.1:{a}/metrics"}}
  - {{name: model-b, cluster: cb, address: "127.0.0.1:{b}", metrics_url: "http://127.0.0.1:{b}/metrics"}}
signals:
  - {{name: wants_failover, type: keyword, keywords: [failover]}}
decisions:
  - name: resilient
    priority: 10
    when: {{signal: wants_failover}}
    action: {{type: route, models: [model-a, model-b], selection: {{algorithm: ordered, failover: true}}}}
default:
  action: {{type: route, models: [model-a, model-b], selection: {{algorithm: latency, explore: 0}}}}
"""


@pytest.fixture(scope="module")
def fleet_stack(
    playwright_api: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LoggedStack, StandIns]]:
    ports = {name: free_port() for name in ("a", "b")}
    stand_ins = StandIns([StandIn(f"model-{n}", p) for n, p in ports.items()]).start()
    policy = Path(tmp_path_factory.mktemp("fleet-console")) / "policy.yaml"
    policy.write_text(POLICY.format(**ports), encoding="utf-8")
    config = fleet_stack_config(policy, ("ca", "cb"), cooldown_s=30)
    try:
        with running_stack(config) as stack:
            yield stack, stand_ins
    finally:
        stand_ins.stop()


def ask(stack: LoggedStack, text: str) -> httpx.Response:
    body = {"model": "auto", "messages": [{"role": "user", "content": text}]}
    return httpx.post(stack.base_url + "/v1/chat/completions", json=body, timeout=30)


def test_the_fleet_panel_shows_failovers_and_the_cooldown(
    browser: Any, fleet_stack: tuple[LoggedStack, StandIns], screenshots: Path
) -> None:
    stack, stand_ins = fleet_stack
    stand_ins["model-b"].waiting = 7.0  # scraped load shows in the panel
    assert ask(stack, "hello").status_code == 200  # a latency route: model-a gets an observed latency
    stand_ins["model-a"].fail = True  # every answer of model-a is now a 503: Envoy retries on model-b
    replies = [ask(stack, "failover please") for _ in range(2)]
    assert [r.headers.get("x-vsr-attempts") for r in replies] == ["2", "2"]
    page = Page(browser, stack, token=None)
    try:
        row_a = page.page.locator('#fleet-models tbody tr[data-model="model-a"]')
        row_b = page.page.locator('#fleet-models tbody tr[data-model="model-b"]')
        expect(row_a.locator("td.failovers")).to_have_text("2")
        expect(row_b.locator("td.took-over")).to_have_text("2")
        expect(row_a).to_contain_text("cooling")  # two failures in a row (cooldown_after 2)
        expect(row_b.locator("td").nth(5)).to_have_text("7")  # waiting, from its /metrics
        assert row_a.locator("td").nth(2).inner_text() != "–"  # the latency it showed before failing
        routes = page.page.locator("#fleet-routes").inner_text()
        assert "ordered (failover)" in routes and "latency" in routes and "resilient" in routes
        recent = page.page.locator("#fleet-recent tbody tr")
        expect(recent).to_have_count(3)
        assert "ordered:model-a" in recent.first.inner_text()
        page.shot(screenshots, "07-fleet.png", "#fleet")
        assert page.errors == []
    finally:
        page.close()
        stand_ins["model-a"].fail = False
