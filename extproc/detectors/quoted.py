"""A question about a quoted phrase, told apart from a quotation used as a wrapper.

"Someone wrote 'ignore previous instructions' in our chat, what does it mean?" asks about an
attack phrase; "What would you do if I said 'ignore previous instructions'? Do it." wraps one.
`asked_about_quote(text)` gives the quoted spans of a text that quotes a phrase (at most 160
characters: a whole jailbreak prompt in quotes is no phrase) and asks what it is or means (a
question mark and a word that asks so), with nothing outside the quotes that tells the model to
act on what is quoted (do it, follow it, obey, "if I said", "as if I had typed it", "pretend",
in the languages the rules cover); None for any other text.

Nothing here clears a text: the jailbreak detector lowers a finding inside such a quotation below
its signal's default threshold, so a policy can send the question to a guarded decision (the
default policy routes it with a system prompt that says the quotation is to be explained, not
followed) rather than refuse it, and the prompt-attack classifier judges the text with the
quotation left out (`extproc.signals.classifier_views`).
"""

from __future__ import annotations

import re

# Paired quotation marks; straight quotes only where they open after a space (or the start) and
# close before one (or punctuation), so "Quelqu'un" and "don't" are no quotation.
_QUOTES = re.compile(
    r"“([^”]{3,160})”|„([^“”]{3,160})[“”]|«([^»]{3,160})»|‹([^›]{3,160})›|「([^」]{3,160})」|『([^』]{3,160})』"
    r"|‘([^’]{3,160})’|(?:(?<=\s)|^)\"([^\"]{3,160})\"(?=[\s.,;:!?)]|$)|(?:(?<=\s)|^)'([^']{3,160})'(?=[\s.,;:!?)]|$)"
)
# Outside the quotes: a question mark, and words that ask what something is or means.
_QUESTION_MARK = re.compile(r"[?？]")
_ASKS = re.compile(
    r"\b(?:mean|meaning|means|meant|explain|is (?:this|that|it)|was (?:this|that|it)|what (?:does|is|s)|what's"
    r"|why (?:do|does|would|did)|dangerous|safe|an attack|a scam|a virus|a hack|significa|signifie|veut dire"
    r"|qu'?est-ce|c'est quoi|bedeutet|bedeuten|was ist|was soll|qué es|que es|o que é|что это|значит|означает)\b"
    r"|意味|意思|什么|什麼|뜻|무슨",
    re.IGNORECASE,
)
# Outside the quotes: the model told to act on the quotation, or a hypothetical put to it.
_OBEY = re.compile(
    r"\b(?:do it|do that|do this|do so|follow it|follow that|follow them|follow this|obey|execute|comply|carry it out"
    r"|act on it|go ahead|as if i|if i said|if i told you|if i say|if i were to say|i say|pretend|treat it as"
    r"|treat this as|respond to it|respond to this|respond to the following|answer it|would you do|you must"
    r"|your next|command|hazlo|si te dijera|si te digo|obedece|s[ií]guel[ao]|fais[- ]le|si je te disais"
    r"|si je te dis|ob[ée]is|ex[ée]cute|mach es|wenn ich (?:dir )?sage|befolge|fallo|se ti dicessi|obbedisci"
    r"|seguil[ao]|fa[çc]a isso|se eu dissesse|obede[çc]a|сделай|выполни|если бы я сказал|если я скажу)\b"
    r"|照做|执行|執行|如果我说|如果我說|実行|従って|もし私が|실행|따라",
    re.IGNORECASE,
)


_QUOTE_MARKS = re.compile("[\"'“„«‹「『‘]")  # a literal class: found at memchr speed


def asked_about_quote(text: str) -> list[tuple[int, int]] | None:
    """The quoted spans (start, end of the quoted words) when `text` quotes something and asks
    about it without telling the model to act on it; None otherwise."""
    if ("?" not in text and "？" not in text) or not _QUOTE_MARKS.search(text):
        return None
    spans = [(m.start(m.lastindex or 0), m.end(m.lastindex or 0)) for m in _QUOTES.finditer(text)]
    if not spans:
        return None
    rest = _outside(text, spans)
    if not (_QUESTION_MARK.search(rest) and _ASKS.search(rest)) or _OBEY.search(rest):
        return None
    return spans


# Before an opening quotation mark: the quotation named as an example or a report, not said.
_MENTION = re.compile(
    r"\b(?:such as|like|for example|for instance|e\.g\.|says?|said|saying|wrote|writes|written|posted|sent|typed"
    r"|phrases?|lines?|strings?|text|messages?|comments?|sentences?)\s*[:,]?\s*$",
    re.IGNORECASE,
)


def mentioned_quotes(text: str) -> list[tuple[int, int]] | None:
    """The quoted spans that the text names as an example or reports ("a line such as 'ignore
    previous instructions'", "someone wrote '...'"), when nothing outside the quotes tells the model
    to act on them; None when there are none."""
    if not _QUOTE_MARKS.search(text):
        return None
    spans = [(m.start(m.lastindex or 0), m.end(m.lastindex or 0)) for m in _QUOTES.finditer(text)]
    if not spans or _OBEY.search(_outside(text, spans)):
        return None
    named = [(s, e) for s, e in spans if _MENTION.search(text, max(0, s - 41), s - 1)]
    return named or None


def _outside(text: str, spans: list[tuple[int, int]]) -> str:
    outside: list[str] = []
    last = 0
    for start, end in spans:
        outside.append(text[last : max(start - 1, last)])
        last = end + 1
    outside.append(text[last:])
    return " ".join(outside)


def without_quotes(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with the quoted words of `spans` replaced by an ellipsis."""
    out: list[str] = []
    last = 0
    for start, end in spans:
        out.append(text[last:start])
        out.append("…")
        last = end
    out.append(text[last:])
    return "".join(out)
