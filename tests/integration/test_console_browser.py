"""The decision console in a real headless browser (Debian's Chromium driven by Playwright) against
the real stack: Envoy, `extproc serve` with an admin token, demo upstreams.

Checks that the page loads and draws the active policy, asks for the token when it has none, reads
one from `#token=...`, updates its live table after traffic sent through Envoy, and round-trips the
explain form with a text request and with an image + prompt built in the browser. Screenshots go to
`CONSOLE_SCREENSHOT_DIR` (or `VSR_SCREENSHOT_DIR`; default: a temporary folder, printed). Prefer the
first: every process the test suite starts reads each `VSR_*` variable as a setting and refuses an
unknown one, so `VSR_SCREENSHOT_DIR` is safe only when this file runs alone (it is kept from this
test's own stack). `CHROMIUM_PATH` overrides the browser
(default /usr/bin/chromium). In CI (`CI=true`) a missing browser or Playwright fails the test;
elsewhere it skips, saying what to install.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from PIL import Image, ImageDraw

from tests.integration.conftest import POLICY, REPO, LoggedStack, running_stack, stack_config

pytestmark = pytest.mark.integration

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
SCREENSHOT_ENVS = ("CONSOLE_SCREENSHOT_DIR", "VSR_SCREENSHOT_DIR")
VSR_SCREENSHOT_ENV = "VSR_SCREENSHOT_DIR"  # not a server setting: removed from the stack's environment
# As root in a container: no sandbox; nothing that reaches out to the network on its own.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "console-browser-token-0123456789"
REQUESTS = REPO / "policies" / "examples" / "requests"
TIMEOUT_MS = 30_000


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _missing(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason} (CI=true: the browser test must run; install it with the Makefile's browser step)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def playwright_api() -> Iterator[Any]:
    try:
        from playwright.sync_api import expect as playwright_expect
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install playwright)")
    playwright_expect.set_options(timeout=TIMEOUT_MS)
    if not CHROMIUM.exists():
        _missing(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)")
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = next((os.environ[name] for name in SCREENSHOT_ENVS if os.environ.get(name)), None)
    folder = Path(configured) if configured else tmp_path_factory.mktemp("console-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"console screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def console_stack(playwright_api: Any, screenshots: Path) -> Iterator[LoggedStack]:
    with pytest.MonkeyPatch.context() as env:
        env.delenv(VSR_SCREENSHOT_ENV, raising=False)  # `extproc serve` would refuse it as an unknown setting
        with running_stack(stack_config(VSR_SERVER__ADMIN_TOKEN=TOKEN)) as running:
            env.undo()
            yield running


@pytest.fixture(scope="module")
def browser(playwright_api: Any) -> Iterator[Any]:
    profile = tempfile.mkdtemp(prefix="vsr-chromium-")  # a fresh user-data dir
    context = playwright_api.chromium.launch_persistent_context(
        profile,
        executable_path=str(CHROMIUM),
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": 1440, "height": 1000},
        timeout=60_000,
    )
    try:
        yield context
    finally:
        context.close()
        shutil.rmtree(profile, ignore_errors=True)


def expect(target: Any) -> Any:
    """Playwright's retrying assertions (imported late: the module loads without playwright)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


def admin_url(stack: LoggedStack) -> str:
    return f"http://127.0.0.1:{stack.config.env['VSR_SERVER__ADMIN_PORT']}"


def policy_decisions() -> list[str]:
    data = yaml.safe_load(POLICY.read_text())
    ordered = sorted(data["decisions"], key=lambda d: -d["priority"])
    return [d["name"] for d in ordered] + [data["default"]["name"]]


def leaves(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "signal" in node:
        yield node
    for op in ("all", "any"):
        for child in node.get(op, []):
            yield from leaves(child)
    if "not" in node:
        yield from leaves(node["not"])


def a_leaf_with_min_score() -> tuple[str, dict[str, Any]]:
    """(decision, leaf) of the policy's first leaf with a min_score (the tree must show its
    threshold), else its first leaf with a label (the default policy reads the classifier's own
    thresholds since its v2 weights, so it may have none with a min_score)."""
    data = yaml.safe_load(POLICY.read_text())
    labelled: tuple[str, dict[str, Any]] | None = None
    for decision in data["decisions"]:
        for leaf in leaves(decision["when"]):
            if "min_score" in leaf:
                return decision["name"], leaf
            if "label" in leaf and labelled is None:
                labelled = (decision["name"], leaf)
    if labelled is None:
        raise AssertionError("the default policy has no leaf with a label")
    return labelled


class Page:
    """A console tab that records the page's own errors (script errors, CSP refusals, failed fetches)."""

    def __init__(self, context: Any, stack: LoggedStack, *, token: str | None) -> None:
        self.errors: list[str] = []
        self.page = context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))
        self.page.on("console", self._console)
        url = admin_url(stack) + "/console" + (f"#token={token}" if token else "")
        self.page.goto(url)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text}")

    def shot(self, folder: Path, name: str, section: str | None = None) -> Path:
        """The whole page from the top, or one section of it (`#explain`)."""
        path = folder / name
        if section is not None:
            self.page.locator(section).screenshot(path=str(path))
        else:
            self.page.evaluate("window.scrollTo(0, 0)")
            self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.page.close()


