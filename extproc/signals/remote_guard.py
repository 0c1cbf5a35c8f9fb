"""A guard or classifier model served by an inference engine, asked over HTTP (`type: remote_guard`).

The cascade's cheap stage runs in process on every request (the prompt-attack classifier's lexical
stage, microseconds); a policy sends a text to the remote guard only where that stage is unsure,
with a rule such as `all: [{signal: attack_fast, label: harmful_unsure}, {signal: guard, label:
unsafe}]`: lazy dispatch runs a heavy signal only when a decision still needs it, so a request the
cheap stage is sure of never reaches the guard. The guard has its own `timeout_ms`, and its
`on_error` (a safety signal: `match` by default) says what a timeout, a refused connection, a
non-200 answer or an unreadable body means.

Three wire formats (`backend`), each the engine's documented one; the contracts are spelled out
in SECURITY.md ("Remote guard models"):

- `vllm_classify`: vLLM's classification API, `POST {url}/classify` with `{"model", "input": [text]}`;
  the answer's `data[0]` holds `label` (the arg-max class name) and `probs` (by class index). The
  unsafe score is `probs[unsafe_index]` when the policy names the index, else the arg-max
  probability when `label` is one of `unsafe_labels` (and 1 minus it otherwise, for two classes).
- `openai_chat`: an OpenAI-compatible chat endpoint serving a generative guard, `POST
  {url}/v1/chat/completions` with the text as the user message; the reply is parsed as Llama Guard
  writes it (`safe`, or `unsafe` and a line of category codes `S1,S10`) or as Qwen3Guard-Gen does
  (`Safety: Safe|Unsafe|Controversial`, `Categories: Violent, ...`), reasoning in `<think>` removed.
- `tei_predict`: Hugging Face text-embeddings-inference's sequence classification, `POST
  {url}/predict` with `{"inputs": text}`; the answer lists `{"label", "score"}` for every class. The
  unsafe score is the largest score among `unsafe_labels`.

Labels: `unsafe` (its score, the class probability or 1.0 for a generative verdict, present only
when it reaches `threshold`: the signal then matches), `controversial` (Qwen3Guard's middle level,
when said), and each category the guard named, lower-cased with runs of other characters as `_`
(`Violent` -> `violent`, `S10` -> `s10`). Its evidence names the backend, the verdict and the categories, never
the text.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from extproc.protocol.request import RoutingRequest
from extproc.signals.base import COST_MODEL, Evaluation, Signal, SignalContext, TextSignalSpec

Backend = Literal["vllm_classify", "openai_chat", "tei_predict"]
DEFAULT_PATHS: dict[str, str] = {
    "vllm_classify": "/classify",
    "openai_chat": "/v1/chat/completions",
    "tei_predict": "/predict",
}
DEFAULT_UNSAFE_LABELS = ("unsafe", "harmful", "toxic", "jailbreak", "injection")
MAX_REPLY_BYTES = 1 << 20  # a guard's answer is a few hundred bytes; more is not a guard answering


class GuardError(Exception):
    """The guard answered something this client cannot read as a verdict (or did not answer)."""


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    unsafe: float  # 0..1: the unsafe class probability, or 1.0 / 0.0 for a generative verdict
    controversial: bool = False
    categories: tuple[str, ...] = ()
    label: str = ""  # what the guard said, as it said it (a class name, `unsafe`, `Safety: Unsafe`)


class RemoteGuardSpec(TextSignalSpec):
    type: Literal["remote_guard"]
    backend: Backend
    url: str = Field(pattern=r"^https?://[^\s/]+(/[^\s]*)?$")  # the engine's base URL
    path: str | None = Field(default=None, pattern=r"^/[^\s]*$")  # None: the backend's documented path
    model: str | None = None  # the served model's name (vLLM and chat endpoints ask for it)
    threshold: float = Field(default=0.5, gt=0.0, le=1.0)  # unsafe score at or above it: match
    unsafe_labels: list[str] = Field(default_factory=lambda: list(DEFAULT_UNSAFE_LABELS), min_length=1)
    unsafe_index: int | None = Field(default=None, ge=0)  # vllm_classify: the unsafe class's index in `probs`
    max_texts: int = Field(default=2, ge=1, le=16)  # the newest non-blank segments of `roles`, joined
    max_chars: int = Field(default=4000, ge=64, le=200_000)  # longer: head and tail kept
    max_tokens: int = Field(default=32, ge=1, le=4096)  # openai_chat: a verdict and a category line
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  # bearer token's variable

    @model_validator(mode="after")
    def _check(self) -> RemoteGuardSpec:
        if self.backend in ("vllm_classify", "openai_chat") and not self.model:
            raise ValueError(f"backend {self.backend} needs `model` (the served model's name)")
        if self.unsafe_index is not None and self.backend != "vllm_classify":
            raise ValueError("unsafe_index applies to backend vllm_classify only")
        return self

    @property
    def endpoint(self) -> str:
        return self.url.rstrip("/") + (self.path or DEFAULT_PATHS[self.backend])


def label_slug(name: str) -> str:
    """A category as a policy label: lower case, runs of other characters as one `_`."""
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def guard_text(request: RoutingRequest, spec: RemoteGuardSpec) -> str:
    """The newest `max_texts` non-blank segments of `spec.roles`, joined by blank lines; past
    `max_chars` its head (three quarters) and tail are kept."""
    segments = [s.text for s in request.iter_text(spec.roles) if s.text and not s.text.isspace()]
    text = "\n\n".join(segments[-spec.max_texts :])
    if len(text) > spec.max_chars:
        head = spec.max_chars * 3 // 4
        text = text[:head] + "\n...\n" + text[len(text) - (spec.max_chars - head) :]
    return text


def request_body(spec: RemoteGuardSpec, text: str) -> dict[str, Any]:
    """The JSON body the backend's wire format asks for."""
    if spec.backend == "vllm_classify":
        return {"model": spec.model, "input": [text]}
    if spec.backend == "tei_predict":
        return {"inputs": text, "truncate": True}
    return {
        "model": spec.model,
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
        "max_tokens": spec.max_tokens,
    }


