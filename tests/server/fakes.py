"""A tiny stand-in for the Router, so the servicer can be tested without policies or models."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FakeImmediate:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeOutcome:
    action: str
    decision: str | None
    status: int = 200
    cluster: str | None = None
    model: str | None = None
    upstream_model: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    signals: list[str] = field(default_factory=list)
    message: str = ""

    def rewritten_body(self) -> bytes:
        return json.dumps({**self.raw, "model": self.upstream_model or self.model}).encode()

    def request_headers(self) -> dict[str, str]:
        return {
            "x-vsr-cluster": self.cluster or "",
            "x-vsr-decision": self.decision or "",
            "x-vsr-model": self.model or "",
        }

    def response_headers(self) -> dict[str, str]:
        return {
            "x-vsr-decision": self.decision or "none",
            "x-vsr-model": self.model or "none",
            "x-vsr-signals": ",".join(self.signals) or "none",
        }

    def trace_header(self) -> str:
        return f"d[{self.decision}] s[{' '.join(self.signals)}]\nsecond line"

    def immediate_response(self) -> FakeImmediate:
        headers = {**self.response_headers(), "content-type": "application/json"}
        body = {
            "error": {"message": self.message, "type": "invalid_request_error", "code": self.decision, "param": None}
        }
        return FakeImmediate(self.status, headers, json.dumps(body).encode())


class FakeRouter:
    """Routes on words: 'jailbreak' -> reject 403, 'bug' -> code cluster, else general; bad JSON -> 400."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[bytes, str, str | None]] = []
        self.fail = fail

    async def route(
        self, body: bytes, *, path: str = "/v1/chat/completions", request_id: str | None = None
    ) -> FakeOutcome:
        self.calls.append((body, path, request_id))
        if self.fail:
            raise RuntimeError("boom")
        try:
            raw = json.loads(body)
            if not isinstance(raw, dict):
                raise ValueError
        except ValueError:
            return FakeOutcome("error", None, status=400, message="Request body is not valid JSON.")
        text = json.dumps(raw.get("messages", ""))
        if "jailbreak" in text:
            return FakeOutcome("reject", "jailbreak_block", status=403, signals=["jailbreak"], message="blocked")
        if "bug" in text:
            return FakeOutcome(
                "route",
                "code_security_review",
                cluster="code_security",
                model="code-security",
                upstream_model="Qwen/Qwen2.5-VL-32B-Instruct",
                raw=raw,
                signals=["code_present", "code_review_words"],
            )
        return FakeOutcome(
            "route",
            "general",
            cluster="general",
            model="general",
            upstream_model="meta-llama/Llama-3.1-8B-Instruct",
            raw=raw,
        )
