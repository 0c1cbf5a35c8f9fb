"""Upstream answers checked and reassembled for storing, and cache hits rendered.

The answer is read by `extproc.protocol.answers`; what is stored is decided here. Only a
complete answer is stored: status 200, one choice, `finish_reason: stop` (Responses:
`status: completed` with message output only), no tool or function calls, and not one of our
own replies (ids carrying `-vsr-`, models named `vsr/...`). A streamed answer (SSE) is
reassembled from its deltas; it must end with `[DONE]` (Chat, Completions) or a
`response.completed` event (Responses). Every refusal says why, for the metrics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from extproc.protocol.answers import Answer, read_json, read_stream
from extproc.protocol.request import ApiKind
from extproc.protocol.responses import assistant_reply, assistant_reply_stream, dumps


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    text: str
    body: bytes  # the answer as a non-streamed JSON body
    model: str
    completion_tokens: int


class NotStorable(ValueError):
    """Why an answer is not stored (a short reason, used as a metric label)."""


def storable_answer(api: ApiKind, status: int, content_type: str, body: bytes) -> StoredAnswer:
    if status != 200:
        raise NotStorable("status")
    if "text/event-stream" in content_type.lower():
        return _from_stream(api, body)
    try:
        doc = json.loads(body)
    except ValueError:
        raise NotStorable("not_json") from None
    if not isinstance(doc, dict):
        raise NotStorable("not_json")
    answer = read_json(api, doc)
    text = _complete_text(api, answer)
    return StoredAnswer(text=text, body=body, model=_not_ours(answer), completion_tokens=answer.completion_tokens)


def hit_body(api: ApiKind, answer: StoredAnswer, *, stream: bool) -> tuple[bytes, str]:
    """The body and content type a hit is served with: the stored JSON, or SSE for a stream."""
    if stream:
        return assistant_reply_stream(api, answer.model, answer.text), "text/event-stream"
    return answer.body, "application/json"


def _not_ours(answer: Answer) -> str:
    """The answer's model, unless the answer is one of our own replies."""
    if "-vsr-" in answer.answer_id or answer.model.startswith("vsr/"):
        raise NotStorable("ours")
    return answer.model


def _complete_text(api: ApiKind, answer: Answer) -> str:
    """The text of a complete, text-only answer (checked in this order: the first failure names
    the refusal)."""
    if api is ApiKind.MESSAGES:
        if answer.finish_reason != "end_turn":
            raise NotStorable("finish_reason")
        for output in answer.outputs:
            if output.kind == "tool_call":
                raise NotStorable("tool_call")
            if output.kind == "other":
                raise NotStorable("no_output")
    elif api is ApiKind.RESPONSES:
        if answer.finish_reason != "completed":
            raise NotStorable("incomplete")
        if not answer.outputs:
            raise NotStorable("no_output")
        if any(output.kind != "text" for output in answer.outputs):
            raise NotStorable("tool_call")  # only message items: calls, reasoning and the rest are not stored
    else:
        if answer.choices != 1:
            raise NotStorable("choices")
        if answer.finish_reason != "stop":
            raise NotStorable("finish_reason")
        if answer.names_tool_calls:
            raise NotStorable("tool_call")
    texts = answer.texts()
    if not texts:
        raise NotStorable("no_output")
    return "".join(texts)


def _from_stream(api: ApiKind, body: bytes) -> StoredAnswer:
    answer = read_stream(api, body)
    if api is ApiKind.RESPONSES:
        if not answer.complete:
            raise NotStorable("incomplete")
        text = _complete_text(api, answer)
        return StoredAnswer(text, dumps(answer.source or {}), _not_ours(answer), answer.completion_tokens)
    if not answer.complete:
        raise NotStorable("incomplete")
    if api is ApiKind.MESSAGES:
        text = _complete_text(api, answer)
        model = _not_ours(answer)
        tokens = answer.completion_tokens
        stored = assistant_reply(api, model, text)
        stored["id"] = stored["id"].replace("-vsr-", "-cache-")
        stored["usage"] = {"input_tokens": 0, "output_tokens": tokens}
        return StoredAnswer(text=text, body=dumps(stored), model=model, completion_tokens=tokens)
    if answer.unreadable:
        raise NotStorable("not_json")
    model = _not_ours(answer)
    if answer.choices > 1:
        raise NotStorable("choices")
    if answer.names_tool_calls:
        raise NotStorable("tool_call")
    if answer.finish_reason != "stop":
        raise NotStorable("finish_reason")
    text = "".join(answer.texts())
    tokens = answer.completion_tokens
    full = assistant_reply(api, model, text)
    full["id"] = full["id"].replace("-vsr-", "-cache-")
    full["usage"] = {"completion_tokens": tokens, "prompt_tokens": 0, "total_tokens": tokens}
    return StoredAnswer(text=text, body=dumps(full), model=model, completion_tokens=tokens)
