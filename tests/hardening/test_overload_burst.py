"""A burst of distinct passport images well past OCR capacity, through the real Envoy and the
default policy: none may reach a non-restricted model. Each is classified (restricted), routed
fail-safe, or shed with 429 + Retry-After, and the server's metrics count the shed ones."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time
import urllib.request
from pathlib import Path

import httpx
import pytest

from extproc.testing.ocr_scenes import PASSPORT_FIELDS, passport_page, td3_lines
from tests.integration.conftest import running_stack, stack_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BURST = 16  # OCR reads one passport in ~0.6-1.3 s on 2 cores; the deadline allows a few per request


def passport_request(index: int) -> bytes:
    """A passport page with its own document number: distinct bytes, so no OCR cache hit."""
    fields = {**PASSPORT_FIELDS, "number": f"X{index:08d}"}
    out = io.BytesIO()
    passport_page(td3_lines(**fields)).save(out, "JPEG", quality=85)
    uri = "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()
    content = [{"type": "text", "text": "Summarize this"}, {"type": "image_url", "image_url": {"url": uri}}]
    return json.dumps({"model": "auto", "messages": [{"role": "user", "content": content}]}).encode()


async def send_all(base_url: str, bodies: list[bytes]) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as client:
        return list(
            await asyncio.gather(
                *(
                    client.post(base_url + "/v1/chat/completions", content=b, headers={"content-type": "application/json"})
                    for b in bodies
                )
            )
        )


def router_metric(admin_port: str, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5) as reply:
        lines = reply.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name))


def test_a_passport_burst_is_never_routed_to_a_non_restricted_model(tmp_path: Path) -> None:
    config = stack_config()
    with running_stack(config) as stack:
        bodies = [passport_request(i) for i in range(BURST)]
        replies = asyncio.run(send_all(stack.base_url, bodies))
        outcomes = [(r.status_code, r.headers.get("x-demo-upstream")) for r in replies]
        print(outcomes)
        for reply, (status, upstream) in zip(replies, outcomes, strict=True):
            assert status in (200, 429), reply.text[:300]
            if status == 200:
                assert upstream == "restricted_vlm"
                assert reply.headers["x-vsr-decision"] == "identity_document"
            else:
                assert upstream is None
                assert int(reply.headers["retry-after"]) >= 1
                assert json.loads(reply.content)["error"]["code"] == "overloaded"
        shed = sum(status == 429 for status, _ in outcomes)
        admin = config.env["VSR_SERVER__ADMIN_PORT"]
        assert router_metric(admin, "vsr_requests_shed_total") == shed
        # Within capacity (one at a time, once the burst's queued work has drained), passports get
        # every check again and reach the restricted model.
        time.sleep(3.0)
        for body in (bodies[-1], passport_request(BURST)):
            (reply,) = asyncio.run(send_all(stack.base_url, [body]))
            assert (reply.status_code, reply.headers.get("x-demo-upstream")) == (200, "restricted_vlm")
