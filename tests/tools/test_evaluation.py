"""`extproc eval` on subject-labelled cases: the signal scored as a classifier (accuracy, macro-F1,
per-label recall, confusion), unknown results counted as wrong, in the JSON and the text report."""

from __future__ import annotations

import pytest

from extproc.signals.base import SignalResult, SignalStatus
from extproc.tools.evaluation import CaseResult, EvalCase, EvalReport


def case(line: int, expected: str, got: str | None, status: SignalStatus = SignalStatus.MATCHED) -> CaseResult:
    labels = {got: 0.9} if got is not None else {}
    result = SignalResult("subject", "domain", status, 0.9 if got else 0.0, labels)
    return CaseResult(
        EvalCase(line=line, id=f"c{line}", body=b"{}", expected_signals={"subject": (expected,)}),
        "general",
        "general",
        {"subject": result},
    )


def test_subject_cases_are_scored_as_a_classifier() -> None:
    report = EvalReport(
        "v1",
        "p.yaml",
        "cases.jsonl",
        ["subject"],
        [
            case(1, "math", "math"),
            case(2, "math", "physics"),
            case(3, "physics", "physics"),
            case(4, "law", "law"),
            case(5, "law", None, SignalStatus.TIMEOUT),  # unknown: wrong, never skipped
        ],
    )
    c = report.label_classification()["subject"]
    assert c["cases"] == 5 and c["accuracy"] == 0.6
    assert c["per_label"]["math"]["recall"] == 0.5 and c["per_label"]["physics"]["precision"] == 0.5
    assert c["per_label"]["law"] == {"support": 2, "recall": 0.5, "precision": 1.0, "f1": pytest.approx(0.6667)}
    assert c["confusion"]["law"] == {"(unknown)": 1, "law": 1}
    assert c["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 0.6667) / 3, abs=1e-3)
    assert report.to_dict()["label_classification"]["subject"]["accuracy"] == 0.6
    text = report.render()
    assert "subject as a classifier: 5 case(s), accuracy 0.600" in text and "confusion (rows: expected" in text


def test_boolean_and_multi_label_expectations_are_not_classification() -> None:
    result = SignalResult("pii", "pii", SignalStatus.MATCHED, 1.0, {"email": 1.0})
    r = CaseResult(
        EvalCase(line=1, id="a", body=b"{}", expected_signals={"pii": ("email", "phone"), "x": True}),
        "general",
        None,
        {"pii": result},
    )
    assert EvalReport("v1", None, None, [], [r]).label_classification() == {}
