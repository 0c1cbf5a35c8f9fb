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
from extproc.protocol.formats import format_for
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
    """The text of a complete, text-only answer (the format's rules first: the first failure
    names the refusal)."""
    refusal = format_for(api).storable_refusal(answer)
    if refusal is not None:
        raise NotStorable(refusal)
    texts = answer.texts()
    if not texts:
        raise NotStorable("no_output")
    return "".join(texts)


def _from_stream(api: ApiKind, body: bytes) -> StoredAnswer:
    fmt = format_for(api)
    answer = read_stream(api, body)
    if not answer.complete:
        raise NotStorable("incomplete")
    if fmt.stream_style == "final_response":  # the final response is the answer's JSON, stored as it came
        text = _complete_text(api, answer)
        return StoredAnswer(text, dumps(answer.source or {}), _not_ours(answer), answer.completion_tokens)
    if fmt.stream_style == "assembled_message":
        text = _complete_text(api, answer)
        model = _not_ours(answer)
    else:  # choice deltas, reassembled
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
    stored = assistant_reply(api, model, text)
    stored["id"] = stored["id"].replace("-vsr-", "-cache-")
    stored["usage"] = fmt.usage(tokens)
    return StoredAnswer(text=text, body=dumps(stored), model=model, completion_tokens=tokens)
