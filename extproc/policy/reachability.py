"""Can a decision ever win? And when it cannot, why: a contradiction in its own rule, or the
higher-priority decisions that always win first.

A decision is reachable when some assignment of its leaves makes it true while every
higher-priority decision is not true. Unknown is a legal value for signals whose `on_error`
is `no_match`; for `match` / `reject` signals only true and false are.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extproc.policy.conditions import All, Any_, Condition, Leaf, Not, Tri, evaluate, leaves, to_dnf

Atom = tuple[str, str | None, float | None]
# Past this many free atoms of the higher rules, the check gives up rather than try 2**n values.
MAX_FREE_ATOMS = 12


def reachable(cond: Condition, higher: Sequence[Condition], on_error: Mapping[str, str]) -> bool | None:
    """True when `cond` can be true while no rule in `higher` is; None when too large to check."""
    terms = to_dnf(cond)
    if terms is None:
        return None
    higher_atoms = sorted(
        {leaf.key for h in higher for leaf in leaves(h)}, key=lambda k: (k[0], k[1] or "", k[2] or -1.0)
    )
    for term in terms:
        # Atoms outside the term: unknown where the signal may stay unknown (which can only make
        # higher rules less true), otherwise try both truth values.
        free = [a for a in higher_atoms if a not in term and on_error.get(a[0], "no_match") != "no_match"]
        if len(free) > MAX_FREE_ATOMS:
            return None
        for values in itertools.product((False, True), repeat=len(free)):
            assignment: dict[Any, Tri] = {k: Tri.of(v) for k, v in term.items()}
            assignment.update({k: Tri.of(v) for k, v in zip(free, values, strict=True)})

            def value_of(leaf: Leaf, assignment: dict[Any, Tri] = assignment) -> Tri:
                return assignment.get(leaf.key, Tri.UNKNOWN)

            if all(evaluate(h, value_of)[0] is not Tri.TRUE for h in higher):
                return True
    return False


def shadowing(cond: Condition, higher: Sequence[tuple[str, Condition]], on_error: Mapping[str, str]) -> list[str]:
    """The names of a smallest set of `higher` rules that, together, leave `cond` unreachable.

    Deletion-minimal: every rule named is needed (drop any one and `cond` could win). Called only
    for a rule already found unreachable, so its cost (one check per higher rule) is paid rarely.
    """
    kept = list(higher)
    # Try to drop the lowest-priority rules first, so the rules named are the likeliest culprits.
    for candidate in reversed(list(higher)):
        rest = [pair for pair in kept if pair is not candidate]
        if reachable(cond, [c for _, c in rest], on_error) is False:
            kept = rest
    return [name for name, _ in kept]


@dataclass(frozen=True, slots=True)
class Contradiction:
    """One alternative of a rule that needs a leaf both true and false."""

    leaf: Leaf  # where the leaf is required true
    negated: Leaf  # where the same leaf is required false


def contradictions(cond: Condition, limit: int = 256) -> list[Contradiction]:
    """For a rule that can never be true: per alternative (DNF term), the leaf it needs both ways.

    Empty when the rule is satisfiable or too large to expand (more than `limit` alternatives).
    """
    if to_dnf(cond) != []:
        return []
    raw = _raw_terms(cond, True, limit)
    if raw is None:
        return []
    found: dict[tuple[Atom, str, str], Contradiction] = {}
    for term in raw:
        seen: dict[Atom, tuple[bool, Leaf]] = {}
        for leaf, positive in term:
            other = seen.get(leaf.key)
            if other is not None and other[0] != positive:
                yes, no = (leaf, other[1]) if positive else (other[1], leaf)
                found.setdefault((leaf.key, yes.path, no.path), Contradiction(yes, no))
                break
            seen.setdefault(leaf.key, (positive, leaf))
    return list(found.values())


def _raw_terms(node: Condition, positive: bool, limit: int) -> list[list[tuple[Leaf, bool]]] | None:
    """DNF terms as literal lists, contradictions kept (to_dnf drops them), leaves kept for their paths."""
    if isinstance(node, Leaf):
        return [[(node, positive)]]
    if isinstance(node, Not):
        return _raw_terms(node.child, not positive, limit)
    assert isinstance(node, All | Any_)
    parts = [_raw_terms(child, positive, limit) for child in node.children]
    if any(p is None for p in parts):
        return None
    if isinstance(node, All) != positive:  # a disjunction
        out = [term for part in parts for term in part or []]
        return out if len(out) <= limit else None
    terms: list[list[tuple[Leaf, bool]]] = [[]]
    for part in parts:
        terms = [left + right for left in terms for right in part or []]
        if len(terms) > limit:
            return None
    return terms
