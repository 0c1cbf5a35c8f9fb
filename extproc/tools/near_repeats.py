"""The guard that keeps written or generated training rows apart from the evaluation sets: a text
near one of them (equal after case and spacing, or sharing most word 3-grams) is not trained on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

Shingle = tuple[str, ...]
_Gram = TypeVar("_Gram", bound=Hashable)


def _shingles(text: str) -> set[Shingle]:
    """Word 3-grams; character 4-grams for text written without spaces (Chinese, Japanese)."""
    words = text.lower().split()
    if len(words) < 3:
        chars = "".join(words)
        return {tuple(chars[i : i + 4]) for i in range(max(1, len(chars) - 3))}
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def near_any(exclude: Sequence[str], jaccard: float = 0.6) -> Callable[[str], bool]:
    """A test of whether a text equals, or (word 3-grams) nearly repeats, one of `exclude`: how
    generated training rows are kept apart from the evaluation sets.

    The excluded texts are indexed by shingle, so a text is compared only with those sharing one
    of its shingles (a pairwise scan cost training 15M set operations for 4,700 generated rows)."""
    banned = {" ".join(t.lower().split()) for t in exclude}
    shared_enough = _indexed_jaccard(exclude, _shingles, jaccard)

    def near(text: str) -> bool:
        if " ".join(text.lower().split()) in banned:
            return True
        if jaccard <= 0:  # every pair reaches a bar of 0, shared shingles or not
            return bool(exclude)
        return shared_enough(text)

    return near


def near_any_chars(exclude: Sequence[str], jaccard: float = 0.5, n: int = 5) -> Callable[[str], bool]:
    """Like `near_any` on character n-grams (case and spacing folded): catches a short text that
    changes a word or two of an evaluation text, which word 3-grams of a short text miss."""

    def grams(text: str) -> set[str]:
        folded = " ".join(text.lower().split())
        return {folded[i : i + n] for i in range(max(1, len(folded) - n + 1))}

    return _indexed_jaccard(exclude, grams, jaccard)


def _indexed_jaccard(
    exclude: Sequence[str], grams: Callable[[str], set[_Gram]], jaccard: float
) -> Callable[[str], bool]:
    """Does a text share at least `jaccard` of its `grams` (Jaccard) with one of `exclude`? The
    excluded texts are indexed by gram, so a text is compared only with those sharing one."""
    sizes: list[int] = []
    postings: dict[_Gram, list[int]] = {}
    for index, text in enumerate(exclude):
        theirs = grams(text)
        sizes.append(len(theirs))
        for gram in theirs:
            postings.setdefault(gram, []).append(index)

    def near(text: str) -> bool:
        mine = grams(text)
        shared = Counter(index for gram in mine for index in postings.get(gram, ()))
        return any(count / max(1, len(mine) + sizes[index] - count) >= jaccard for index, count in shared.items())

    return near
