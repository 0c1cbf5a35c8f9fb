"""One tool call judged by the policy's tool rules, and its arguments redacted.

Signals read a tool call as a one-message request: the user text is the call's name, its
arguments' string values (a JSON object's values, recursively; raw text when the arguments are
not JSON) and, for an answer, the model's text; the call's name is the request's one tool call
(the `tools` signal's `called`); the Responses API's `store: true` carries over.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from extproc import headers as vsr
from extproc.detectors.common import Finding
from extproc.detectors.pii import find_pii
from extproc.detectors.secrets import find_secrets
from extproc.policy.engine import decide_tool_call
from extproc.protocol.answers import ToolCall as ToolCall  # re-exported: the calls the tool rules judge
from extproc.protocol.request import ApiKind, Role, RoutingRequest, TextSegment
from extproc.signals.dispatch import Dispatcher

if TYPE_CHECKING:
    from extproc.models.executor import HeavyExecutor
    from extproc.policy.load import CompiledPolicy

Action = Literal["allow", "block", "redact", "annotate", "none"]
MASK = "[REDACTED:{kind}]"
MAX_STRINGS = 2000  # argument string values read per call (a hostile answer may nest deeply)


@dataclass(slots=True)
class Verdict:
    """What the tool rules say about the calls of one answer (the strictest call wins)."""

    action: Action = "none"
    rule: str | None = None
    message: str = ""
    matched: list[str] = field(default_factory=list)  # signals true for the deciding call

    def headers(self) -> dict[str, str]:
        if self.rule is None:
            return {}
        return {vsr.TOOL_RULE: self.rule, vsr.TOOL_ACTION: self.action}


_STRICTNESS: dict[str, int] = {"none": 0, "allow": 1, "annotate": 2, "redact": 3, "block": 4}


def argument_strings(arguments: str) -> list[str]:
    """The string values a signal should read in a call's arguments."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return [arguments] if arguments else []
    out: list[str] = []
    stack: list[Any] = [parsed]
    while stack and len(out) < MAX_STRINGS:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):  # keys too: a secret can be smuggled as a key
            for key, value in reversed(list(item.items())):
                stack.append(value)
                stack.append(str(key))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif item is not None and not isinstance(item, bool):
            out.append(str(item))
    return out


def as_request(call: ToolCall, *, text: str = "", store: bool = False) -> RoutingRequest:
    parts = [p for p in (call.name, *argument_strings(call.arguments), text) if p]
    request = RoutingRequest(
        api=ApiKind.CHAT,
        model=None,
        stream=False,
        texts=[TextSegment(Role.USER, "\n".join(parts), 0)],
        turn_count=1,
        raw={"store": True} if store else {},
    )
    if call.name:
        request.tool_call_names.append(call.name)
        request.tool_call_count = 1
    return request


async def judge_calls(
    policy: CompiledPolicy,
    executor: HeavyExecutor,
    calls: list[ToolCall],
    *,
    text: str = "",
    store: bool = False,
    deadline_s: float = 2.0,
) -> Verdict:
    """Judge each call (and the answer's text, as a call without a name); the strictest wins."""
    verdict = Verdict()
    if not policy.tool_rules:
        return verdict
    items = list(calls) or [ToolCall("", "")]
    dispatcher = Dispatcher(executor, policy.spec.signal_timeout_ms)
    deadline = time.monotonic() + deadline_s
    for index, call in enumerate(items):
        request = as_request(call, text=text if index == 0 else "", store=store)
        results = await dispatcher.run(list(policy.tool_signals.values()), request, deadline)
        rule = decide_tool_call(policy, results)
        if rule is not None and _STRICTNESS[rule.action] > _STRICTNESS[verdict.action]:
            verdict = Verdict(
                action=rule.action,
                rule=rule.name,
                message=rule.message,
                matched=sorted(name for name, r in results.items() if r.matched),
            )
    return verdict


def _findings(text: str) -> list[Finding]:
    return [*find_pii(text), *find_secrets(text)]


def redact_text(text: str) -> tuple[str, int]:
    """`text` with every PII and secret span masked; and how many were."""
    findings = sorted(_findings(text), key=lambda f: f.start)
    out: list[str] = []
    position = 0
    count = 0
    for finding in findings:
        if finding.start < position:
            continue  # overlaps a span already masked
        out.append(text[position : finding.start])
        out.append(MASK.format(kind=finding.kind))
        position = finding.end
        count += 1
    out.append(text[position:])
    return "".join(out), count


def redact_arguments(arguments: str) -> tuple[str, int]:
    """The arguments with PII and secret spans masked in every string value (JSON kept valid)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return redact_text(arguments)
    total = 0

    def walk(item: Any) -> Any:
        nonlocal total
        if isinstance(item, str):
            masked, n = redact_text(item)
            total += n
            return masked
        if isinstance(item, dict):
            return {walk(str(k)): walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, int | float) and not isinstance(item, bool):
            masked, n = redact_text(str(item))  # a number can be an identity number too
            total += n
            return masked if n else item
        return item

    redacted = walk(parsed)
    return json.dumps(redacted, ensure_ascii=False), total
