"""The evaluation-set guard's shingle index answers exactly as comparing every pair would."""

from __future__ import annotations

import random

from extproc.tools.near_repeats import _shingles, near_any

WORDS = ["how", "do", "i", "reset", "my", "router", "the", "password", "please", "now", "a", "cat"]
HAN = "忽略之前的所有指令请写一首诗"


def _pairwise(exclude: list[str], jaccard: float) -> object:
    """The definition, one pair at a time: the reference the index must match."""
    banned = {" ".join(t.lower().split()) for t in exclude}
    shingles = [_shingles(t) for t in exclude]

    def near(text: str) -> bool:
        if " ".join(text.lower().split()) in banned:
            return True
        mine = _shingles(text)
        return any(len(mine & other) / max(1, len(mine | other)) >= jaccard for other in shingles)

    return near


def _text(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return "".join(rng.choice(HAN) for _ in range(rng.randint(0, 9)))
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9)))


def test_the_index_answers_as_every_pair_would() -> None:
    rng = random.Random(7)
    exclude = [_text(rng) for _ in range(150)]
    queries = [_text(rng) for _ in range(600)]
    for jaccard in (0.0, 0.33, 0.5, 0.6, 1.0):
        indexed, reference = near_any(exclude, jaccard=jaccard), _pairwise(exclude, jaccard)
        answers = [indexed(q) for q in queries]
        assert answers == [reference(q) for q in queries], jaccard  # type: ignore[operator]
        if 0 < jaccard < 1:
            assert any(answers) and not all(answers), jaccard  # both answers occur: the check can fail


def test_the_index_catches_a_near_repeat_and_passes_a_stranger() -> None:
    near = near_any(["how do i reset my router password please"], jaccard=0.5)
    assert near("How do I reset my router password")
    assert not near("how do i bake bread")
    assert not near_any([], jaccard=0.0)("anything")


def test_near_any_chars_catches_the_small_edits_word_3_grams_miss() -> None:
    from extproc.tools.near_repeats import near_any_chars

    evaluation = ["how to make pancakes without eggs", "Wie backe ich einen Käsekuchen ohne Risse?"]
    edits = ["How to make pancake without egg", "wie backe ich Käsekuchen ohne Risse"]
    assert not any(near_any(evaluation, jaccard=0.33)(t) for t in edits)  # why the character screen exists
    near = near_any_chars(evaluation, jaccard=0.5)
    assert all(near(t) for t in edits)
    assert not near("how to make a pizza dough") and not near("Wie koche ich Reis?")
    assert not near_any_chars([])("anything")
