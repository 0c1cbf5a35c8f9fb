"""Credentials in text: cloud keys, service tokens, private keys, JWTs, high-entropy assignments.

Each family is gated by a substring test (C speed) on its fixed prefix before its regex
runs, so text without "AKIA", "ghp_", "sk-", "eyJ"... costs almost nothing. Matches are then
checked in Python (boundaries, character mix, entropy, a JWT header that decodes to JSON
with "alg") to keep ordinary prose and code out.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Collection, Iterator

from extproc.detectors.common import Finding, check_kinds, drop_overlaps, shannon_entropy

SECRET_KINDS: tuple[str, ...] = (
    "aws_access_key",
    "aws_secret_key",
    "github_token",
    "slack_token",
    "openai_key",
    "anthropic_key",
    "private_key",
    "jwt",
    "high_entropy_assignment",
)

# Overlapping findings: the more specific kind wins (lower number).
_PRIORITY = {kind: i for i, kind in enumerate(SECRET_KINDS)}

_AWS_ACCESS = re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}")
_ASSIGN = r"""["']?[ \t]{0,5}(?::=|=>|=|:)[ \t]{0,5}(?P<q>["'`]?)"""
# Matched at each "secret" in the lower-cased text: secret_access_key, SecretAccessKey, aws_secret...
_AWS_SECRET = re.compile(
    r"secret(?P<access>[_\-. ]?access)?(?:[_\-. ]?key)?(?:[_\-. ]?id)?"
    + _ASSIGN
    + r"(?P<val>[a-z0-9/+]{40})(?![a-z0-9/+=])"
)
_GITHUB = re.compile(r"gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,251}")
_SLACK = re.compile(
    r"xox[abposre](?:\.xox[bp])?-[0-9A-Za-z\-]{10,250}|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,200}"
)
# "sk-ant-..." is Anthropic's prefix, never an OpenAI key (the lookahead keeps it out).
_OPENAI = re.compile(r"sk-(?!ant-)(?P<kind>proj-|svcacct-|admin-)?(?P<body>[A-Za-z0-9_\-]{20,250})")
# sk-ant-api03-..., sk-ant-admin01-..., sk-ant-oat01-... (a purpose tag and a version number).
_ANTHROPIC = re.compile(r"sk-ant-(?P<kind>[a-z]{2,10}\d{2}-)?(?P<body>[A-Za-z0-9_\-]{20,250})")
_PEM_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?-----")
_PEM_MAX = 16 * 1024
_JWT = re.compile(r"eyJ[A-Za-z0-9_\-]{5,2000}\.[A-Za-z0-9_\-]{2,8000}\.[A-Za-z0-9_\-]{0,4000}")
# Matched at each anchor word in the lower-cased text (api_key, DB_PASSWORD and clientSecret
# all contain one); the name may run on a little ("password_hash", "token_value").
_HIGH_ENTROPY_ANCHORS = ("pass", "pwd", "secret", "token", "key", "credential")
_HIGH_ENTROPY = re.compile(
    r"(?P<name>passphrase|password|passwd|pass|pwd|secret|token|key|credentials?)[a-z0-9_\-]{0,20}"
    + _ASSIGN
    + r"(?P<val>[^\s\"'`,;)\]}]{8,200})"
)
_PLACEHOLDERS = (
    "xxxx", "****", "....", "<", ">", "${", "{{", "%(", "your", "example", "changeme", "placeholder",
    "dummy", "redacted", "replace", "secret_here", "env[", "environ", "getenv", "process.env", "none",
)  # fmt: skip
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_.$]*(?:\(.*)?")
_MIN_ENTROPY = 3.0


def _alnum_at(text: str, i: int) -> bool:
    return 0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")


def _char_classes(value: str) -> int:
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )


def _short(kind: str, value: str, keep: int) -> str:
    return f"{kind} {value[:keep]}…({len(value)} chars)"


def _aws_access(text: str, out: list[Finding]) -> None:
    for m in _AWS_ACCESS.finditer(text):
        s, e = m.span()
        if not _alnum_at(text, s - 1) and not _alnum_at(text, e):
            out.append(Finding("aws_access_key", s, e, 0.95, _short("aws_access_key", m.group(), 4)))


