from __future__ import annotations

from collections.abc import Callable

import pytest

from extproc.policy.load import CompiledPolicy, Diagnostic, PolicyError
from extproc.signals.base import BuildContext

GOOD = """
signals:
  - {name: a, type: fake}
  - {name: b, type: fake, behaviour: no_match}
  - {name: img, type: fake_image, labels: {passport: 0.9, xray: 0.1}}
decisions:
  - name: first
    priority: 10
    when: {all: [{signal: a}, {not: {signal: b}}]}
    action: {type: route, models: [big-text, vlm]}
  - name: second
    priority: 5
    when: {signal: img, label: passport, min_score: 0.5}
    action: {type: route, models: [vlm]}
default:
  name: general
  action: {type: route, models: [text-model, vlm]}
"""


def test_a_good_policy_compiles(compile_policy: Callable[..., CompiledPolicy]) -> None:
    policy = compile_policy(GOOD)
    assert [d.name for d in policy.decisions] == ["first", "second"]
    assert set(policy.signals) == {"a", "b", "img"}
    assert len(policy.version) == 12 and not policy.warnings


def test_decisions_are_ordered_by_priority_not_file_order(compile_policy: Callable[..., CompiledPolicy]) -> None:
    body = GOOD.replace("priority: 10", "priority: 1")
    policy = compile_policy(body)
    assert [d.name for d in policy.decisions] == ["second", "first"]


def test_only_referenced_signals_are_built_and_unused_ones_warned(
    compile_policy: Callable[..., CompiledPolicy],
) -> None:
    body = GOOD.replace("signals:\n", "signals:\n  - {name: unused, type: fake}\n")
    policy = compile_policy(body)
    assert "unused" not in policy.signals
    assert any("'unused' is used by no decision or tool rule" in w.message for w in policy.warnings)


def _one_error(found: list[str]) -> str:
    assert found, "expected an error"
    return "\n".join(found)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("when: {signal: img, label", "when: {signal: imgg, label", "unknown signal 'imgg'"),
        ("models: [big-text, vlm]", "models: [huge-text, vlm]", "unknown model 'huge-text'"),
        ("- {name: b, type: fake, behaviour: no_match}", "- {name: a, type: fake}", "duplicate signal name 'a'"),
        ("name: second", "name: first", "duplicate decision name 'first'"),
        ("name: second", "name: general", "duplicate decision name 'general' (also the default decision)"),
        ("priority: 5", "priority: 10", "duplicate priority 10"),
        ("{not: {signal: b}}", "{not: [{signal: b}, {signal: a}]}", "'not' takes exactly one child, got 2"),
        ("priority: 5", "priority: 5\n    colour: red", "decisions[1].colour: error: unknown field"),
        (
            "- {name: a, type: fake}",
            "- {name: a, type: fake, sensitivity: 3}",
            "signals[0].sensitivity: error: unknown",
        ),
        ("- {name: a, type: fake}", "- {name: a, type: telepathy}", "unknown signal type 'telepathy'"),
        ("label: passport", "label: driving_licence", "has no label 'driving_licence'"),
        ("type: route, models: [vlm]", "type: route, models: [vlm, text-model]", "accepts only ['text']"),
        ("type: route, models: [vlm]", "type: route, models: []", "at least 1 item"),
        ("version: 1", "version: 2", "version"),
    ],
)
def test_each_validation_error_is_reported_precisely(
    old: str, new: str, expected: str, policy_base: str, policy_errors: Callable[..., list[str]]
) -> None:
    body = GOOD.replace(old, new)
    if old == "version: 1":
        found = "\n".join(policy_errors(GOOD, base=policy_base.replace(old, new)))
    else:
        assert body != GOOD, f"replacement {old!r} did not apply"
        found = _one_error(policy_errors(body))
    assert expected in found
    assert "test.yaml:" in found


def test_errors_carry_line_numbers_of_the_offending_node(
    policy_diagnostics: Callable[..., list[Diagnostic]], policy_text: Callable[..., str]
) -> None:
    body = GOOD.replace("models: [big-text, vlm]", "models: [nope, vlm]")
    diags = [d for d in policy_diagnostics(body) if d.severity == "error"]
    assert len(diags) == 1
    diag = diags[0]
    assert diag.location == "decisions[0].action.models[0]"
    expected_line = policy_text(body).splitlines().index("    action: {type: route, models: [nope, vlm]}") + 1
    assert diag.line == expected_line
    assert diag.format().startswith(f"test.yaml:{expected_line}: decisions[0].action.models[0]: error:")


