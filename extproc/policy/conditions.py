"""Rule trees (`all` / `any` / `not` over signal leaves) and three-valued (Kleene) logic.

Parsed by hand rather than through a pydantic union so a mistake deep in a tree gets one
precise message with its path (`all[1].not: ...`) instead of a union's every-branch noise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Tri(Enum):
    """Kleene truth values: unknown is neither true nor false."""

    FALSE = 0
    UNKNOWN = 1
    TRUE = 2

    def __invert__(self) -> Tri:
        return _NOT[self]

    @classmethod
    def of(cls, value: bool) -> Tri:
        return cls.TRUE if value else cls.FALSE


_NOT = {Tri.TRUE: Tri.FALSE, Tri.FALSE: Tri.TRUE, Tri.UNKNOWN: Tri.UNKNOWN}


@dataclass(frozen=True, slots=True)
class Leaf:
    signal: str
    label: str | None = None
    min_score: float | None = None
    path: str = ""  # where in the decision it sits, for traces and diagnostics

    def describe(self) -> str:
        text = self.signal
        if self.label is not None:
            text += f"[{self.label}]"
        if self.min_score is not None:
            text += f">={self.min_score:g}"
        return text

    @property
    def key(self) -> tuple[str, str | None, float | None]:
        return (self.signal, self.label, self.min_score)


@dataclass(frozen=True, slots=True)
class All:
    children: tuple[Condition, ...]
    path: str = ""


@dataclass(frozen=True, slots=True)
class Any_:
    children: tuple[Condition, ...]
    path: str = ""


@dataclass(frozen=True, slots=True)
class Not:
    child: Condition
    path: str = ""


Condition = Leaf | All | Any_ | Not
_LEAF_KEYS = frozenset({"signal", "label", "min_score"})


class ConditionError(ValueError):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


def parse_condition(raw: Any, path: str = "") -> Condition:
    """Build a Condition from its YAML form; raises ConditionError naming the exact sub-path."""
    if isinstance(raw, Leaf | All | Any_ | Not):
        return raw
    if not isinstance(raw, dict):
        raise ConditionError(path, f"a condition must be a mapping with 'signal', 'all', 'any' or 'not', got {raw!r}")
    operators = [k for k in ("all", "any", "not") if k in raw]
    if operators:
        if len(raw) != 1:
            extra = sorted(set(raw) - {operators[0]})
            raise ConditionError(path, f"'{operators[0]}' cannot be combined with {extra} in one mapping")
        op = operators[0]
        body = raw[op]
        sub = f"{path}.{op}" if path else op
        if op == "not":
            if isinstance(body, list):
                if len(body) != 1:
                    raise ConditionError(sub, f"'not' takes exactly one child, got {len(body)}")
                body = body[0]
                return Not(parse_condition(body, f"{sub}[0]"), path=sub)
            return Not(parse_condition(body, sub), path=sub)
        if not isinstance(body, list) or not body:
            raise ConditionError(sub, f"'{op}' takes a non-empty list of conditions")
        children = tuple(parse_condition(child, f"{sub}[{i}]") for i, child in enumerate(body))
        return All(children, path=sub) if op == "all" else Any_(children, path=sub)
    unknown = sorted(set(raw) - _LEAF_KEYS)
    if unknown:
        raise ConditionError(path, f"unknown field(s) {unknown}; a leaf has 'signal', 'label', 'min_score'")
    signal = raw.get("signal")
    if not isinstance(signal, str) or not signal:
        raise ConditionError(path, "a leaf needs 'signal': the name of a signal")
    label = raw.get("label")
    if label is not None and not isinstance(label, str):
        raise ConditionError(path, "'label' must be a string")
    min_score = raw.get("min_score")
    if min_score is not None:
        if isinstance(min_score, bool) or not isinstance(min_score, int | float):
            raise ConditionError(path, "'min_score' must be a number")
        if not 0.0 <= float(min_score) <= 1.0:
            raise ConditionError(path, f"'min_score' must be within [0, 1], got {min_score}")
        min_score = float(min_score)
    return Leaf(signal=signal, label=label, min_score=min_score, path=path or "when")


def leaves(cond: Condition) -> Iterator[Leaf]:
    if isinstance(cond, Leaf):
        yield cond
    elif isinstance(cond, Not):
        yield from leaves(cond.child)
    else:
        for child in cond.children:
            yield from leaves(child)


def evaluate(cond: Condition, value_of: Callable[[Leaf], Tri]) -> tuple[Tri, Leaf | None]:
    """Kleene value of `cond`, plus the leaf that decided a non-true result.

    For FALSE the blame is the first leaf that made it false; for UNKNOWN the first leaf whose
    unknown value left it undecided. Every child is still evaluated in order so blame is stable.
    """
    if isinstance(cond, Leaf):
        value = value_of(cond)
        return value, (None if value is Tri.TRUE else cond)
    if isinstance(cond, Not):
        value, blame = evaluate(cond.child, value_of)
        if value is Tri.UNKNOWN:
            return Tri.UNKNOWN, blame
        # not(x) is false because x was true: blame the first leaf that made x true.
        return ~value, (None if value is Tri.FALSE else _first_true_leaf(cond.child, value_of))
    if isinstance(cond, All):
        unknown_blame: Leaf | None = None
        for child in cond.children:
            value, blame = evaluate(child, value_of)
            if value is Tri.FALSE:
                return Tri.FALSE, blame
            if value is Tri.UNKNOWN and unknown_blame is None:
                unknown_blame = blame
        return (Tri.UNKNOWN, unknown_blame) if unknown_blame is not None else (Tri.TRUE, None)
    # Any_
    first_false: Leaf | None = None
    unknown_blame = None
    for child in cond.children:
        value, blame = evaluate(child, value_of)
        if value is Tri.TRUE:
            return Tri.TRUE, None
        if value is Tri.UNKNOWN and unknown_blame is None:
            unknown_blame = blame
        if value is Tri.FALSE and first_false is None:
            first_false = blame
    return (Tri.UNKNOWN, unknown_blame) if unknown_blame is not None else (Tri.FALSE, first_false)


def value(cond: Condition, value_of: Callable[[Leaf], Tri]) -> Tri:
    """Kleene value only, short-circuiting: the hot path's evaluation (no blame for a trace)."""
    if isinstance(cond, Leaf):
        return value_of(cond)
    if isinstance(cond, Not):
        return ~value(cond.child, value_of)
    if isinstance(cond, All):
        result = Tri.TRUE
        for child in cond.children:
            child_value = value(child, value_of)
            if child_value is Tri.FALSE:
                return Tri.FALSE
            if child_value is Tri.UNKNOWN:
                result = Tri.UNKNOWN
        return result
    result = Tri.FALSE
    for child in cond.children:
        child_value = value(child, value_of)
        if child_value is Tri.TRUE:
            return Tri.TRUE
        if child_value is Tri.UNKNOWN:
            result = Tri.UNKNOWN
    return result


