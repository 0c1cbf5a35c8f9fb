"""What the builtin prompt-attack classifier reads of one text: the text as sent, or views of it.

Two kinds of text read as attacks to the lexical n-grams whatever they mean, and are judged by
what they mean instead:

- encoded payloads (`extproc.detectors.encoded`): "what does this base64 say? <a greeting>".
  When the lexical stage clears every decoded payload on its own, the decoded text replaces the
  text as sent; otherwise both are judged (an instruction hidden in base64 is caught either way);
- obfuscated letters (`extproc.detectors.reader_view`): zero-width and bidi characters between
  letters, Cyrillic or Greek look-alikes, leetspeak, letters separated by spaces. The text as a
  reader sees it is judged beside the text as sent (under `decode`: both are the text read for
  what it says), so an attack is caught either way and the evidence names the view that matched;
- a user taking back their own earlier message (`extproc.detectors.retraction`): "ignore my last
  message, here is the right paragraph". For a text the lexical stage does not clear, the text
  without that clause is judged instead (everything else it says is still read).

- a question about a quoted attack phrase (`extproc.detectors.quoted`): "someone wrote 'ignore
  previous instructions' in our chat, what does it mean?". For a text the lexical stage does not
  clear, whose quotation holds what the jailbreak patterns find, the text with the quotation left
  out is judged instead; a quotation the text tells the model
  to act on ("what would you do if I said '...'? do it") is no such question and is judged whole.

- a long text padded with harmless sentences (`windows`): the n-grams of an attack followed by a
  paragraph about the weather are diluted below what the whole text is judged at. For a text of
  at least `WINDOW_MIN_CHARS` with two sentences or more, the run of one or two sentences that
  the lexical stage scores highest as an attack (the `attack` output) is judged beside the whole,
  when every other output clears it (so a window never makes a plain request read as harmful:
  short sentences of ordinary requests often score high there) and either the lexical stage is
  sure of it as an attack, or the whole text is already unsure. A benign long prompt with one
  odd sentence ("Output:", "### OUTPUT RULES") is cleared as a whole and its sentences are not
  sure alone, so it gains no view. Windows are taken of the text as read too (padding and
  obfuscation together). Scoring the windows costs the lexical stage about three times the
  text; the embedding stage only sees a window of a text it was unsure of anyway.

A view's `where` suffix names what was done, for the evidence: `message[2] (base64 decoded)`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from extproc.detectors.encoded import decode_payloads
from extproc.detectors.jailbreak import find_jailbreak
from extproc.detectors.quoted import asked_about_quote, without_quotes
from extproc.detectors.reader_view import reader_view
from extproc.detectors.retraction import strip_retractions

View = tuple[str, str]  # (where-suffix, text); "" for the text as sent

WINDOW_OUTPUT = "attack"  # the output a window is chosen and admitted by
WINDOW_MIN_CHARS = 200  # where the weights judge a text as long (their `long_high`)
_WINDOW_SHORTEST = 24  # a shorter window ("Output:", "</prompt>") is markup or a heading, too little to judge
_WINDOW_SENTENCES = 2
# A sentence ends at . ! ? (or their CJK forms) before white space, or at a line break.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\s*\n\s*")


class Thresholds(Protocol):
    @property
    def low(self) -> float: ...
    def sure_for(self, text: str, override: float | None = None, latin: bool | None = None) -> float: ...


class LexicalStage(Protocol):
    """What the views need of the builtin classifier: its outputs, their thresholds, lexical scores."""

    @property
    def labels(self) -> tuple[str, ...]: ...
    def thresholds(self, label: str) -> Thresholds: ...
    def lexical_scores(self, text: str) -> Sequence[float]: ...
    # Is `text` mostly Latin letters? The model counts a text's script once (cached), so the
    # window's bar is read through it rather than counted again by `sure_for`.
    def latin(self, text: str) -> bool: ...


def sentence_windows(text: str) -> list[str]:
    """Every run of one or two sentences of `text` long enough to judge (none for a short or
    one-sentence text)."""
    if len(text) < WINDOW_MIN_CHARS:
        return []
    sentences = [part for part in _SENTENCE_BREAK.split(text) if part.strip()]
    if len(sentences) < 2:
        return []
    widths = range(1, min(_WINDOW_SENTENCES, len(sentences) - 1) + 1)
    runs = (" ".join(sentences[i : i + w]) for w in widths for i in range(len(sentences) - w + 1))
    return [run for run in runs if len(run) >= _WINDOW_SHORTEST]


def suspicious_window(text: str, model: LexicalStage) -> str | None:
    """The window of `text` the lexical stage scores highest as an attack, when it scores higher than
    the whole, every other output clears it, and the lexical stage is sure of it or unsure of the
    whole (see the module docstring); else None."""
    if WINDOW_OUTPUT not in model.labels:
        return None
    k = model.labels.index(WINDOW_OUTPUT)
    windows = sentence_windows(text)
    if not windows:
        return None
    best = max(windows, key=lambda w: model.lexical_scores(w)[k])
    scores = model.lexical_scores(best)
    whole = model.lexical_scores(text)[k]
    thresholds = [model.thresholds(label) for label in model.labels]
    if scores[k] <= whole or scores[k] < thresholds[k].low:
        return None
    if any(p >= t.low for j, (p, t) in enumerate(zip(scores, thresholds, strict=True)) if j != k):
        return None
    sure = thresholds[k].sure_for(best, latin=model.latin(best))
    return best if scores[k] >= sure or whole >= thresholds[k].low else None


def _suffix(notes: Sequence[str]) -> str:
    return f"({'; '.join(notes)})" if notes else ""


def text_views(
    text: str, model: LexicalStage, *, decode: bool, retractions: bool, windows: bool = False
) -> tuple[View, ...]:
    """The views of `text` to judge by the builtin classifier `model`."""
    lows = [model.thresholds(label).low for label in model.labels]

    def cleared(t: str) -> bool:  # the lexical stage finds `t` benign on its own (below every `low`)
        return all(p < low for p, low in zip(model.lexical_scores(t), lows, strict=True))

    notes: list[str] = []
    base = text
    if retractions and not cleared(text):
        kept = strip_retractions(text)
        if kept is not None:
            base = kept
            notes.append("an earlier message taken back")
        spans = asked_about_quote(base)
        # Only a quotation that holds an attack phrase (the patterns find one inside it): leaving
        # out any other quotation ("tighten up this tweet thread: '...'?") changes nothing an
        # attacker wrote, and can read worse to the embedding stage than the text as sent.
        if spans is not None and any(s <= f.start and f.end <= e for f in find_jailbreak(base) for s, e in spans):
            base = without_quotes(base, spans)
            notes.append("a quoted phrase asked about, left out")
    views: tuple[View, ...] = ((_suffix(notes), base),)
    readings = [(notes, base)]  # what windows are taken of
    if decode:
        decoded = decode_payloads(base)
        if decoded is not None:
            view = (_suffix([*notes, f"{decoded.how} decoded"]), decoded.text)
            views = (view,) if all(cleared(payload) for payload in decoded.payloads) else (*views, view)
        # Where a decoding replaced the text, the decoded text is read: a leetspeak word can pass
        # for base64 ("c0nfl1c7" decodes to a few letters) and must not hide the rest from the view.
        replaced = views[0][1] is not base
        read_notes = [*notes, f"{decoded.how} decoded"] if replaced and decoded is not None else notes
        reading = reader_view(views[0][1])
        if reading is not None:
            views = (*views, (_suffix([*read_notes, f"as read: {reading.how}"]), reading.text))
            readings.append(([*read_notes, f"as read: {reading.how}"], reading.text))  # padded and obfuscated
    if windows:
        for view_notes, judged in readings:
            window = suspicious_window(judged, model)
            if window is not None:
                views = (*views, (_suffix([*view_notes, "its most suspicious sentences"]), window))
    return views