def _probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise GuardError(f"{where} must be a probability, got {value!r}")
    return float(value)


def parse_classify(body: Any, unsafe_labels: Sequence[str], unsafe_index: int | None = None) -> GuardVerdict:
    """vLLM `/classify`: `{"data": [{"index", "label", "probs": [...], "num_classes"}]}`."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        raise GuardError("classify answer lacks data[0]")
    first = data[0]
    label, probs = first.get("label"), first.get("probs")
    if not isinstance(label, str) or not isinstance(probs, list) or not probs:
        raise GuardError("classify answer's data[0] lacks label or probs")
    values = [_probability(p, "classify probs[]") for p in probs]
    unsafe_set = {u.lower() for u in unsafe_labels}
    if unsafe_index is not None:
        if unsafe_index >= len(values):
            raise GuardError(f"classify answer has {len(values)} classes, unsafe_index is {unsafe_index}")
        score = values[unsafe_index]
    elif label.lower() in unsafe_set:
        score = max(values)
    else:
        score = 1.0 - max(values) if len(values) == 2 else 0.0
    return GuardVerdict(score, label=label)


def parse_tei(body: Any, unsafe_labels: Sequence[str]) -> GuardVerdict:
    """TEI `/predict` for one input: `[{"label", "score"}, ...]` (a batch nests it once more)."""
    if isinstance(body, list) and len(body) == 1 and isinstance(body[0], list):
        body = body[0]
    if not isinstance(body, list) or not body:
        raise GuardError("predict answer is not a list of {label, score}")
    unsafe_set = {u.lower() for u in unsafe_labels}
    score, top, top_score = 0.0, "", -1.0
    for item in body:
        if not isinstance(item, dict) or not isinstance(item.get("label"), str):
            raise GuardError("predict answer item lacks a label")
        value = _probability(item.get("score"), "predict score")
        if item["label"].lower() in unsafe_set:
            score = max(score, value)
        if value > top_score:
            top, top_score = item["label"], value
    return GuardVerdict(score, label=top)


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_QWEN_SAFETY = re.compile(r"safety:\s*(safe|unsafe|controversial)\b", re.IGNORECASE)
_QWEN_CATEGORIES = re.compile(r"categories:\s*([^\n]*)", re.IGNORECASE)
_LLAMA_CODES = re.compile(r"\bS\d{1,2}\b")


def parse_guard_reply(reply: str) -> GuardVerdict:
    """A generative guard's reply: Qwen3Guard-Gen's `Safety: ...` / `Categories: ...` lines, or
    Llama Guard's first line `safe` / `unsafe` and the category codes after it."""
    text = _THINK.sub("", reply).strip()
    qwen = _QWEN_SAFETY.search(text)
    if qwen is not None:
        level = qwen.group(1).lower()
        found = _QWEN_CATEGORIES.search(text)
        named = [c.strip() for c in found.group(1).split(",")] if found else []
        categories = tuple(c for c in named if c and c.lower() != "none")
        return GuardVerdict(1.0 if level == "unsafe" else 0.0, level == "controversial", categories, qwen.group(0))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0].lower().rstrip(".") if lines else ""
    if first == "safe":
        return GuardVerdict(0.0, label="safe")
    if first == "unsafe":
        codes = tuple(dict.fromkeys(_LLAMA_CODES.findall(" ".join(lines[1:]))))
        return GuardVerdict(1.0, categories=codes, label="unsafe")
    raise GuardError(f"guard reply is neither Llama Guard's nor Qwen3Guard's format: {text[:60]!r}")


