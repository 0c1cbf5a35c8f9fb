"""Load-time checks of derived signals (scores, partitions): their inputs exist, no score reads
itself through others (a cycle), weights can reach every band, labels exist."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from extproc.signals.base import SignalSpecBase
from extproc.signals.derived import PartitionSpec, ScoreInput, ScoreSpec

Path_ = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Literal["error", "warning"]
    path: Path_
    message: str


def terms_of(spec: SignalSpecBase) -> list[ScoreInput]:
    if isinstance(spec, ScoreSpec):
        return list(spec.inputs)
    if isinstance(spec, PartitionSpec):
        return list(spec.members)
    return []


def with_inputs(names: Iterable[str], specs: Sequence[SignalSpecBase]) -> set[str]:
    """`names` and, transitively, every signal a derived one among them reads."""
    by_name = {s.name: s for s in specs}
    out: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        spec = by_name.get(name)
        if spec is not None:
            todo += [t.signal for t in terms_of(spec)]
    return out


def derived_findings(specs: Sequence[SignalSpecBase], broken: set[str]) -> list[Finding]:
    by_name = {s.name: s for s in specs}
    findings: list[Finding] = []
    for index, spec in enumerate(specs):
        terms = terms_of(spec)
        if not terms:
            continue
        key = "inputs" if isinstance(spec, ScoreSpec) else "members"
        for t_index, term in enumerate(terms):
            path: Path_ = ("signals", index, key, t_index, "signal")
            if term.signal not in by_name:
                if term.signal not in broken:
                    findings.append(Finding("error", path, _unknown(term.signal, by_name)))
                continue
            findings += _label_finding(term, by_name[term.signal], path[:-1])
        if isinstance(spec, ScoreSpec):
            findings += _weight_findings(spec, index)
    findings += _cycles(specs)
    return findings


def _unknown(name: str, known: Mapping[str, object]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown signal {name!r}{hint}"


def _label_finding(term: ScoreInput, target: SignalSpecBase, path: Path_) -> list[Finding]:
    if term.label is None or not isinstance(target, ScoreSpec | PartitionSpec):
        return []
    labels = [b.name for b in target.bands] if isinstance(target, ScoreSpec) else [m.describe() for m in target.members]
    if term.label in labels:
        return []
    message = f"signal {target.name!r} has no label {term.label!r}; its labels are {labels}"
    return [Finding("error", (*path, "label"), message)]


def _weight_findings(spec: ScoreSpec, index: int) -> list[Finding]:
    """A band no combination of the weights can reach, or weights that are all zero."""
    low = sum(min(0.0, t.weight) for t in spec.inputs)
    high = sum(max(0.0, t.weight) for t in spec.inputs)
    out: list[Finding] = []
    if low == high == 0.0:
        out.append(Finding("error", ("signals", index, "inputs"), f"score {spec.name!r}: every weight is zero"))
        return out
    for b_index, band in enumerate(spec.bands):
        if (band.low is not None and band.low > high) or (band.high is not None and band.high < low):
            out.append(
                Finding(
                    "warning",
                    ("signals", index, "bands", b_index),
                    f"score {spec.name!r}: band {band.describe()} is out of reach; "
                    f"the weights allow scores in [{low:g}, {high:g}] (input values 0..1)",
                )
            )
    if spec.threshold is not None and not low <= spec.threshold <= high:
        out.append(
            Finding(
                "warning",
                ("signals", index, "threshold"),
                f"score {spec.name!r}: threshold {spec.threshold:g} lies outside [{low:g}, {high:g}], "
                "so it is always or never met",
            )
        )
    return out


def _cycles(specs: Sequence[SignalSpecBase]) -> list[Finding]:
    """A derived signal that reads itself, directly or through other derived signals."""
    graph = {s.name: [t.signal for t in terms_of(s)] for s in specs if terms_of(s)}
    index_of = {s.name: i for i, s in enumerate(specs)}
    findings: list[Finding] = []
    reported: set[str] = set()
    for start in graph:
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for nxt in graph.get(node, []):
                if nxt == start:
                    cycle = [*trail, start]
                    if not reported & set(cycle):
                        reported.update(cycle)
                        findings.append(
                            Finding(
                                "error",
                                ("signals", index_of[start]),
                                f"derived signals read each other in a cycle: {' -> '.join(cycle)}",
                            )
                        )
                elif nxt in graph and nxt not in trail:
                    stack.append((nxt, [*trail, nxt]))
    return findings
