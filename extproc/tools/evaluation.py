"""Evaluate a policy on labelled cases: what it decides, against what it should decide.

A case file is JSON Lines, one case a line:

    {"id": "inj-1", "text": "Ignore previous instructions...", "expected_decision": "block",
     "expected_signals": {"attack": true, "pii": ["email"]}, "lang": "en", "category": "injection"}
    {"id": "ok-1", "request": {"model": "auto", "messages": [...]}, "expected_decision": "general"}

`text` is wrapped as a one-message chat request; `request` is any OpenAI request body (`path`
names its endpoint when the body alone does not tell). `expected_not` lists decisions the case
must not get (a benign prompt: neither refusal), for cases whose right decision is any other.
A labelled corpus (rows with `label`, such as the safety corpus's `attack` / `harmful` /
`benign`) is read with a label map (`extproc eval --labels attack=jailbreak_block`): a mapped
label is the expected decision, an unmapped one expects none of the mapped decisions.
`expected_signals` maps a signal name to `true` / `false` (should it match?) or to a list of
labels it should report (`[]`: should not match). Every case runs through the real `Router`,
lazy dispatch included; signals a case has expectations for that the router did not need are
then run too, so each expectation is checked (`all_signals` runs every signal, for hit rates over the whole set).

The report: per-decision precision, recall and false-positive rate (cases expected *not* to
get the decision that got it, over all such cases), the confusion matrix, per-signal hit
rates (and accuracy where expected), breakdowns by `lang` and `category`, and the misses.
Gates (`min_recall`, `max_fp`) turn it into a CI check.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extproc.outcome import RoutingOutcome
from extproc.router import Router
from extproc.signals.base import SignalResult
from extproc.signals.dispatch import Dispatcher

CASE_FIELDS = frozenset(
    {"id", "text", "request", "path", "expected_decision", "expected_not", "expected_signals", "lang", "category"}
)
CORPUS_FIELDS = frozenset({"label", "source"})  # a labelled corpus's rows, read with a label map
Expectation = bool | tuple[str, ...]  # should match / labels it should report


class EvalInputError(ValueError):
    """The case file (or a gate) is unusable; `line` is the 1-based line when one is to blame."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None) -> None:
        where = f"{file}:{line}: " if file is not None and line is not None else f"{file}: " if file else ""
        super().__init__(where + message)
        self.line = line


@dataclass(frozen=True, slots=True)
class EvalCase:
    id: str
    line: int
    body: bytes
    path: str = ""
    expected_decision: str | None = None
    expected_signals: Mapping[str, Expectation] = field(default_factory=dict)
    expected_not: tuple[str, ...] = ()  # decisions the case must not get
    lang: str | None = None
    category: str | None = None


def _optional_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key!r} must be a non-empty string")
    return value


def parse_case(obj: Any, line: int, labels: Mapping[str, str] | None = None) -> EvalCase:
    """One case from its decoded JSON line; ValueError says what is wrong with it. With `labels`
    (corpus label -> decision), a row's `label` gives its expected decision, or (unmapped) the
    mapped decisions it must not get."""
    if not isinstance(obj, dict):
        raise ValueError("a case must be a JSON object")
    known = CASE_FIELDS | CORPUS_FIELDS if labels else CASE_FIELDS
    unknown = sorted(set(obj) - known)
    if unknown:
        hint = " (a labelled corpus? give --labels LABEL=DECISION)" if "label" in unknown else ""
        raise ValueError(
            f"unknown field(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}{hint}"
        )
    expected_not = obj.get("expected_not", [])
    if not isinstance(expected_not, list) or not all(isinstance(d, str) and d for d in expected_not):
        raise ValueError("'expected_not' must be a list of decision names")
    expected_decision = _optional_str(obj, "expected_decision")
    if labels and "label" in obj:
        label = obj["label"]
        if not isinstance(label, str):
            raise ValueError("'label' must be a string")
        if expected_decision is not None or expected_not:
            raise ValueError("a row with 'label' takes its expectation from --labels, not from expected_* fields")
        if label in labels:
            expected_decision = labels[label]
        else:
            expected_not = sorted(set(labels.values()))
    if expected_decision is not None and expected_not:
        raise ValueError("give expected_decision or expected_not, not both")
    if ("text" in obj) == ("request" in obj):
        raise ValueError("a case needs exactly one of 'text' or 'request'")
    if "text" in obj:
        text = obj["text"]
        if not isinstance(text, str):
            raise ValueError("'text' must be a string")
        body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}).encode()
    else:
        if not isinstance(obj["request"], dict):
            raise ValueError("'request' must be an OpenAI request object")
        body = json.dumps(obj["request"]).encode()
    raw_id = obj.get("id", f"line{line}")
    if not isinstance(raw_id, str | int) or isinstance(raw_id, bool) or str(raw_id) == "":
        raise ValueError("'id' must be a non-empty string or an integer")
    signals: dict[str, Expectation] = {}
    raw_signals = obj.get("expected_signals", {})
    if not isinstance(raw_signals, dict):
        raise ValueError("'expected_signals' must map signal names to true/false or a list of labels")
    for name, want in raw_signals.items():
        if isinstance(want, bool):
            signals[name] = want
        elif isinstance(want, list) and all(isinstance(label, str) for label in want):
            signals[name] = tuple(want)
        else:
            raise ValueError(f"expected_signals[{name!r}] must be true, false or a list of label names")
    return EvalCase(
        id=str(raw_id),
        line=line,
        body=body,
        path=_optional_str(obj, "path") or "",
        expected_decision=expected_decision,
        expected_signals=signals,
        expected_not=tuple(expected_not),
        lang=_optional_str(obj, "lang"),
        category=_optional_str(obj, "category"),
    )


