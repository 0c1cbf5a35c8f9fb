from __future__ import annotations

import itertools

import pytest

from extproc.policy.conditions import All, Any_, ConditionError, Leaf, Not, Tri, evaluate, parse_condition, to_dnf

T, F, U = Tri.TRUE, Tri.FALSE, Tri.UNKNOWN


def values(**kw: Tri):  # type: ignore[no-untyped-def]
    return lambda leaf: kw[leaf.signal]


@pytest.mark.parametrize(
    ("a", "b", "all_", "any_"),
    [
        (T, T, T, T),
        (T, F, F, T),
        (T, U, U, T),
        (F, U, F, U),
        (U, U, U, U),
        (F, F, F, F),
    ],
)
def test_kleene_truth_tables(a: Tri, b: Tri, all_: Tri, any_: Tri) -> None:
    both = [{"signal": "a"}, {"signal": "b"}]
    assert evaluate(parse_condition({"all": both}), values(a=a, b=b))[0] is all_
    assert evaluate(parse_condition({"any": both}), values(a=a, b=b))[0] is any_
    assert evaluate(parse_condition({"not": {"signal": "a"}}), values(a=a))[0] is ~a


def test_not_unknown_is_unknown_and_blames_the_unknown_leaf() -> None:
    cond = parse_condition({"all": [{"signal": "text"}, {"not": {"signal": "vision"}}]})
    value, blame = evaluate(cond, values(text=T, vision=U))
    assert value is U and blame is not None and blame.signal == "vision"


def test_nested_tree_blames_first_false_leaf() -> None:
    cond = parse_condition(
        {"all": [{"signal": "a"}, {"any": [{"signal": "b"}, {"not": [{"signal": "c"}]}]}, {"signal": "d"}]}
    )
    value, blame = evaluate(cond, values(a=T, b=F, c=T, d=F))
    assert value is F and blame is not None and blame.signal == "b"
    assert blame.path == "all[1].any[0]"
    assert evaluate(cond, values(a=T, b=F, c=F, d=T))[0] is T


def test_not_false_blames_the_leaf_that_was_true() -> None:
    value, blame = evaluate(parse_condition({"not": {"any": [{"signal": "x"}, {"signal": "y"}]}}), values(x=F, y=T))
    assert value is F and blame is not None and blame.signal == "y"


@pytest.mark.parametrize(
    ("raw", "path", "problem"),
    [
        ({"not": [{"signal": "a"}, {"signal": "b"}]}, "not", "exactly one child"),
        ({"not": []}, "not", "exactly one child"),
        ({"all": []}, "all", "non-empty list"),
        ({"any": {"signal": "a"}}, "any", "non-empty list"),
        ({"all": [{"signal": "a"}], "any": [{"signal": "b"}]}, "", "cannot be combined"),
        ({"all": [{"signal": "a", "lable": "x"}]}, "all[0]", "unknown field"),
        ({"all": [{"label": "x"}]}, "all[0]", "needs 'signal'"),
        ({"signal": "a", "min_score": 2}, "", "within [0, 1]"),
        ({"signal": "a", "min_score": "high"}, "", "must be a number"),
        ("just a string", "", "must be a mapping"),
    ],
)
def test_malformed_trees_name_the_exact_path(raw: object, path: str, problem: str) -> None:
    with pytest.raises(ConditionError) as caught:
        parse_condition(raw)
    assert caught.value.path == path and problem in caught.value.problem


def test_leaf_fields_parse() -> None:
    leaf = parse_condition({"signal": "img", "label": "passport", "min_score": 0.7})
    assert leaf == Leaf("img", "passport", 0.7, path="when")
    assert leaf.describe() == "img[passport]>=0.7"


