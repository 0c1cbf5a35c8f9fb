"""How much a piece of text looks like source code: a 0..1 score from cheap, explainable cues.

Works on pasted text and on OCR'd screenshots alike. The cues: programming keywords at
word boundaries, the share of code punctuation (braces, parentheses, `=`, `;`, operators),
line endings typical of code (`;`, `{`, `}`, `:`, `)`), indentation, assignment and call
shapes, and short-line structure. Each cue is capped and weighted; the sum goes through a
logistic so prose sits near 0 and a page of code near 1.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_KEYWORD_TEXT = """
    def class import from return yield lambda async await elif except finally raise pass self none true false
    function const let var typeof instanceof undefined null new this export require module
    public private protected static void int long float double char bool boolean string struct enum interface
    package func go defer chan map fn impl mut pub use crate match trait where
    if else for while switch case break continue try catch throw throws do goto sizeof
    include define ifdef ifndef endif println printf console log
    select insert update delete create table values join
"""
_KEYWORDS = frozenset(_KEYWORD_TEXT.split())
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACE = re.compile(r"\s+")
_CODE_PUNCT = frozenset("{}()[];=<>+-*/%&|!:.,\"'`#$@^~\\")
_STRONG_PUNCT = frozenset("{}();=[]")
_ASSIGN = re.compile(r"(?m)^\s*(?:[A-Za-z_][\w.\[\]'\"]*\s*(?::\s*\w+\s*)?(?:[+\-*/|&]?=)(?!=)|(?:const|let|var)\s)")
_CALL = re.compile(r"[A-Za-z_][\w.]*\s?\(")
_OPERATORS = re.compile(r"==|!=|<=|>=|=>|->|::|&&|\|\||\+\+|--|\+=|-=|:=")
_LINE_END = re.compile(r"[;{}:)\],]\s*$")
# snake_case, camelCase and dotted names: rare in prose, everywhere in code.
_IDENT = re.compile(r"\b[a-z]+_[a-z0-9_]+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Za-z_]\w*\.[A-Za-z_]\w*")


@dataclass(frozen=True, slots=True)
class CodeFeatures:
    keyword_rate: float  # keywords per word
    punct_density: float  # code punctuation per non-space character
    strong_density: float  # {}();=[] per non-space character
    line_end_rate: float  # lines ending like code
    indent_rate: float  # lines indented (two+ spaces or a tab)
    assign_rate: float  # lines that assign
    call_rate: float  # calls per line
    operator_rate: float  # two-character operators per line
    ident_rate: float  # snake_case / camelCase / dotted names per word
    lines: int


def code_features(text: str) -> CodeFeatures:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    n_lines = max(1, len(lines))
    words = _WORD.findall(text)
    n_words = max(1, len(words))
    # Counted with C-speed str methods rather than per-character Python loops: this runs on
    # every request's text (the `code` signal is inline).
    n_chars = max(1, len(_SPACE.sub("", text)))
    return CodeFeatures(
        keyword_rate=sum(1 for w in words if w.lower() in _KEYWORDS) / n_words,
        punct_density=sum(text.count(c) for c in _CODE_PUNCT) / n_chars,
        strong_density=sum(text.count(c) for c in _STRONG_PUNCT) / n_chars,
        line_end_rate=sum(1 for ln in lines if _LINE_END.search(ln)) / n_lines,
        indent_rate=sum(1 for ln in lines if ln.startswith(("  ", "\t"))) / n_lines,
        assign_rate=len(_ASSIGN.findall(text)) / n_lines,
        call_rate=(len(_CALL.findall(text)) if "(" in text else 0) / n_lines,  # the scan is the costliest
        operator_rate=len(_OPERATORS.findall(text)) / n_lines,
        ident_rate=len(_IDENT.findall(text)) / n_words,
        lines=len(lines),
    )


def code_likeness(text: str) -> float:
    """0..1: how much `text` looks like source code (>= 0.5: probably code)."""
    if len(text.strip()) < 8:
        return 0.0
    f = code_features(text)
    z = -3.5
    z += 6.0 * min(f.keyword_rate, 0.4)
    z += 8.0 * min(f.strong_density, 0.25)
    z += 3.0 * min(max(f.punct_density - 0.05, 0.0), 0.3)
    z += 1.5 * min(f.line_end_rate, 1.0)
    z += 1.0 * min(f.indent_rate, 1.0)
    z += 1.5 * min(f.assign_rate, 1.0)
    z += 1.0 * min(f.call_rate, 1.5)
    z += 0.8 * min(f.operator_rate, 1.0)
    z += 4.0 * min(f.ident_rate, 0.25)
    if f.lines == 1:  # one line says little; damp it
        z -= 0.7
    return 1.0 / (1.0 + math.exp(-z))