def _lower_same_length(text: str) -> str:
    """`text` lower-cased, character for character (offsets stay valid)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _anchored(low: str, anchor: str, pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """Matches of `pattern` starting at each occurrence of `anchor` in `low`."""
    pos = low.find(anchor)
    while pos != -1:
        m = pattern.match(low, pos)
        if m is not None:
            yield m
            pos = low.find(anchor, m.end())
        else:
            pos = low.find(anchor, pos + 1)


def _aws_secret(text: str, low: str, out: list[Finding]) -> None:
    for m in _anchored(low, "secret", _AWS_SECRET):
        s, e = m.span("val")
        val = text[s:e]
        is_aws = m.group("access") is not None or low[max(0, m.start() - 4) : m.start()].startswith("aws")
        if not is_aws:
            is_aws = "aws" in low[max(0, m.start() - 200) : m.start()]
        if not is_aws or _char_classes(val) < 3 or shannon_entropy(val) < 3.5:
            continue
        out.append(Finding("aws_secret_key", s, e, 0.9, _short("aws_secret_key", val, 0)))


def _github(text: str, out: list[Finding]) -> None:
    for m in _GITHUB.finditer(text):
        s, e = m.span()
        if _alnum_at(text, s - 1) or _alnum_at(text, e):
            continue
        body = m.group().split("_", 1)[1]
        if _char_classes(body) >= 2:
            out.append(Finding("github_token", s, e, 0.95, _short("github_token", m.group(), 4)))


def _slack(text: str, out: list[Finding]) -> None:
    for m in _SLACK.finditer(text):
        s, e = m.span()
        value = m.group()
        if _alnum_at(text, s - 1):
            continue
        if value.startswith("https://"):
            out.append(Finding("slack_token", s, e, 0.9, "slack_token https://hooks.slack.com/…"))
            continue
        parts = value.split("-")
        if len(parts) >= 3 and any(ch.isdigit() for ch in value):
            out.append(Finding("slack_token", s, e, 0.95, _short("slack_token", value, 5)))


def _sk_keys(text: str, kind: str, pattern: re.Pattern[str], marker: str | None, out: list[Finding]) -> None:
    """`sk-` style API keys: a boundary each side and a random-looking body."""
    for m in pattern.finditer(text):
        s, e = m.span()
        if (s and (text[s - 1].isalnum() or text[s - 1] in "_-")) or _alnum_at(text, e):
            continue
        body = m.group("body")
        if _char_classes(body.replace("-", "").replace("_", "")) < 3 or shannon_entropy(body) < 3.5:
            continue
        strong = m.group("kind") is not None or (marker is not None and marker in body)
        keep = 8 if kind == "openai_key" else 11  # "sk-ant-api0…": the tag, never the secret part
        out.append(Finding(kind, s, e, 0.97 if strong else 0.9, _short(kind, m.group(), keep)))


def _private_keys(text: str, out: list[Finding]) -> None:
    next_end = text.find("-----END ")  # shared by all BEGIN lines: one pass over the text
    for m in _PEM_BEGIN.finditer(text):
        s, e = m.span()
        if next_end != -1 and next_end < e:
            next_end = text.find("-----END ", e)
        score = 0.9
        if next_end != -1 and next_end - e <= _PEM_MAX:
            close = text.find("-----", next_end + 9, next_end + 64)
            if close != -1:
                e = close + 5
                score = 0.99
        header = m.group()
        out.append(Finding("private_key", s, e, score, f"private_key {header} ({e - s} chars)"))


def _b64url_json(part: str) -> object:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        return json.loads(raw)
    except (binascii.Error, ValueError):
        return None


def _jwts(text: str, out: list[Finding]) -> None:
    for m in _JWT.finditer(text):
        s, e = m.span()
        if _alnum_at(text, s - 1) or _alnum_at(text, e):
            continue
        header_b64, payload_b64, signature = m.group().split(".")
        header = _b64url_json(header_b64)
        if not isinstance(header, dict) or "alg" not in header:
            continue
        if not signature and str(header.get("alg")).lower() != "none":
            continue
        score = 0.97 if isinstance(_b64url_json(payload_b64), dict) else 0.85
        out.append(Finding("jwt", s, e, score, f"jwt alg={str(header['alg'])[:10]} ({e - s} chars)"))


def _high_entropy(text: str, low: str, out: list[Finding]) -> None:
    for anchor in _HIGH_ENTROPY_ANCHORS:
        for m in _anchored(low, anchor, _HIGH_ENTROPY):
            if m.group("name") != anchor and not m.group("name").startswith(anchor):
                continue  # found again through a longer anchor ("pass" in "passwd" is fine, "key" in "token" no)
            _assignment(text, m, out)


def _assignment(text: str, m: re.Match[str], out: list[Finding]) -> None:
    quote = m.group("q")
    s, e = m.span("val")
    val = text[s:e]
    if quote:
        if e >= len(text) or text[e] != quote:
            return  # the quoted value has spaces or odd characters: prose, not a secret
    else:
        val = val.rstrip(".:!?")
        e = s + len(val)
        if len(val) < 8 or (_IDENTIFIER.fullmatch(val) and not any(c.isdigit() for c in val)):
            return  # `password = get_password()`, `token: self.token`
    low = val.lower()
    if any(p in low for p in _PLACEHOLDERS):
        return
    entropy = shannon_entropy(val)
    if entropy < _MIN_ENTROPY or _char_classes(val) < 2:
        return
    score = round(min(0.9, 0.6 + (entropy - _MIN_ENTROPY) * 0.2), 3)
    name = m.group("name")
    redacted = f"high_entropy_assignment {name}=****({len(val)} chars)"
    out.append(Finding("high_entropy_assignment", s, e, score, redacted))


def find_secrets(text: str, kinds: Collection[str] | None = None) -> list[Finding]:
    """Credentials in `text`, sorted by offset; `kinds` limits the search (all of SECRET_KINDS by default)."""
    wanted = check_kinds(kinds, SECRET_KINDS, "secret kind")
    out: list[Finding] = []
    if "aws_access_key" in wanted and ("AKIA" in text or "ASIA" in text):
        _aws_access(text, out)
    if "github_token" in wanted and ("gh" in text and "_" in text):
        _github(text, out)
    if "slack_token" in wanted and ("xox" in text or "hooks.slack.com" in text):
        _slack(text, out)
    if "openai_key" in wanted and "sk-" in text:
        _sk_keys(text, "openai_key", _OPENAI, "T3BlbkFJ", out)
    if "anthropic_key" in wanted and "sk-ant-" in text:
        _sk_keys(text, "anthropic_key", _ANTHROPIC, None, out)
    if "private_key" in wanted and "-----BEGIN" in text:
        _private_keys(text, out)
    if "jwt" in wanted and "eyJ" in text:
        _jwts(text, out)
    needs_assign = "aws_secret_key" in wanted or "high_entropy_assignment" in wanted
    if needs_assign and ("=" in text or ":" in text):
        low = _lower_same_length(text)
        if "aws_secret_key" in wanted and "secret" in low:
            _aws_secret(text, low, out)
        if "high_entropy_assignment" in wanted:
            _high_entropy(text, low, out)
    return drop_overlaps(out, _PRIORITY)