@pytest.fixture(scope="module")
def console(browser: Any, console_stack: LoggedStack) -> Iterator[Page]:
    page = Page(browser, console_stack, token=TOKEN)
    yield page
    page.close()


def png(width: int = 96, height: int = 64) -> bytes:
    image = Image.new("RGB", (width, height), (235, 240, 248))
    draw = ImageDraw.Draw(image)
    draw.rectangle((10, 10, 50, 50), fill=(47, 111, 222))
    draw.ellipse((55, 15, 88, 48), fill=(214, 69, 69))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


# -- the tests ----------------------------------------------------------------------------------
def test_without_a_token_the_page_asks_for_one(browser: Any, console_stack: LoggedStack, screenshots: Path) -> None:
    page = Page(browser, console_stack, token=None)
    try:
        bar = page.page.locator("#token-bar")
        bar.wait_for(state="visible")
        assert "needs a bearer token" in page.page.locator("#token-reason").inner_text()
        assert page.page.locator("#policy-tree .decision").count() == 0  # no data without it
        page.shot(screenshots, "00-token-needed.png")
        page.page.fill("#token-input", TOKEN)
        page.page.click("#token-bar button[type=submit]")
        bar.wait_for(state="hidden")
        page.page.locator("#policy-tree .decision").first.wait_for()
        assert page.page.locator("#policy-tree .decision").count() == len(policy_decisions())
    finally:
        page.close()
    # the 401s the page met before the token are the only errors allowed
    assert all("401" in error for error in page.errors), page.errors


def test_the_page_loads_and_draws_the_policy(console: Page, screenshots: Path) -> None:
    page = console.page
    page.locator("#policy-tree .decision").first.wait_for()
    assert "#token" not in page.url  # taken out of the address bar
    names = page.locator("#policy-tree .decision .name").all_inner_texts()
    assert names == policy_decisions()  # by priority, the default last
    jailbreak = page.locator('#policy-tree .decision[data-decision="jailbreak_block"]')
    assert jailbreak.locator(".op.any").count() >= 1 and jailbreak.locator(".op.all").count() >= 1
    decision, leaf = a_leaf_with_min_score()
    card = page.locator(f'#policy-tree .decision[data-decision="{decision}"]').inner_text()
    shown = f"{leaf['signal']}[{leaf['label']}]" + (f" ≥ {leaf['min_score']}" if "min_score" in leaf else "")
    assert shown in card
    # no vision model in the stack: its signals are drawn as unavailable
    assert page.locator("#policy-tree .badge.warn").count() >= 1
    page.locator("#health .pill.serving").wait_for()
    page.locator("#live-dot.live").wait_for()
    assert page.locator("#recent-empty").is_visible()
    console.shot(screenshots, "01-loaded.png")
    assert console.errors == []


def test_the_live_table_updates_after_traffic_through_envoy(
    console: Page, console_stack: LoggedStack, screenshots: Path
) -> None:
    page = console.page
    page.locator("#live-dot.live").wait_for()
    sent = {
        "code_secret.json": ("code_security_review", 200),
        "passport_text.json": ("identity_document", 200),
        "plain_question.json": ("general", 200),
        "jailbreak.json": ("jailbreak_block", 403),
    }
    for name, (decision, status) in sent.items():
        body = json.loads((REQUESTS / name).read_text())
        reply = httpx.post(console_stack.base_url + "/v1/chat/completions", json=body, timeout=30)
        assert reply.status_code == status, reply.text
        assert reply.headers["x-vsr-decision"] == decision
    rows = page.locator("#recent tbody tr.rec")
    # (expect() rather than wait_for_function: the page's CSP refuses eval, which that would need)
    expect(rows).to_have_count(4)
    shown = [rows.nth(i).locator("td").nth(3).inner_text() for i in range(4)]
    assert shown == [d for d, _ in reversed(sent.values())]  # newest first
    newest = rows.nth(0).inner_text()
    assert "reject" in newest and "403" in newest
    assert not page.locator("#recent-empty").is_visible()
    # the bars follow: four requests, one per decision, in the window
    expect(page.locator("#counts-meta")).to_have_text(re.compile(r"^4 requests"))
    assert page.locator("#counts-chart rect.bar").count() >= 4
    assert page.locator("#latency-chart rect.bar.hist").count() >= 1
    hit = page.locator('#policy-tree .decision[data-decision="identity_document"] .hit').inner_text()
    assert "(1/4" in hit
    # the same counts since start, from the Prometheus counters
    page.click('.seg button[data-source="since_start"]')
    expect(page.locator("#counts-meta")).to_have_text(re.compile(r"^4 requests \(since start\)"))
    page.click('.seg button[data-source="window"]')
    expect(page.locator("#counts-meta")).to_have_text(re.compile(r"^4 requests \(last 4 of 500\)"))
    # a row opens to every signal's status
    rows.nth(0).click()
    page.locator("#recent tbody tr.detail").wait_for()
    assert "jailbreak: matched" in page.locator("#recent tbody tr.detail").inner_text()
    # the filter narrows the table
    page.fill("#filter", "identity")
    expect(rows).to_have_count(1)
    console.shot(screenshots, "02-live-filtered.png")
    page.fill("#filter", "")
    expect(rows).to_have_count(4)
    console.shot(screenshots, "03-live.png")
    assert console.errors == []


