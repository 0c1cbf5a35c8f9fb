"""bench_safety.without_classifier: the baseline policy of `bench_envoy.py --without-classifier`
and of the safety bench must be the policy whose classifier signals never match, not a wider one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def without_classifier() -> Any:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec = importlib.util.spec_from_file_location("bench_safety", REPO / "bench" / "bench_safety.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "bench"))
    return module.without_classifier


def policy(*decisions: dict[str, Any]) -> dict[str, Any]:
    signals = [{"name": "clf", "type": "classifier"}, {"name": "code", "type": "keyword", "keywords": ["def"]}]
    return {"signals": signals, "decisions": list(decisions), "tool_rules": []}


def test_a_confirmed_branch_with_a_negation_is_not_widened(without_classifier: Any) -> None:
    # Dropping the classifier leaves would leave `all: [not code]`: a refusal of every request
    # without code, which is what made the bench's baseline answer 403 to ordinary texts.
    confirm = {"all": [{"signal": "clf", "label": "unsure"}, {"signal": "clf"}, {"not": {"signal": "code"}}]}
    folded = without_classifier(policy({"name": "block", "when": confirm}))
    assert folded["decisions"] == []
    assert [s["name"] for s in folded["signals"]] == ["code"]


def test_other_branches_of_an_any_are_kept(without_classifier: Any) -> None:
    when = {"any": [{"signal": "code"}, {"all": [{"signal": "clf"}, {"not": {"signal": "code"}}]}]}
    folded = without_classifier(policy({"name": "block", "when": when}))
    assert folded["decisions"] == [{"name": "block", "when": {"any": [{"signal": "code"}]}}]


def test_a_negated_classifier_leaf_is_true(without_classifier: Any) -> None:
    when = {"all": [{"signal": "code"}, {"not": {"signal": "clf"}}]}
    folded = without_classifier(policy({"name": "route", "when": when}))
    assert folded["decisions"] == [{"name": "route", "when": {"all": [{"signal": "code"}]}}]
    with pytest.raises(ValueError, match="always true"):
        without_classifier(policy({"name": "always", "when": {"not": {"signal": "clf"}}}))


def test_the_default_policy_keeps_no_classifier_leaf_and_no_widened_refusal(without_classifier: Any) -> None:
    document = yaml.safe_load((REPO / "policies" / "default.yaml").read_text(encoding="utf-8"))
    learned = {s["name"] for s in document["signals"] if s.get("type") == "classifier"}
    assert learned, "the default policy has classifier signals to fold"
    folded = without_classifier(document)
    text = yaml.safe_dump(folded)
    assert not any(f"signal: {name}\n" in text for name in learned)
    by_name = {d["name"]: d for d in folded["decisions"]}
    # The jailbreak decision keeps its pattern branches and loses the classifier's whole branch.
    block = by_name["jailbreak_block"]["when"]["any"]
    assert {"signal": "jailbreak"} in block
    assert not any("not" in str(branch) and "code_present" in str(branch) for branch in block)
