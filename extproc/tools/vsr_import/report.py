"""The import's report (one item per construct read) and the policy rendered as YAML with it."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from extproc.tools.vsr_import.vocabulary import Layout, Outcome


@dataclass(frozen=True, slots=True)
class ReportItem:
    """One VSR construct and what became of it."""

    item: str  # what it is, e.g. "keyword signal code_words"
    path: str  # where it sits in the VSR config, e.g. "routing.signals.keywords[0]"
    outcome: Outcome
    why: str  # "as ...", "approximated as ...", "no counterpart ...", "needs a model directory ..."


@dataclass(slots=True)
class ImportResult:
    policy: dict[str, Any]
    items: list[ReportItem]
    layout: Layout

    def counts(self) -> dict[str, int]:
        counted = Counter(i.outcome for i in self.items)
        return {k: counted.get(k, 0) for k in ("mapped", "approximated", "unmapped")}

    def not_exact(self) -> list[ReportItem]:
        return [i for i in self.items if i.outcome != "mapped"]


# -- rendering ----------------------------------------------------------------------------------


def one_line(text: str) -> str:
    """Names and values from the VSR config, safe inside a one-line comment (no line breaks, no controls)."""
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]+", " ", text)


def report_table(items: Iterable[ReportItem]) -> str:
    rows = [(one_line(i.item), one_line(i.path), one_line(i.why)) for i in items]
    if not rows:
        return "(nothing approximated or left out)"
    w1 = min(max(len(r[0]) for r in rows), 48)
    w2 = min(max(len(r[1]) for r in rows), 48)
    lines = [f"{'item':<{w1}}  {'VSR path':<{w2}}  why", f"{'-' * w1}  {'-' * w2}  ---"]
    lines += [f"{a:<{w1}}  {b:<{w2}}  {c}" for a, b, c in rows]
    return "\n".join(lines)


def summary_line(result: ImportResult) -> str:
    c = result.counts()
    total = sum(c.values())
    return (
        f"{total} VSR constructs ({result.layout} layout): {c['mapped']} mapped exactly, "
        f"{c['approximated']} approximated, {c['unmapped']} not carried over"
    )


class PlainDumper(yaml.SafeDumper):
    """Writes shared sub-trees out in full: no YAML anchors and aliases in a policy a person reads."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render_policy(result: ImportResult, source: str = "") -> str:
    """The policy as YAML, the report at the top as comments."""
    head = [
        f"# Imported by `extproc import-vsr`{f' from {one_line(source)}' if source else ''}.",
        f"# {summary_line(result)}",
    ]
    not_exact = result.not_exact()
    if not_exact:
        head.append("# Approximated or not carried over:")
        head += [f"#   {line}" if line else "#" for line in report_table(not_exact).splitlines()]
    body = yaml.dump(
        result.policy, Dumper=PlainDumper, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False
    )
    return "\n".join(head) + "\n\n" + body
