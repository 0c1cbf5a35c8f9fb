from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from extproc.ops.demo_upstream import DemoServer, DemoUpstream
from extproc.ops.stack import free_port


@pytest.fixture
async def demo() -> AsyncIterator[str]:
    port = free_port()
    server = DemoServer([DemoUpstream("general", "127.0.0.1", port, ("llama",), stream_delay_s=0.0)])
    await server.start()
    yield f"http://127.0.0.1:{port}"
    await server.close()


async def test_chat_says_who_served_it(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        reply = await client.post(
            "/v1/chat/completions",
            json={"model": "llama", "messages": [{"role": "user", "content": "hello"}]},
            headers={"x-vsr-decision": "general"},
        )
    assert reply.status_code == 200
    assert reply.headers["x-demo-upstream"] == "general"
    assert reply.headers["x-demo-model"] == "llama"
    body = reply.json()
    assert body["model"] == "llama"
    assert "cluster=general model=llama decision=general" in body["choices"][0]["message"]["content"]


async def test_chat_stream_is_sse(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi there"}]}
        async with client.stream("POST", "/v1/chat/completions", json=body) as reply:
            assert reply.headers["content-type"] == "text/event-stream"
            events = [line async for line in reply.aiter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "cluster=general" in "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)


async def test_other_endpoints(demo: str) -> None:
    async with httpx.AsyncClient(base_url=demo) as client:
        models = (await client.get("/v1/models")).json()
        assert [m["id"] for m in models["data"]] == ["llama"]
        completion = (await client.post("/v1/completions", json={"model": "m", "prompt": "once"})).json()
        assert completion["object"] == "text_completion"
        response = (await client.post("/v1/responses", json={"model": "m", "input": "hi"})).json()
        assert response["object"] == "response" and "cluster=general" in response["output_text"]
        bad = await client.post("/v1/chat/completions", content=b"{x", headers={"content-type": "application/json"})
        assert bad.status_code == 400 and "error" in bad.json()
        assert (await client.get("/nope")).status_code == 404