def test_all_problems_are_reported_at_once(policy_errors: Callable[..., list[str]]) -> None:
    body = GOOD.replace("models: [big-text, vlm]", "models: [nope, vlm]").replace("signal: img", "signal: ghost")
    found = policy_errors(body)
    assert len(found) == 2


def test_invalid_yaml_reports_the_line(policy_errors: Callable[..., list[str]]) -> None:
    found = policy_errors("decisions: [\n  {name: x\n")
    assert len(found) == 1 and "invalid YAML" in found[0]
    assert found[0].split(":")[1].isdigit()


def test_contradictory_rule_is_unreachable(policy_errors: Callable[..., list[str]]) -> None:
    body = GOOD.replace("{all: [{signal: a}, {not: {signal: b}}]}", "{all: [{signal: a}, {not: {signal: a}}]}")
    assert "decision 'first' can never be reached" in _one_error(policy_errors(body))


def test_shadowed_rule_is_unreachable(policy_errors: Callable[..., list[str]]) -> None:
    body = GOOD.replace(
        "when: {signal: img, label: passport, min_score: 0.5}",
        "when: {all: [{signal: a}, {not: {signal: b}}, {signal: img}]}",
    )
    assert "decision 'second' can never be reached" in _one_error(policy_errors(body))


def test_rule_reachable_only_through_unknown_is_not_flagged(policy_errors: Callable[..., list[str]]) -> None:
    # 'first' is any(a, not a): never false, but unknown when `a` fails (on_error no_match),
    # and then 'second' can still win.
    body = GOOD.replace("{all: [{signal: a}, {not: {signal: b}}]}", "{any: [{signal: a}, {not: {signal: a}}]}")
    assert policy_errors(body) == []


def test_fail_closed_signals_cannot_hide_behind_unknown(policy_errors: Callable[..., list[str]]) -> None:
    # With on_error=match, `a` is never unknown, so any(a, not a) is always true.
    body = GOOD.replace("{all: [{signal: a}, {not: {signal: b}}]}", "{any: [{signal: a}, {not: {signal: a}}]}")
    body = body.replace("- {name: a, type: fake}", "- {name: a, type: fake, on_error: match}")
    assert "decision 'second' can never be reached" in _one_error(policy_errors(body))


def test_missing_file_is_a_clear_error(build_ctx: BuildContext, tmp_path: object) -> None:
    from pathlib import Path

    from extproc.policy.load import load_policy

    with pytest.raises(PolicyError) as caught:
        load_policy(Path(str(tmp_path)) / "absent.yaml", build_ctx)
    assert "cannot read policy" in str(caught.value)


def test_plugin_headers_are_validated(policy_errors: Callable[..., list[str]]) -> None:
    body = GOOD.replace(
        "action: {type: route, models: [big-text, vlm]}",
        "action: {type: route, models: [big-text, vlm]}\n    plugins: {set_headers: {x-vsr-cluster: vlm_cluster}}",
    )
    assert "reserved" in _one_error(policy_errors(body))


def test_compile_raises_policy_error_listing_problems(compile_policy: Callable[..., CompiledPolicy]) -> None:
    with pytest.raises(PolicyError) as caught:
        compile_policy(GOOD.replace("signal: img", "signal: ghost"))
    assert "unknown signal 'ghost'" in str(caught.value)


def test_a_policy_may_omit_signals_and_decisions(
    compile_policy: Callable[..., CompiledPolicy], policy_base: str
) -> None:
    policy = compile_policy("default: {name: only, action: {type: route, models: [vlm]}}\n", base=policy_base)
    assert policy.decisions == [] and policy.signals == {} and policy.default.name == "only"


def test_model_api_defaults_to_both_and_must_include_openai() -> None:
    from pydantic import ValidationError

    from extproc.policy.schema import ModelSpec

    assert ModelSpec(name="m", cluster="c").api == ["openai", "anthropic"]
    assert ModelSpec(name="m", cluster="c").speaks("anthropic")
    only_openai = ModelSpec(name="m", cluster="c", api=["openai", "openai"])
    assert only_openai.api == ["openai"] and not only_openai.speaks("anthropic")
    with pytest.raises(ValidationError, match="must include 'openai'"):
        ModelSpec(name="m", cluster="c", api=["anthropic"])
    with pytest.raises(ValidationError):
        ModelSpec(name="m", cluster="c", api=["grpc"])