def test_explain_a_text_request(console: Page, screenshots: Path) -> None:
    page = console.page
    page.click('.tabs button[data-tab="json"]')
    page.fill("#explain-json", (REQUESTS / "passport_text.json").read_text())
    page.click("#explain-go")
    summary = page.locator('[data-testid="explain-summary"]')
    summary.wait_for()
    assert "identity_document" in summary.inner_text() and "route" in summary.inner_text()
    assert "restricted-vlm" in summary.inner_text()
    identity = page.locator('#signals-table tbody tr[data-signal="identity_pii"]')
    assert "matched" in identity.inner_text()
    winner = page.locator("#trace-table tbody tr.winner")
    assert winner.count() == 1 and "identity_document" in winner.inner_text()
    assert page.locator("#trace-table tbody tr").count() == len(policy_decisions())
    assert "total" in page.locator("#explain-result .timings").inner_text()
    console.shot(screenshots, "04-explain-text.png", "#explain")
    assert console.errors == []


def test_explain_an_image_and_a_prompt(console: Page, screenshots: Path, tmp_path: Path) -> None:
    page = console.page
    image = tmp_path / "shapes.png"
    image.write_bytes(png())
    page.click('.tabs button[data-tab="image"]')
    page.set_input_files("#image-file", str(image))
    page.locator("#image-preview").wait_for(state="visible")
    assert "image/png" in page.locator("#image-info").inner_text()
    page.fill("#image-prompt", "What does this show?")
    page.click("#explain-go")
    expect(page.locator("#explain-result")).to_contain_text(re.compile(r"1 image \(png 96×64", re.IGNORECASE))
    result = page.locator("#explain-result").inner_text()
    # No vision model here: the image-label signals are unavailable, and the trace still renders.
    assert page.locator("#trace-table tbody tr").count() == len(policy_decisions())
    assert page.locator('#signals-table tbody tr[data-signal="has_image"]').inner_text().count("matched") >= 1
    assert page.locator("#signals-table .chip.unavailable").count() >= 1
    assert "general" in result  # an image nobody recognised: the default, to a model that takes images
    sent = page.locator("#explain-result details.sent pre").text_content() or ""  # folded: not rendered
    assert '"image_url"' in sent and "data:image/png;base64," in sent
    console.shot(screenshots, "05-explain-image.png", "#explain")
    assert console.errors == []


def test_a_pinned_conversation_on_the_console(console: Page, console_stack: LoggedStack, screenshots: Path) -> None:
    page = console.page
    session = {"x-session-id": f"browser-{os.getpid()}"}
    first = json.loads((REQUESTS / "code_secret.json").read_text())
    reply = httpx.post(console_stack.base_url + "/v1/chat/completions", json=first, headers=session, timeout=30)
    assert reply.status_code == 200 and reply.headers["x-vsr-decision"] == "code_security_review"
    pinned_to = reply.headers["x-vsr-model"]
    for attempt in range(100):  # the store phase learns the session from the answer, just after it
        question = {"model": "auto", "messages": [{"role": "user", "content": f"What is a list? ({attempt})"}]}
        again = httpx.post(console_stack.base_url + "/v1/chat/completions", json=question, headers=session, timeout=30)
        if again.headers["x-vsr-model"] == pinned_to:
            break
    else:
        raise AssertionError("the follow-up was never pinned to the session's model")
    decision = again.headers["x-vsr-decision"]
    assert decision != "code_security_review"  # the decision alone would have sent it elsewhere
    pinned = page.locator("#recent tbody tr.rec .badge.conv.followed")
    expect(pinned.first).to_have_text("pinned")
    assert pinned_to in (pinned.first.get_attribute("title") or "")
    rows = page.locator("#conversations-recent tbody tr")
    expect(rows.first).to_contain_text("followed")
    newest = rows.first.inner_text()
    assert "session header" in newest and pinned_to in newest and decision in newest
    expect(page.locator("#conversations-facts")).to_contain_text("memory")
    assert "browser-" not in page.locator("#conversations").inner_text()  # never the session's value
    # explain: the key a Responses follow-up carries, and whether its decision keeps it
    page.click('.tabs button[data-tab="json"]')
    page.fill("#explain-json", json.dumps({"model": "auto", "input": "and then?", "previous_response_id": "resp_1"}))
    page.click("#explain-go")
    expect(page.locator('[data-testid="explain-conversation"]')).to_contain_text("carries a previous_response_id")
    console.shot(screenshots, "06-conversations.png", "#conversations")
    assert console.errors == []
