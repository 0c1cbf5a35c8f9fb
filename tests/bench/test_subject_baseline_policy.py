"""bench/subject_baseline_policy.py: issue 44's throughput baseline is the default policy without
subject and difficulty routing, and nothing else removed."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from extproc.policy.load import PolicyLoader

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "subject_baseline_policy", REPO / "bench" / "subject_baseline_policy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_default_policy_loses_its_subject_routes_only(bench_module: Any) -> None:
    policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text(encoding="utf-8"))
    baseline = bench_module.without_subject_routing(policy)
    gone_signals = {s["name"] for s in policy["signals"]} - {s["name"] for s in baseline["signals"]}
    gone_decisions = {d["name"] for d in policy["decisions"]} - {d["name"] for d in baseline["decisions"]}
    assert gone_signals == {"subject", "subject_area", "difficulty"}
    assert gone_decisions == {"stem_hard", "stem_easy", "health_question"}
    assert baseline["default"] == policy["default"] and baseline["cache"] == policy["cache"]
    # what is left still loads: no decision names a removed signal
    PolicyLoader().parse_text(yaml.safe_dump(baseline, allow_unicode=True))


def test_a_policy_without_subject_routing_is_refused(bench_module: Any) -> None:
    plain = {"signals": [{"name": "code", "type": "keyword", "keywords": ["def"]}], "decisions": []}
    with pytest.raises(SystemExit):
        bench_module.without_subject_routing(plain)


def test_signal_names_are_found_at_any_depth(bench_module: Any) -> None:
    when = {"all": [{"signal": "a"}, {"any": [{"not": {"signal": "b", "label": "x"}}, {"signal": "c"}]}]}
    assert bench_module.names_in(when) == {"a", "b", "c"}