def can_still_be_true(cond: Condition, value_of: Callable[[Leaf], Tri | None]) -> bool:
    """Whether `cond` may yet come out TRUE. `value_of` gives a leaf's value, or None for a leaf
    whose signal has not run yet (it may still come out true, false or unknown). Leaves count
    one by one, so two leaves of one signal may both be taken as true: this can say yes where
    the truth is no, never no where the condition could be true."""
    return _can_be(cond, value_of, Tri.TRUE)


def _can_be(cond: Condition, value_of: Callable[[Leaf], Tri | None], target: Tri) -> bool:
    """Whether some outcome of the pending leaves makes `cond` equal `target` (TRUE or FALSE)."""
    if isinstance(cond, Leaf):
        known = value_of(cond)
        return known is None or known is target
    if isinstance(cond, Not):
        return _can_be(cond.child, value_of, ~target)
    every = isinstance(cond, All) == (target is Tri.TRUE)  # all true / any false: every child must
    possible = (_can_be(child, value_of, target) for child in cond.children)
    return all(possible) if every else any(possible)


def _first_true_leaf(cond: Condition, value_of: Callable[[Leaf], Tri]) -> Leaf | None:
    for leaf in leaves(cond):
        if value_of(leaf) is Tri.TRUE:
            return leaf
    return None


def requires_image(cond: Condition, implies_image: Callable[[str], bool]) -> bool:
    """True when the tree can only be true if a signal that implies an image is positive."""
    if isinstance(cond, Leaf):
        return implies_image(cond.signal)
    if isinstance(cond, Not):
        return False
    if isinstance(cond, All):
        return any(requires_image(c, implies_image) for c in cond.children)
    return all(requires_image(c, implies_image) for c in cond.children)


def _is_presence_leaf(cond: Condition, is_presence: Callable[[str], bool]) -> bool:
    return (
        isinstance(cond, Leaf)
        and cond.label in (None, "image_present")
        and cond.min_score is None
        and is_presence(cond.signal)
    )


def excludes_image(cond: Condition, is_presence: Callable[[str], bool]) -> bool:
    """True when the tree can only be true for a request without images: it requires the negation
    of a signal that is positive exactly when a request carries an image (`is_presence`)."""
    if isinstance(cond, Leaf):
        return False
    if isinstance(cond, Not):
        return _is_presence_leaf(cond.child, is_presence)
    if isinstance(cond, All):
        return any(excludes_image(c, is_presence) for c in cond.children)
    return all(excludes_image(c, is_presence) for c in cond.children)


def true_for_every_image(cond: Condition, is_presence: Callable[[str], bool]) -> bool:
    """True when the tree is true for every request that carries an image (a presence leaf, or an
    `any` holding one): a decision with such a rule takes every image request before lower ones."""
    if isinstance(cond, Leaf):
        return _is_presence_leaf(cond, is_presence)
    if isinstance(cond, Not):
        return False
    if isinstance(cond, All):
        return all(true_for_every_image(c, is_presence) for c in cond.children)
    return any(true_for_every_image(c, is_presence) for c in cond.children)


def to_dnf(cond: Condition, limit: int = 4096) -> list[dict[tuple[str, str | None, float | None], bool]] | None:
    """Disjunctive normal form as consistent literal sets {atom: polarity}; None past `limit` terms."""

    def walk(node: Condition, positive: bool) -> list[dict[Any, bool]] | None:
        if isinstance(node, Leaf):
            return [{node.key: positive}]
        if isinstance(node, Not):
            return walk(node.child, not positive)
        conjunctive = isinstance(node, All) == positive
        parts = [walk(child, positive) for child in node.children]
        if any(p is None for p in parts):
            return None
        if not conjunctive:
            out = [term for part in parts for term in part or []]
            return out if len(out) <= limit else None
        terms: list[dict[Any, bool]] = [{}]
        for part in parts:
            merged: list[dict[Any, bool]] = []
            for left in terms:
                for right in part or []:
                    if all(left.get(k, v) == v for k, v in right.items()):
                        merged.append({**left, **right})
            terms = merged
            if len(terms) > limit:
                return None
        return terms

    return walk(cond, True)
