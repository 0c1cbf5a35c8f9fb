"""What goes back on the wire in the request's own format: the rewritten request body, and the
replies the router answers itself (a clarifying assistant message, streamed or not), each in the
shape its format (`extproc.protocol.formats`) gives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extproc.protocol.formats import format_for
from extproc.protocol.formats.base import SystemPromptMode as SystemPromptMode
from extproc.protocol.jsonbody import dumps as dumps
from extproc.protocol.request import ApiKind


def rewrite_body(
    raw: dict[str, Any],
    api: ApiKind,
    model: str,
    system_prompt: str | None = None,
    mode: SystemPromptMode = "insert",
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[bytes, list[str]]:
    """The request body with `model` replaced and `system_prompt` inserted before the client's
    system text (`insert`) or in place of it (`replace`).

    Returns the new bytes and notes on anything that could not be applied. The parsed
    request is not modified (it may be logged or replayed afterwards).
    """
    body = dict(raw)
    body["model"] = model
    notes: list[str] = []
    if system_prompt is not None:
        note = format_for(api).insert_system_prompt(body, raw, system_prompt, mode)
        if note is not None:
            notes.append(note)
    if edit is not None:  # further body edits (reasoning fields) on the copy
        edit(body)
    return dumps(body), notes


def assistant_reply(api: ApiKind, model: str, text: str) -> dict[str, Any]:
    """A complete, non-streamed reply in the request's API shape."""
    fmt = format_for(api)
    return fmt.reply(model, text, *fmt.new_reply_id())


def assistant_reply_stream(api: ApiKind, model: str, text: str) -> bytes:
    """The same reply as server-sent events, ending with the stream's terminator."""
    fmt = format_for(api)
    return fmt.reply_stream(model, text, *fmt.new_reply_id())
