"""The guard that keeps written or generated training rows apart from the evaluation sets: a text
near one of them (equal after case and spacing, or sharing most word 3-grams) is not trained on."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def _shingles(text: str) -> set[tuple[str, ...]]:
    """Word 3-grams; character 4-grams for text written without spaces (Chinese, Japanese)."""
    words = text.lower().split()
    if len(words) < 3:
        chars = "".join(words)
        return {tuple(chars[i : i + 4]) for i in range(max(1, len(chars) - 3))}
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def near_any(exclude: Sequence[str], jaccard: float = 0.6) -> Callable[[str], bool]:
    """A test of whether a text equals, or (word 3-grams) nearly repeats, one of `exclude`: how
    generated training rows are kept apart from the evaluation sets."""
    banned = {" ".join(t.lower().split()) for t in exclude}
    banned_shingles = [_shingles(t) for t in exclude]

    def near(text: str) -> bool:
        if " ".join(text.lower().split()) in banned:
            return True
        mine = _shingles(text)
        return any(len(mine & other) / max(1, len(mine | other)) >= jaccard for other in banned_shingles)

    return near
