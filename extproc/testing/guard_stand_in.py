"""A stand-in for a guard model served by an inference engine: one aiohttp server that speaks the
three wire formats `extproc.signals.remote_guard` reads (vLLM `/classify`, an OpenAI-compatible
`/v1/chat/completions` answering as Llama Guard or Qwen3Guard-Gen, TEI `/predict`), so the
remote-guard stage can be tested and benchmarked without a GPU. It calls a text unsafe when it
holds one of `unsafe_words`; it can answer late (`delay_s`), fail (`mode`: `http_500`,
`garbage`, `hang`) and records every body it received.

It runs on its own event loop in a thread (`start()` / `stop()`), so a synchronous test (an Envoy
stack) and an asynchronous one can both use it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

from aiohttp import web

from extproc.web import AppServer

Mode = Literal["ok", "http_500", "garbage", "hang"]
ChatStyle = Literal["llama_guard", "qwen3guard"]
DEFAULT_UNSAFE_WORDS = ("bomb", "poison", "炸弹", "бомб", "قنبلة")


class GuardStandIn:
    def __init__(
        self,
        *,
        unsafe_words: Sequence[str] = DEFAULT_UNSAFE_WORDS,
        delay_s: float = 0.0,
        chat_style: ChatStyle = "qwen3guard",
        labels: tuple[str, str] = ("safe", "unsafe"),
    ) -> None:
        self.unsafe_words = tuple(w.lower() for w in unsafe_words)
        self.delay_s = delay_s
        self.chat_style: ChatStyle = chat_style
        self.labels = labels  # class 0, class 1 (the unsafe one)
        self.mode: Mode = "ok"
        self.received: list[tuple[str, Any]] = []  # (path, JSON body)
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: AppServer | None = None

    # --- the verdict ------------------------------------------------------------------------

    def is_unsafe(self, text: str) -> bool:
        lowered = text.lower()
        return any(word in lowered for word in self.unsafe_words)

    def _classify(self, body: Any) -> dict[str, Any]:
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for index, text in enumerate(inputs):
            unsafe = self.is_unsafe(text)
            probs = [0.03, 0.97] if unsafe else [0.96, 0.04]
            data.append({"index": index, "label": self.labels[int(unsafe)], "probs": probs, "num_classes": 2})
        return {"id": "classify-standin", "object": "list", "created": int(time.time()), "model": body["model"],
                "data": data, "usage": {"prompt_tokens": 8, "total_tokens": 8}}  # fmt: skip

    def _predict(self, body: Any) -> list[Any]:
        inputs = body["inputs"]

        def scores(text: str) -> list[dict[str, Any]]:
            unsafe = self.is_unsafe(text)
            top, other = (self.labels[1], self.labels[0]) if unsafe else (self.labels[0], self.labels[1])
            return [{"label": top, "score": 0.97}, {"label": other, "score": 0.03}]

        return scores(inputs) if isinstance(inputs, str) else [scores(t) for t in inputs]

    def _chat(self, body: Any) -> dict[str, Any]:
        text = body["messages"][-1]["content"]
        unsafe = self.is_unsafe(text)
        if self.chat_style == "llama_guard":
            reply = "unsafe\nS1,S9" if unsafe else "safe"
        else:
            reply = "Safety: Unsafe\nCategories: Violent" if unsafe else "Safety: Safe\nCategories: None"
        return {"id": "chatcmpl-standin", "object": "chat.completion", "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26}}  # fmt: skip

    # --- serving ----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.received.append((request.path, body))
        if self.mode == "hang":
            await asyncio.sleep(3600)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.mode == "http_500":
            return web.json_response({"error": {"message": "stand-in failure"}}, status=500)
        if self.mode == "garbage":
            return web.Response(text="<html>not json</html>", content_type="text/html")
        if request.path in ("/classify", "/v1/classify"):
            return web.json_response(self._classify(body))
        if request.path == "/predict":
            return web.json_response(self._predict(body))
        if request.path == "/v1/chat/completions":
            return web.json_response(self._chat(body))
        return web.json_response({"error": {"message": f"no route {request.path}"}}, status=404)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        return app

    def start(self) -> int:
        """Serve on a free loopback port in a thread of its own; the port."""
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = AppServer(self.app(), "127.0.0.1", 0)
            self.port = loop.run_until_complete(self._server.start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._server.close())
            loop.close()

        self._thread = threading.Thread(target=run, name="guard-stand-in", daemon=True)
        self._thread.start()
        if not ready.wait(10.0):
            raise RuntimeError("guard stand-in did not start")
        return self.port

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)
        self._loop = self._thread = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def texts(self) -> list[str]:
        """The texts the guard was asked about, in order, whatever the wire format."""
        out: list[str] = []
        for _path, body in self.received:
            if "messages" in body:
                out.append(str(body["messages"][-1]["content"]))
            elif "input" in body:
                out += body["input"] if isinstance(body["input"], list) else [body["input"]]
            else:
                out += [body["inputs"]] if isinstance(body["inputs"], str) else list(body["inputs"])
        return out
