"""The jailbreak search: anchors intersected, rules tried where they may start, findings mapped
back to the original text (see `extproc.detectors.jailbreak`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from extproc.detectors.common import Finding, check_kinds
from extproc.detectors.encoded import decode_payloads
from extproc.detectors.jailbreak.normal_form import LEET, LEET_HINT, normalize, normalize_with_map
from extproc.detectors.jailbreak.rules import ANCHORS, ANCHORS_ASCII, BY_ANCHOR, JAILBREAK_CATEGORIES, Rule
from extproc.detectors.jailbreak.script_rules import SCRIPT_HINT, SCRIPT_RULES


def _hits(view: str, anchors: Iterable[str], wanted: frozenset[str]) -> list[tuple[Rule, int, int]]:
    """Try each rule of each anchor at every whole-word occurrence of that anchor."""
    hits: list[tuple[Rule, int, int]] = []
    n = len(view)
    for anchor in anchors:
        rules = [r for r in BY_ANCHOR[anchor] if r.category in wanted]
        if not rules:
            continue
        size = len(anchor)
        pos = view.find(anchor)
        while pos != -1:
            end = pos + size
            if (pos == 0 or view[pos - 1] == " ") and (end == n or view[end] == " "):
                for rule in rules:
                    m = rule.pattern.match(view, pos)
                    if m is not None:
                        hits.append((rule, pos, m.end()))
            pos = view.find(anchor, end)
    return hits


def _scan(text: str, wanted: frozenset[str]) -> tuple[list[tuple[Rule, int, int]], str]:
    view = normalize(text)
    if text.isascii():
        present = [a.decode("ascii") for a in ANCHORS_ASCII.intersection(view.encode("ascii").split())]
        return (_hits(view, present, wanted) if present else []), view
    present = list(ANCHORS.intersection(view.split(" ")))
    hits = _hits(view, present, wanted) if present else []
    if SCRIPT_HINT.search(text):
        for rule in SCRIPT_RULES:
            if rule.category in wanted:
                hits.extend((rule, m.start(), m.end()) for m in rule.pattern.finditer(view))
    return hits, view


def _findings(source: str, view: str, hits: list[tuple[Rule, int, int]], leet: bool) -> list[Finding]:
    if source.isascii():
        origin: list[int] | None = None
    else:
        view, origin = normalize_with_map(source)
    kept: list[tuple[Finding, int]] = []  # (finding, end offset in the view)
    for rule, s, e in sorted(hits, key=lambda h: (h[1], -h[0].weight)):
        if any(f.kind == rule.category and s < view_end for f, view_end in kept):
            continue  # overlaps an earlier (or equally early, stronger) finding of the same category
        snippet = " ".join(view[s:e].split())
        if len(snippet) > 60:
            snippet = snippet[:57] + "..."
        score = round(rule.weight * (0.95 if leet else 1.0), 4)
        start, end = (s, e) if origin is None else (origin[s], origin[e - 1] + 1)
        kept.append((Finding(rule.category, start, end, score, f"{rule.category}: {snippet!r}"), e))
    return [f for f, _ in kept]


def find_jailbreak(text: str, categories: Collection[str] | None = None) -> list[Finding]:
    """Jailbreak phrasing in `text`, sorted by offset; `categories` limits the search (all by default)."""
    wanted = check_kinds(categories, JAILBREAK_CATEGORIES, "jailbreak category")
    hits, view = _scan(text, wanted)
    if hits:
        return _findings(text, view, hits, leet=False)
    if LEET_HINT.search(text):
        source = text.translate(LEET)
        hits, view = _scan(source, wanted)
        if hits:
            return _findings(source, view, hits, leet=True)
    # An instruction hidden in base64, hex, Morse or ROT13 is read as decoded. Its findings span
    # the whole text: offsets in the decoded text do not map back onto the encoded characters.
    decoded = decode_payloads(text)
    if decoded is not None:
        hits, view = _scan(decoded.text, wanted)
        if hits:
            return [
                Finding(f.kind, 0, len(text), f.score, f"{f.redacted} (decoded {decoded.how})")
                for f in _findings(decoded.text, view, hits, leet=False)
            ]
    return []