def parse_chat(body: Any) -> GuardVerdict:
    """An OpenAI chat completion: the verdict is in `choices[0].message.content`."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise GuardError("chat answer lacks choices[0].message.content") from exc
    if not isinstance(content, str):
        raise GuardError("chat answer's content is not a string")
    return parse_guard_reply(content)


def parse_answer(spec: RemoteGuardSpec, body: Any) -> GuardVerdict:
    if spec.backend == "vllm_classify":
        return parse_classify(body, spec.unsafe_labels, spec.unsafe_index)
    if spec.backend == "tei_predict":
        return parse_tei(body, spec.unsafe_labels)
    return parse_chat(body)


def verdict_evaluation(spec: RemoteGuardSpec, verdict: GuardVerdict) -> Evaluation:
    # A label leaf is true when its score is above 0: `unsafe` carries the score only where it
    # reaches `threshold`, the other labels only where the guard said them.
    matched = verdict.unsafe >= spec.threshold
    labels: dict[str, float] = {"unsafe": verdict.unsafe if matched else 0.0}
    if verdict.controversial:
        labels["controversial"] = 1.0
    for category in verdict.categories:
        slug = label_slug(category)
        if slug:
            labels[slug] = 1.0
    shown = f" [{', '.join(verdict.categories)}]" if verdict.categories else ""
    evidence = (f"{spec.backend}: {verdict.label or 'verdict'} unsafe={verdict.unsafe:.3f}{shown}",)
    return Evaluation(matched=matched, score=verdict.unsafe, labels=labels, evidence=evidence)


class RemoteGuardSignal(Signal):
    """Asks the remote guard about the request's text; a failure raises (the dispatcher applies
    `on_error`), so an unreachable guard is unknown, never "safe"."""

    safety: ClassVar[bool] = True
    cost: ClassVar[int] = COST_MODEL
    spec: RemoteGuardSpec

    def __init__(self, spec: RemoteGuardSpec) -> None:
        super().__init__(spec)
        self.spec = spec

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self.spec.api_key_env:
            token = os.environ.get(self.spec.api_key_env)
            if token:
                headers["authorization"] = f"Bearer {token}"
        return headers

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        text = guard_text(request, self.spec)
        if not text:
            return Evaluation(matched=False, evidence=("no text to guard",))
        body = await post_json(self.spec.endpoint, request_body(self.spec, text), self._headers(), ctx.remaining())
        return verdict_evaluation(self.spec, parse_answer(self.spec, body))


async def post_json(url: str, payload: Mapping[str, Any], headers: Mapping[str, str], timeout_s: float) -> Any:
    """POST `payload` as JSON and return the parsed JSON answer; GuardError on anything else.
    One connection per call (closed after it): the guard sees only the few texts the cheap stage
    is unsure of, and nothing is left open when a policy is reloaded."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=max(timeout_s, 0.001))
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, data=json.dumps(payload), headers=dict(headers)) as response,
        ):
            raw = await response.content.read(MAX_REPLY_BYTES + 1)
            status = response.status
    except aiohttp.ClientError as exc:
        raise GuardError(f"guard unreachable: {type(exc).__name__}: {exc}") from exc
    if status != 200:
        raise GuardError(f"guard answered HTTP {status}: {raw[:120].decode('utf-8', 'replace')!r}")
    if len(raw) > MAX_REPLY_BYTES:
        raise GuardError(f"guard answer over {MAX_REPLY_BYTES} bytes")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise GuardError(f"guard answer is not JSON: {exc}") from exc
