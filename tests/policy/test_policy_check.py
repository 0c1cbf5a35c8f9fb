"""`extproc check`'s loader behaviour: every problem in one run, names suggested, unreachable
decisions explained, and a note where a check could not run."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from extproc.models.registry import ModelRegistry, ModelUnavailable
from extproc.policy.conditions import parse_condition
from extproc.policy.load import CompiledPolicy, Diagnostic, PolicyError
from extproc.policy.reachability import contradictions, shadowing

GOOD = """
signals:
  - {name: jailbreak, type: fake}
  - {name: code, type: fake}
  - {name: img, type: fake_image, labels: {passport: 0.9, xray: 0.1}}
decisions:
  - name: block
    priority: 100
    when: {signal: jailbreak}
    action: {type: reject, message: "blocked"}
  - name: code_review
    priority: 50
    when: {signal: code}
    action: {type: route, models: [big-text, vlm]}
  - name: passport
    priority: 10
    when: {signal: img, label: passport}
    action: {type: route, models: [vlm]}
default:
  action: {type: route, models: [text-model, vlm]}
"""


def _errors(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.severity == "error"]


def _apply(body: str, *replacements: tuple[str, str]) -> str:
    for old, new in replacements:
        assert old in body, f"replacement {old!r} did not apply"
        body = body.replace(old, new, 1)
    return body


def test_the_good_policy_is_clean(policy_diagnostics: Callable[..., list[Diagnostic]]) -> None:
    assert policy_diagnostics(GOOD) == []


def test_three_different_errors_are_reported_in_one_run(
    policy_diagnostics: Callable[..., list[Diagnostic]],
) -> None:
    body = _apply(
        GOOD,
        # 1. an unknown field (a schema error: before, it stopped every later check)
        ("    priority: 100\n", "    priority: 100\n    colour: red\n"),
        # 2. a duplicate priority
        ("    priority: 10\n", "    priority: 50\n"),
        # 3. an unreachable decision, shadowed by `block`
        ("when: {signal: img, label: passport}", "when: {all: [{signal: jailbreak}, {signal: img}]}"),
        ("    priority: 50\n    when: {all", "    priority: 40\n    when: {all"),
    )
    errors = _errors(policy_diagnostics(body))
    found = {d.location: d.message for d in errors}
    assert found.keys() == {"decisions[0].colour", "decisions[2].when"}, found
    body = _apply(body, ("    priority: 40\n", "    priority: 50\n"))
    errors = _errors(policy_diagnostics(body))
    messages = [d.format() for d in errors]
    assert len(errors) == 3, messages
    assert any("decisions[0].colour: error: unknown field" in m for m in messages)
    assert any("decisions[2].priority: error: duplicate priority 50 (also decisions[1])" in m for m in messages)
    assert any("decisions[2].when: error: decision 'passport' can never be reached" in m for m in messages)


def test_a_misspelt_reference_gets_the_closest_name(policy_errors: Callable[..., list[str]]) -> None:
    cases = [
        (
            ("when: {signal: jailbreak}", "when: {signal: jailbrake}"),
            "unknown signal 'jailbrake'; did you mean 'jailbreak'?",
        ),
        (("models: [big-text, vlm]", "models: [big-txt, vlm]"), "unknown model 'big-txt'; did you mean 'big-text'?"),
        (
            ("- {name: code, type: fake}", "- {name: code, type: fak}"),
            "unknown signal type 'fak'; did you mean 'fake'?",
        ),
        (("label: passport", "label: pasport"), "has no label 'pasport'; did you mean 'passport'?"),
        (
            ("    priority: 50\n", "    prioritty: 50\n"),
            "decisions[1].prioritty: error: unknown field; did you mean 'priority'?",
        ),
        (("- {name: code, type: fake}", "- {name: code, type: fake, behavour: match}"), "did you mean 'behaviour'?"),
    ]
    for replacement, expected in cases:
        found = "\n".join(policy_errors(_apply(GOOD, replacement)))
        assert expected in found, (replacement, found)
        assert "known:" not in found  # a close name is suggested instead of the whole list


def test_a_name_with_nothing_close_lists_the_known_ones(policy_errors: Callable[..., list[str]]) -> None:
    found = "\n".join(policy_errors(_apply(GOOD, ("when: {signal: jailbreak}", "when: {signal: zzz}"))))
    assert "unknown signal 'zzz'; known: code, img, jailbreak" in found


def test_a_shadowed_decision_names_the_decision_that_shadows_it(policy_errors: Callable[..., list[str]]) -> None:
    body = _apply(GOOD, ("when: {signal: img, label: passport}", "when: {all: [{signal: code}, {signal: img}]}"))
    (error,) = policy_errors(body)
    assert "decision 'passport' can never be reached: decision 'code_review' has a higher priority" in error


def test_a_decision_shadowed_by_two_together_names_both(policy_errors: Callable[..., list[str]]) -> None:
    # passport = img and (code or jailbreak): neither higher decision alone covers it, both do.
    body = _apply(
        GOOD,
        (
            "when: {signal: img, label: passport}",
            "when: {all: [{signal: img}, {any: [{signal: code}, {signal: jailbreak}]}]}",
        ),
    )
    (error,) = policy_errors(body)
    assert "decisions 'block', 'code_review' have higher priorities and, together," in error


def test_a_contradiction_names_the_leaves(policy_errors: Callable[..., list[str]]) -> None:
    body = _apply(GOOD, ("when: {signal: code}", "when: {all: [{signal: code}, {not: {signal: code}}]}"))
    (error,) = policy_errors(body)
    assert "decision 'code_review' can never be reached: its rule contradicts itself" in error
    assert "code must be both true (all[0]) and false (all[1].not)" in error


def test_contradictions_cover_every_alternative() -> None:
    rule = parse_condition(
        {
            "all": [
                {"signal": "a"},
                {"any": [{"not": {"signal": "a"}}, {"all": [{"signal": "b"}, {"not": {"signal": "b"}}]}]},
            ]
        }
    )
    found = {(c.leaf.signal, c.leaf.path, c.negated.path) for c in contradictions(rule)}
    assert found == {("a", "all[0]", "all[1].any[0].not"), ("b", "all[1].any[1].all[0]", "all[1].any[1].all[1].not")}
    assert contradictions(parse_condition({"all": [{"signal": "a"}, {"not": {"signal": "b"}}]})) == []


def test_shadowing_is_minimal() -> None:
    rule = parse_condition({"all": [{"signal": "x"}, {"signal": "y"}]})
    higher = [
        ("broad", parse_condition({"signal": "x"})),
        ("unrelated", parse_condition({"signal": "z"})),
        ("also", parse_condition({"signal": "y"})),
    ]
    # Either of `broad` or `also` alone shadows the rule; `unrelated` never takes part.
    names = shadowing(rule, higher, {})
    assert len(names) == 1 and names[0] in {"broad", "also"}


def test_a_broken_signal_is_not_reported_again_through_its_references(
    policy_errors: Callable[..., list[str]],
) -> None:
    body = _apply(GOOD, ("- {name: code, type: fake}", "- {name: code, type: fake, behaviour: [1]}"))
    errors = policy_errors(body)
    assert len(errors) == 1 and "signals[1].behaviour" in errors[0], errors


def test_indices_stay_the_files_after_a_broken_item_is_set_aside(
    policy_diagnostics: Callable[..., list[Diagnostic]],
) -> None:
    body = _apply(
        GOOD,
        ('action: {type: reject, message: "blocked"}', "action: {type: reject}"),  # block set aside
        ("    priority: 10\n", "    priority: 50\n"),
        ("models: [vlm]", "models: [vlmm]"),
    )
    diagnostics = policy_diagnostics(body)
    errors = {d.location: d.message for d in _errors(diagnostics)}
    assert errors.keys() == {
        "decisions[0].action.reject.message",
        "decisions[2].priority",
        "decisions[2].action.models[0]",
    }, errors
    assert "(also decisions[1])" in errors["decisions[2].priority"]
    notes = [d.message for d in diagnostics if d.severity == "note"]
    assert any("decision 'block' was not checked for reachability" in n for n in notes), notes


def test_a_check_that_cannot_run_says_so(policy_diagnostics: Callable[..., list[Diagnostic]], policy_base: str) -> None:
    # Without `models` there is no policy to check references on: the file's error, then a note.
    diagnostics = policy_diagnostics(GOOD, base="version: 1\n")
    assert [d.severity for d in diagnostics] == ["error", "note"]
    assert diagnostics[0].location == "models"
    assert "references, priorities, capabilities and reachability were not checked" in diagnostics[1].message
    invalid_yaml = policy_diagnostics("decisions: [\n", base=policy_base)
    assert [d.severity for d in invalid_yaml] == ["error", "note"]


def test_serving_never_takes_a_policy_with_errors_set_aside(compile_policy: Callable[..., CompiledPolicy]) -> None:
    body = _apply(GOOD, ("    priority: 100\n", "    priority: 100\n    colour: red\n"))
    with pytest.raises(PolicyError) as caught:
        compile_policy(body)
    assert "unknown field" in str(caught.value)


def test_a_registry_that_loads_nothing_never_runs_a_loader() -> None:
    calls: list[str] = []
    registry = ModelRegistry(load=False, not_loaded="not loaded here")

    def loader() -> object:
        calls.append("loaded")
        return object()

    with pytest.raises(ModelUnavailable, match="not loaded here"):
        registry.get("vision", loader)
    assert calls == []
    assert ModelRegistry().get("vision", loader) is not None and calls == ["loaded"]


# -- routes that an image request reaches but cannot be served on ---------------------------------

TEXT_ONLY_CODE_ROUTE = ("models: [big-text, vlm]", "models: [big-text]")


def _warnings(diagnostics: list[Diagnostic]) -> list[str]:
    """The text-only route warnings (an unused test signal has its own)."""
    found = [f"{d.location}: {d.message}" for d in diagnostics if d.severity == "warning"]
    return [w for w in found if "routes only to text-only models" in w]


def test_a_text_only_route_an_image_request_reaches_is_a_warning(
    policy_diagnostics: Callable[..., list[Diagnostic]],
) -> None:
    diagnostics = policy_diagnostics(_apply(GOOD, TEXT_ONLY_CODE_ROUTE))
    assert _errors(diagnostics) == []
    [warning] = _warnings(diagnostics)
    assert warning.startswith("decisions[1].action.models: decision 'code_review' routes only to text-only models")
    assert "400 no_capable_model" in warning and "`not` of a `modality` signal" in warning


@pytest.mark.parametrize(
    "fix",
    [
        # its rule keeps images away
        ("when: {signal: code}", "when: {all: [{signal: code}, {not: {signal: pics}}]}"),
        # a higher decision takes every image request first
        ("    when: {signal: jailbreak}\n", "    when: {any: [{signal: jailbreak}, {signal: pics}]}\n"),
        # a model that reads images behind the text one
        ("models: [big-text]", "models: [big-text, vlm]"),
    ],
)
def test_a_text_only_route_images_never_reach_is_clean(
    fix: tuple[str, str], policy_diagnostics: Callable[..., list[Diagnostic]]
) -> None:
    body = _apply(GOOD, TEXT_ONLY_CODE_ROUTE, ("signals:\n", "signals:\n  - {name: pics, type: modality}\n"))
    assert len(_warnings(policy_diagnostics(body))) == 1  # the check's own premise
    fixed = policy_diagnostics(_apply(body, fix))
    assert _errors(fixed) == [] and _warnings(fixed) == []


def test_no_text_only_warning_where_no_model_reads_images(
    policy_base: str, policy_diagnostics: Callable[..., list[Diagnostic]]
) -> None:
    """A text-only deployment answers every image request alike; no decision is to blame."""
    body = _apply(GOOD, TEXT_ONLY_CODE_ROUTE, ("models: [vlm]", "models: [big-text]"))
    body = _apply(
        body, ("{name: img, type: fake_image, labels: {passport: 0.9, xray: 0.1}}", "{name: img, type: fake}")
    )
    assert _warnings(policy_diagnostics(body))  # with the image model listed
    text_only = policy_base.replace("{name: vlm, cluster: vlm_cluster, modalities: [text, image]}", "")
    assert _warnings(policy_diagnostics(body, base=text_only)) == []


def test_a_route_that_fires_only_on_images_is_an_error_not_also_a_warning(
    policy_diagnostics: Callable[..., list[Diagnostic]],
) -> None:
    body = _apply(
        GOOD,
        (
            "    when: {signal: img, label: passport}\n    action: {type: route, models: [vlm]}",
            "    when: {signal: img, label: passport}\n    action: {type: route, models: [big-text]}",
        ),
    )
    diagnostics = policy_diagnostics(body)
    assert [d.location for d in _errors(diagnostics)] == ["decisions[2].action.models[0]"]
    assert _warnings(diagnostics) == []


def test_a_text_only_default_that_images_reach_is_a_warning(
    policy_diagnostics: Callable[..., list[Diagnostic]],
) -> None:
    body = _apply(GOOD, ("models: [text-model, vlm]", "models: [text-model]"))
    [warning] = _warnings(policy_diagnostics(body))
    assert warning.startswith("default.action.models: the default 'general' routes only to text-only models")
    # A decision that takes every image request first leaves the default text only.
    body = _apply(body, ("signals:\n", "signals:\n  - {name: pics, type: modality}\n"))
    body = _apply(
        body,
        (
            "    when: {signal: img, label: passport}\n",
            "    when: {any: [{signal: img, label: passport}, {signal: pics}]}\n",
        ),
    )
    assert _warnings(policy_diagnostics(body)) == []
