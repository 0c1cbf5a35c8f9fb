"""`extproc check` reports every problem in one run: a rule set aside for one error still has its
references checked, and a misspelt signal type still has its fields checked against the type it
most likely means."""

from __future__ import annotations

from collections.abc import Callable

POLICY = """
signals:
  - {name: codename, type: fake_inline}
  - {name: odd, type: keywrod, keywords: [x], wholeword: true}
decisions:
  - name: d1
    priority: 2
    when: {signal: codenam}
    acton: {type: route, models: [big-text]}
  - name: d2
    priority: 1
    when: {signal: nothere}
    action: {type: route, models: [big-text]}
default:
  action: {type: route, models: [text-model]}
"""


def test_every_error_in_one_run(policy_errors: Callable[..., list[str]]) -> None:
    errors = "\n".join(policy_errors(POLICY))
    assert "decisions[0].acton: error: unknown field; did you mean 'action'?" in errors
    # the decision set aside for its misspelt action still has its rule checked, with a did-you-mean
    assert "decisions[0].when: error: unknown signal 'codenam'; did you mean 'codename'?" in errors
    assert "decisions[1].when: error: unknown signal 'nothere'" in errors
    assert "signals[1].type: error: unknown signal type 'keywrod'; did you mean 'keyword'?" in errors
    assert (
        "signals[1].wholeword: error: unknown field of a 'keyword' signal 'wholeword'; did you mean 'whole_word'?"
        in errors
    )


def test_a_correct_reference_in_a_set_aside_rule_is_not_reported(policy_errors: Callable[..., list[str]]) -> None:
    errors = "\n".join(policy_errors(POLICY.replace("codenam}", "codename}")))
    assert "decisions[0].when" not in errors and "acton" in errors