def parse_cases(
    lines: Iterable[str], file: str = "<cases>", labels: Mapping[str, str] | None = None
) -> list[EvalCase]:
    """Cases from JSON Lines (blank lines and lines starting with '#' are skipped); `labels` as in `parse_case`."""
    cases: list[EvalCase] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            obj = json.loads(stripped)
        except ValueError as exc:
            raise EvalInputError(f"malformed JSON: {exc}", file=file, line=number) from None
        try:
            case = parse_case(obj, number, labels)
        except ValueError as exc:
            raise EvalInputError(str(exc), file=file, line=number) from None
        if case.id in seen:
            raise EvalInputError(f"duplicate id {case.id!r} (first on line {seen[case.id]})", file=file, line=number)
        seen[case.id] = number
        cases.append(case)
    if not cases:
        raise EvalInputError("no cases", file=file)
    return cases


def load_cases(path: Path, labels: Mapping[str, str] | None = None) -> list[EvalCase]:
    """Cases from a JSONL file; EvalInputError for an unreadable file or a bad line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise EvalInputError(f"cannot read: {reason}", file=str(path)) from None
    # Not splitlines(): a corpus text may hold U+2028, which JSON leaves unescaped.
    return parse_cases(text.split("\n"), str(path), labels)


def parse_gate(text: str) -> tuple[str, float]:
    """`DECISION=0.9` -> ("DECISION", 0.9); ValueError on anything else."""
    name, sep, value = text.rpartition("=")
    if not sep or not name:
        raise ValueError(f"expected DECISION=VALUE, got {text!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{number} is not between 0 and 1")
    return name, number


# -- running ---------------------------------------------------------------------------------------


def decision_of(outcome: RoutingOutcome) -> str:
    """The decision name a case is scored on; a request that failed to parse is `error:STATUS`."""
    return outcome.decision if outcome.decision is not None else f"error:{outcome.status}"


def signal_ok(want: Expectation, result: SignalResult | None) -> bool | None:
    """Did the signal meet its expectation? None when it could not say (unknown or not run)."""
    if result is None or not result.known:
        return None
    if isinstance(want, bool):
        return result.matched == want
    if not want:
        return not result.matched
    return all(result.labels.get(label, 0.0) > 0.0 for label in want)


def describe_result(result: SignalResult | None) -> str:
    if result is None:
        return "not run"
    if not result.known:
        return f"{result.status.value}" + (f" ({result.error})" if result.error else "")
    if not result.matched:
        return "no match"
    labels = ", ".join(f"{k}={v:.2f}" for k, v in result.labels.items())
    return f"match {result.score:.2f}" + (f" [{labels}]" if labels else "")


@dataclass(slots=True)
class CaseResult:
    case: EvalCase
    actual: str
    model: str | None
    signals: dict[str, SignalResult]

    @property
    def matched_signals(self) -> list[str]:
        return [name for name, r in self.signals.items() if r.matched]

    @property
    def decision_ok(self) -> bool | None:
        if self.case.expected_decision is not None:
            return self.actual == self.case.expected_decision
        if self.case.expected_not:
            return self.actual not in self.case.expected_not
        return None

    def signal_checks(self) -> dict[str, bool | None]:
        return {name: signal_ok(want, self.signals.get(name)) for name, want in self.case.expected_signals.items()}

    @property
    def missed(self) -> bool:
        return self.decision_ok is False or any(ok is not True for ok in self.signal_checks().values())

    def miss_dict(self) -> dict[str, Any]:
        wrong = {
            name: {
                "expected": _expectation_json(self.case.expected_signals[name]),
                "actual": describe_result(self.signals.get(name)),
            }
            for name, ok in self.signal_checks().items()
            if ok is not True
        }
        return {
            "id": self.case.id,
            "line": self.case.line,
            "expected_decision": self.case.expected_decision,
            "expected_not": list(self.case.expected_not),
            "actual_decision": self.actual,
            "model": self.model,
            "matched_signals": self.matched_signals,
            "signal_misses": wrong,
            "lang": self.case.lang,
            "category": self.case.category,
        }


def _expectation_json(want: Expectation) -> bool | list[str]:
    return want if isinstance(want, bool) else list(want)


def check_cases(cases: Sequence[EvalCase], router: Router, file: str = "<cases>") -> None:
    """Every decision and signal a case names must exist in the policy (typos are input errors)."""
    policy = router.policy
    decisions = {d.name for d in policy.decisions} | {policy.default.name}
    for case in cases:
        named = [("expected_decision", case.expected_decision), *(("expected_not", d) for d in case.expected_not)]
        for key, want in named:
            if want is not None and want not in decisions and not want.startswith(("error:", "signal_failure:")):
                raise EvalInputError(
                    f"{key} {want!r} is not a decision of the policy ({', '.join(sorted(decisions))})",
                    file=file,
                    line=case.line,
                )
        for name, expectation in case.expected_signals.items():
            signal = policy.signals.get(name)
            if signal is None:
                raise EvalInputError(
                    f"expected_signals: {name!r} is not a signal any decision of the policy uses "
                    f"({', '.join(sorted(policy.signals)) or 'none'})",
                    file=file,
                    line=case.line,
                )
            known = signal.known_labels()
            if isinstance(expectation, tuple) and known is not None:
                unknown = sorted(set(expectation) - known)
                if unknown:
                    raise EvalInputError(
                        f"expected_signals[{name!r}]: unknown label(s) {unknown}; its labels are {sorted(known)}",
                        file=file,
                        line=case.line,
                    )


async def run_case(router: Router, case: EvalCase, *, all_signals: bool = False) -> CaseResult:
    outcome = await router.route(case.body, path=case.path, request_id=case.id)
    results = {s.name: s for s in outcome.signals}
    policy = router.policy
    wanted = list(policy.signals) if all_signals else list(case.expected_signals)
    missing = [policy.signals[name] for name in wanted if name not in results and name in policy.signals]
    if missing and outcome.request is not None:
        deadline = time.monotonic() + router.settings.dispatch.request_deadline_ms / 1000.0
        dispatcher = Dispatcher(router.executor, policy.spec.signal_timeout_ms)
        results.update(await dispatcher.run(missing, outcome.request, deadline))
    model = outcome.model.name if outcome.model is not None else None
    return CaseResult(case, decision_of(outcome), model, results)


async def evaluate_cases(
    router: Router, cases: Sequence[EvalCase], *, all_signals: bool = False, source: str | None = None,
    progress: Callable[[], None] | None = None,
) -> EvalReport:
    """Run every case through `router` (one at a time; `progress()` after each) and build the report."""
    report = EvalReport(
        policy_version=router.policy.version,
        policy_path=str(router.policy.path) if router.policy.path else None,
        cases_path=source,
        signal_names=list(router.policy.signals),
    )
    for case in cases:
        report.results.append(await run_case(router, case, all_signals=all_signals))
        if progress is not None:
            progress()
    return report


# -- the report -------------------------------------------------------------------------------------


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


@dataclass(slots=True)
class DecisionStats:
    name: str
    support: int = 0  # cases expecting it
    predicted: int = 0  # cases (with an expectation) that got it
    tp: int = 0
    negatives: int = 0  # cases expecting something else

    @property
    def fp(self) -> int:
        return self.predicted - self.tp

    @property
    def fn(self) -> int:
        return self.support - self.tp

    @property
    def precision(self) -> float | None:
        return _rate(self.tp, self.predicted)

    @property
    def recall(self) -> float | None:
        return _rate(self.tp, self.support)

    @property
    def fp_rate(self) -> float | None:
        return _rate(self.fp, self.negatives)

    def to_dict(self) -> dict[str, Any]:
        return {
            "support": self.support,
            "predicted": self.predicted,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "precision": self.precision,
            "recall": self.recall,
            "fp_rate": self.fp_rate,
        }


def decision_stats(results: Sequence[CaseResult]) -> dict[str, DecisionStats]:
    """Per decision: support, predictions, true and false positives. A case with only
    `expected_not` is a negative of those decisions alone (any other may be right for it)."""
    scored = [r for r in results if r.case.expected_decision is not None or r.case.expected_not]
    names = sorted(
        {r.case.expected_decision for r in scored if r.case.expected_decision}
        | {r.actual for r in scored}
        | {d for r in scored for d in r.case.expected_not}
    )
    stats = {name: DecisionStats(name) for name in names}
    for r in scored:
        for name, s in stats.items():
            if r.case.expected_decision is None and name not in r.case.expected_not:
                continue
            expected = r.case.expected_decision == name
            got = r.actual == name
            s.support += expected
            s.negatives += not expected
            s.predicted += got
            s.tp += expected and got
    return stats


@dataclass(slots=True)
class SignalStats:
    name: str
    ran: int = 0  # known results
    matched: int = 0
    unknown: int = 0  # unavailable, error, timeout
    not_run: int = 0
    expected: int = 0
    correct: int = 0
    false_positives: int = 0  # expected no match, matched
    false_negatives: int = 0  # expected a match (or labels), did not get it
    expected_unknown: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ran": self.ran,
            "matched": self.matched,
            "hit_rate": _rate(self.matched, self.ran),
            "unknown": self.unknown,
            "not_run": self.not_run,
            "expected": self.expected,
            "correct": self.correct,
            "accuracy": _rate(self.correct, self.expected),
            "false_positives": self.false_positives,
            "false_negatives": self.false_negatives,
            "expected_but_unknown": self.expected_unknown,
        }


@dataclass(slots=True)
class EvalReport:
    policy_version: str
    policy_path: str | None
    cases_path: str | None = None
    signal_names: list[str] = field(default_factory=list)
    results: list[CaseResult] = field(default_factory=list)

    @property
    def decisions(self) -> dict[str, DecisionStats]:
        return decision_stats(self.results)

    def confusion(self) -> dict[str, dict[str, int]]:
        matrix: dict[str, Counter[str]] = defaultdict(Counter)
        for r in self.results:
            if r.case.expected_decision is not None:
                matrix[r.case.expected_decision][r.actual] += 1
            elif r.case.expected_not:
                matrix["not " + "/".join(r.case.expected_not)][r.actual] += 1
        return {exp: dict(sorted(row.items())) for exp, row in sorted(matrix.items())}

    def accuracy(self) -> tuple[int, int]:
        scored = [r for r in self.results if r.decision_ok is not None]
        return sum(bool(r.decision_ok) for r in scored), len(scored)

    def signals(self) -> dict[str, SignalStats]:
        names = list(dict.fromkeys([*self.signal_names, *(n for r in self.results for n in r.signals)]))
        stats = {name: SignalStats(name) for name in names}
        for r in self.results:
            for name, s in stats.items():
                result = r.signals.get(name)
                if result is None:
                    s.not_run += 1
                elif result.known:
                    s.ran += 1
                    s.matched += result.matched
                else:
                    s.unknown += 1
            for name, ok in r.signal_checks().items():
                s = stats.setdefault(name, SignalStats(name))
                s.expected += 1
                want = r.case.expected_signals[name]
                if ok is None:
                    s.expected_unknown += 1
                elif ok:
                    s.correct += 1
                elif want is False or want == ():
                    s.false_positives += 1
                else:
                    s.false_negatives += 1
        return stats

    def groups(self, key: str) -> dict[str, dict[str, Any]]:
        """Breakdown by a case attribute (`lang`, `category`); empty when no case has it."""
        buckets: dict[str, list[CaseResult]] = defaultdict(list)
        for r in self.results:
            value = getattr(r.case, key)
            if value is not None:
                buckets[value].append(r)
        out: dict[str, dict[str, Any]] = {}
        for value, rs in sorted(buckets.items()):
            scored = [r for r in rs if r.decision_ok is not None]
            checks = [ok for r in rs for ok in r.signal_checks().values()]
            out[value] = {
                "cases": len(rs),
                "decision_accuracy": _rate(sum(bool(r.decision_ok) for r in scored), len(scored)),
                "recall": {name: s.recall for name, s in decision_stats(rs).items() if s.support},
                "signal_accuracy": _rate(sum(ok is True for ok in checks), len(checks)),
                "misses": sum(r.missed for r in rs),
            }
        return out

    def misses(self) -> list[CaseResult]:
        return [r for r in self.results if r.missed]

    def label_classification(self) -> dict[str, dict[str, Any]]:
        """For signals whose cases expect exactly one label (`{subject: [math]}`): the signal as a
        classifier, its top label against the expected one: accuracy, macro-F1, per-label recall /
        precision / F1 and the confusion matrix (rows: expected). Unknown results count as wrong
        (predicted `(unknown)`), so an outage cannot raise the figures."""
        pairs: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for r in self.results:
            for name, want in r.case.expected_signals.items():
                if isinstance(want, bool) or len(want) != 1:
                    continue
                result = r.signals.get(name)
                if result is None or not result.known:
                    got = "(unknown)"
                elif result.labels:
                    got = max(result.labels.items(), key=lambda kv: kv[1])[0]
                else:
                    got = "(none)"
                pairs[name].append((want[0], got))
        out: dict[str, dict[str, Any]] = {}
        for name, rows in pairs.items():
            labels = sorted({w for w, _ in rows})
            confusion: dict[str, Counter[str]] = defaultdict(Counter)
            for expected, top in rows:
                confusion[expected][top] += 1
            per: dict[str, dict[str, Any]] = {}
            for label in labels:
                tp = confusion[label][label]
                support = sum(confusion[label].values())
                predicted = sum(row[label] for row in confusion.values())
                recall, precision = _rate(tp, support), _rate(tp, predicted)
                f1 = (
                    round(2 * precision * recall / (precision + recall), 4)
                    if precision is not None and recall is not None and precision + recall > 0
                    else 0.0
                )
                per[label] = {"support": support, "recall": recall, "precision": precision, "f1": f1}
            correct = sum(w == g for w, g in rows)
            out[name] = {
                "cases": len(rows),
                "accuracy": _rate(correct, len(rows)),
                "macro_f1": round(sum(p["f1"] for p in per.values()) / len(per), 4) if per else None,
                "per_label": per,
                "confusion": {w: dict(sorted(row.items())) for w, row in sorted(confusion.items())},
            }
        return out

    def check_gates(self, min_recall: Mapping[str, float], max_fp: Mapping[str, float]) -> list[str]:
        """Violations of the gates, one line each (empty: all pass)."""
        stats = self.decisions
        out: list[str] = []
        for name, floor in min_recall.items():
            s = stats.get(name)
            recall = s.recall if s is not None else None
            if recall is None:
                out.append(f"recall of {name}: no case expects it, cannot check >= {floor}")
            elif recall < floor:
                assert s is not None
                out.append(f"recall of {name}: {recall:.3f} ({s.tp}/{s.support}) < {floor}")
        for name, ceiling in max_fp.items():
            s = stats.get(name)
            if s is None:
                continue  # no case expects it and none got it: no false positives
            rate = s.fp_rate
            if rate is None:
                out.append(f"false-positive rate of {name}: every case expects it, cannot check <= {ceiling}")
            elif rate > ceiling:
                out.append(f"false-positive rate of {name}: {rate:.3f} ({s.fp}/{s.negatives}) > {ceiling}")
        return out

    def to_dict(self) -> dict[str, Any]:
        correct, scored = self.accuracy()
        return {
            "policy": {"version": self.policy_version, "path": self.policy_path},
            "cases_file": self.cases_path,
            "cases": len(self.results),
            "decision_accuracy": _rate(correct, scored),
            "decisions": {name: s.to_dict() for name, s in self.decisions.items()},
            "confusion": self.confusion(),
            "signals": {name: s.to_dict() for name, s in self.signals().items()},
            "by_lang": self.groups("lang"),
            "by_category": self.groups("category"),
            "label_classification": self.label_classification(),
            "misses": [r.miss_dict() for r in self.misses()],
        }

    def render(self, max_misses: int = 50) -> str:
        correct, scored = self.accuracy()
        acc = f"{correct}/{scored} ({100.0 * correct / scored:.1f}%)" if scored else "no case expects a decision"
        lines = [
            f"evaluated {len(self.results)} case(s) from {self.cases_path or 'the case file'} under "
            f"{self.policy_path or 'the policy'} (version {self.policy_version}); decision accuracy {acc}",
        ]
        decisions = self.decisions
        if decisions:
            width = max(8, *(len(n) for n in decisions))
            lines += ["", f"{'decision':<{width}}  support  predicted  precision  recall  fp_rate"]
            for name, s in decisions.items():
                lines.append(
                    f"{name:<{width}}  {s.support:>7}  {s.predicted:>9}  {_fmt(s.precision):>9}  "
                    f"{_fmt(s.recall):>6}  {_fmt(s.fp_rate):>7}"
                )
            matrix = self.confusion()
            columns = sorted({a for row in matrix.values() for a in row})
            cw = [max(5, len(c)) for c in columns]
            lines += ["", "confusion (rows: expected, columns: actual)"]
            lines.append(f"{'':<{width}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(columns, cw, strict=True)))
            for exp, row in matrix.items():
                cells = "  ".join(f"{row.get(c, 0):>{w}}" for c, w in zip(columns, cw, strict=True))
                lines.append(f"{exp:<{width}}  {cells}")
        signals = self.signals()
        if signals:
            width = max(6, *(len(n) for n in signals))
            lines += ["", f"{'signal':<{width}}  ran  matched  hit_rate  unknown  not_run  expected  accuracy  fp  fn"]
            for name, st in signals.items():
                d = st.to_dict()
                lines.append(
                    f"{name:<{width}}  {st.ran:>3}  {st.matched:>7}  {_fmt(d['hit_rate']):>8}  {st.unknown:>7}  "
                    f"{st.not_run:>7}  {st.expected:>8}  {_fmt(d['accuracy']):>8}  {st.false_positives:>2}  "
                    f"{st.false_negatives:>2}"
                )
        for key in ("lang", "category"):
            groups = self.groups(key)
            if not groups:
                continue
            width = max(len(key), *(len(v) for v in groups))
            lines += ["", f"by {key}", f"{key:<{width}}  cases  decision_acc  signal_acc  misses  recall"]
            for value, g in groups.items():
                recall = " ".join(f"{n}={_fmt(r)}" for n, r in g["recall"].items()) or "-"
                lines.append(
                    f"{value:<{width}}  {g['cases']:>5}  {_fmt(g['decision_accuracy']):>12}  "
                    f"{_fmt(g['signal_accuracy']):>10}  {g['misses']:>6}  {recall}"
                )
        for name, c in self.label_classification().items():
            lines += [
                "",
                f"{name} as a classifier: {c['cases']} case(s), accuracy {_fmt(c['accuracy'])}, "
                f"macro-F1 {_fmt(c['macro_f1'])}",
            ]
            width = max(5, *(len(label) for label in c["per_label"]))
            lines.append(f"{'label':<{width}}  support  recall  precision  f1")
            for label, st in c["per_label"].items():
                lines.append(
                    f"{label:<{width}}  {st['support']:>7}  {_fmt(st['recall']):>6}  {_fmt(st['precision']):>9}  "
                    f"{_fmt(st['f1']):>4}"
                )
            columns = sorted({g for row in c["confusion"].values() for g in row})
            lines.append("confusion (rows: expected, columns: top label): " + ", ".join(columns))
            for want, row in c["confusion"].items():
                lines.append(f"{want:<{width}}  " + " ".join(str(row.get(col, 0)) for col in columns))
        misses = self.misses()
        lines += ["", f"misses ({len(misses)})"]
        for r in misses[:max_misses]:
            m = r.miss_dict()
            head = f"- {m['id']} (line {m['line']})"
            if r.decision_ok is False:
                head += f": expected {m['expected_decision']}, got {m['actual_decision']}"
            elif r.case.expected_decision is not None:
                head += f": {m['actual_decision']} (as expected)"
            head += f"; matched: {', '.join(m['matched_signals']) or 'none'}"
            lines.append(head)
            for name, wrong in m["signal_misses"].items():
                lines.append(f"    {name}: expected {json.dumps(wrong['expected'])}, got {wrong['actual']}")
        if len(misses) > max_misses:
            lines.append(f"... and {len(misses) - max_misses} more (--json lists them all)")
        return "\n".join(lines) + "\n"