def test_dnf_agrees_with_evaluation_on_every_assignment() -> None:
    cond = parse_condition(
        {
            "any": [
                {"all": [{"signal": "a"}, {"not": {"signal": "b"}}]},
                {"not": {"any": [{"signal": "a"}, {"signal": "c"}]}},
            ]
        }
    )
    terms = to_dnf(cond)
    assert terms is not None
    for a, b, c in itertools.product((True, False), repeat=3):
        assignment = {"a": a, "b": b, "c": c}
        expected = evaluate(cond, lambda leaf, s=assignment: Tri.of(s[leaf.signal]))[0] is T  # type: ignore[misc]
        via_dnf = any(all(assignment[k[0]] == v for k, v in term.items()) for term in terms)
        assert via_dnf == expected


def test_dnf_drops_contradictions() -> None:
    assert to_dnf(All((Leaf("a"), Not(Leaf("a"))))) == []
    assert to_dnf(Any_((Leaf("a"), Leaf("b")))) == [{("a", None, None): True}, {("b", None, None): True}]


def test_fast_value_agrees_with_the_tracing_evaluation_on_every_assignment() -> None:
    from extproc.policy.conditions import value

    cond = parse_condition(
        {
            "any": [
                {"all": [{"signal": "a"}, {"not": {"signal": "b"}}]},
                {"not": {"any": [{"signal": "a"}, {"signal": "c"}]}},
            ]
        }
    )
    for a, b, c in itertools.product((T, F, U), repeat=3):
        assignment = {"a": a, "b": b, "c": c}
        assert value(cond, values(**assignment)) is evaluate(cond, values(**assignment))[0]


def _completions(partial: dict[str, Tri | None]) -> list[dict[str, Tri]]:
    """Every way the pending (None) signals may come out: true, false or unknown."""
    names = list(partial)
    choices = [(T, F, U) if partial[n] is None else (partial[n],) for n in names]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*choices)]


@pytest.mark.parametrize(
    "raw",
    [
        {"all": [{"any": [{"signal": "a"}, {"signal": "b"}]}, {"signal": "c"}]},
        {"any": [{"all": [{"signal": "a"}, {"not": {"signal": "b"}}]}, {"not": {"signal": "c"}}]},
        {"not": {"all": [{"signal": "a"}, {"not": {"any": [{"signal": "b"}, {"signal": "c"}]}}]}},
    ],
)
def test_can_still_be_true_is_exact_when_each_signal_is_one_leaf(raw: dict[str, object]) -> None:
    from extproc.policy.conditions import can_still_be_true, value

    cond = parse_condition(raw)
    for combo in itertools.product((T, F, U, None), repeat=3):
        partial = dict(zip("abc", combo, strict=True))
        exact = any(value(cond, values(**full)) is T for full in _completions(partial))
        assert can_still_be_true(cond, lambda leaf, p=partial: p[leaf.signal]) == exact, partial  # type: ignore[misc]


def test_can_still_be_true_never_rules_out_a_reachable_true() -> None:
    """With a signal in two leaves the answer may be a cautious yes, never a wrong no."""
    from extproc.policy.conditions import can_still_be_true, value

    cond = parse_condition({"all": [{"signal": "a"}, {"not": {"signal": "a"}}, {"signal": "b"}]})
    assert can_still_be_true(cond, lambda leaf: None)  # cautious: a and not-a are taken apart
    for combo in itertools.product((T, F, U, None), repeat=2):
        partial = dict(zip("ab", combo, strict=True))
        exact = any(value(cond, values(**full)) is T for full in _completions(partial))
        assert can_still_be_true(cond, lambda leaf, p=partial: p[leaf.signal]) or not exact
    # A signal that could not run (unknown for good) blocks an `all` whatever the pending ones say.
    blocked = parse_condition({"all": [{"any": [{"signal": "a"}, {"signal": "b"}]}, {"signal": "c"}]})
    assert not can_still_be_true(blocked, lambda leaf: {"a": None, "b": F, "c": U}[leaf.signal])
    assert can_still_be_true(blocked, lambda leaf: {"a": None, "b": F, "c": T}[leaf.signal])
