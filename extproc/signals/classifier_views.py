"""What the builtin prompt-attack classifier reads of one text: the text as sent, or views of it.

Two kinds of text read as attacks to the lexical n-grams whatever they mean, and are judged by
what they mean instead:

- encoded payloads (`extproc.detectors.encoded`): "what does this base64 say? <a greeting>".
  When the lexical stage clears every decoded payload on its own, the decoded text replaces the
  text as sent; otherwise both are judged (an instruction hidden in base64 is caught either way);
- a user taking back their own earlier message (`extproc.detectors.retraction`): "ignore my last
  message, here is the right paragraph". For a text the lexical stage does not clear, the text
  without that clause is judged instead (everything else it says is still read).

A view's `where` suffix names what was done, for the evidence: `message[2] (base64 decoded)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from extproc.detectors.encoded import decode_payloads
from extproc.detectors.retraction import strip_retractions

View = tuple[str, str]  # (where-suffix, text); "" for the text as sent


def _suffix(notes: Sequence[str]) -> str:
    return f"({'; '.join(notes)})" if notes else ""


def text_views(text: str, cleared: Callable[[str], bool], *, decode: bool, retractions: bool) -> tuple[View, ...]:
    """The views of `text` to judge; `cleared(t)`: the lexical stage finds `t` benign on its own
    (below every output's `low`)."""
    notes: list[str] = []
    base = text
    if retractions and not cleared(text):
        kept = strip_retractions(text)
        if kept is not None:
            base = kept
            notes.append("an earlier message taken back")
    views: tuple[View, ...] = ((_suffix(notes), base),)
    if decode:
        decoded = decode_payloads(base)
        if decoded is not None:
            view = (_suffix([*notes, f"{decoded.how} decoded"]), decoded.text)
            views = (view,) if all(cleared(payload) for payload in decoded.payloads) else (*views, view)
    return views
