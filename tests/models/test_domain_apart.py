"""The subject classifier's written training rows (`extra_train.jsonl`, `head_train.jsonl`) stay
apart by meaning from every evaluation set (`extproc/tools/domain_apart.py`): no row at MiniLM
cosine >= APART_COSINE to a written set, the routing set or, where the corpus is here, the test
split; and the guard catches a planted paraphrase while passing a distinct question."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR
from extproc.models.text_embedder import TextEmbedder, load_text_embedder
from extproc.settings import EmbedderSettings
from extproc.tools.domain_apart import APART_COSINE, DROP_COSINE, evaluation_files, mostly_cjk, too_close

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "domain"


def texts_of(path: Path) -> list[str]:
    return [str(json.loads(line)["text"]) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def encoder() -> TextEmbedder:
    return load_text_embedder(EmbedderSettings(cache_size=0), torch_threads=1)


@pytest.fixture(scope="module")
def evaluation(encoder: TextEmbedder) -> tuple[list[str], np.ndarray[Any, Any]]:
    files = evaluation_files(CORPUS if (CORPUS / "test.jsonl").is_file() else None)
    assert {p.name for p in files} >= {"domain_everyday.jsonl", "domain_exam.jsonl", "domain_unseen.jsonl"}
    texts = [t for p in files for t in texts_of(p)]
    return texts, np.asarray(encoder.embed(texts))


def leaks(encoder: TextEmbedder, train: Sequence[str], evaluation: tuple[list[str], Any]) -> list[str]:
    eval_texts, eval_vecs = evaluation
    near = too_close(train, np.asarray(encoder.embed(list(train))), eval_texts, eval_vecs, APART_COSINE)
    return [f"{n.cosine:.3f} {train[n.train]!r} ~ {eval_texts[n.evaluation]!r}" for n in near]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["extra_train.jsonl", "head_train.jsonl"])
def test_training_rows_stay_apart_from_every_evaluation_set_by_meaning(
    name: str, encoder: TextEmbedder, evaluation: tuple[list[str], Any]
) -> None:
    train = texts_of(DEFAULT_WEIGHTS_DIR / name)
    assert len(train) > 500
    assert leaks(encoder, train, evaluation) == []


@pytest.mark.slow
def test_the_guard_catches_a_planted_paraphrase(encoder: TextEmbedder, evaluation: tuple[list[str], Any]) -> None:
    eval_texts, _ = evaluation
    question = next(t for t in eval_texts if "Abbey Road" in t)
    train = texts_of(DEFAULT_WEIGHTS_DIR / "extra_train.jsonl")[:50]
    planted = "What British group put out the 1969 record Abbey Road?"
    assert leaks(encoder, [*train, planted], evaluation) == leaks(encoder, [planted], evaluation)
    caught = leaks(encoder, [planted], evaluation)
    assert len(caught) == 1 and question in caught[0]
    # A question on another matter passes: the threshold does not catch everything.
    assert leaks(encoder, ["Which enzyme unwinds the DNA double helix during replication?"], evaluation) == []


def test_cjk_texts_are_compared_by_characters_not_minilm() -> None:
    """MiniLM puts Chinese questions near each other whatever they ask: two distinct ones pass,
    a copy with one character changed is caught."""
    vec = np.ones((1, 4), dtype=np.float32)  # identical vectors: cosine 1.0, which must not count
    assert mostly_cjk("什么是功利主义？") and not mostly_cjk("What is utilitarianism?")
    assert too_close(["什么是功利主义？"], vec, ["感冒了可以吃布洛芬吗？"], vec) == []
    assert [n.train for n in too_close(["什么是功利主义呢？"], vec, ["什么是功利主义？"], vec)] == [0]
    # Latin text: the cosine decides, and only at the threshold.
    assert too_close(["a"], vec, ["b"], vec)[0].cosine == pytest.approx(1.0)
    other = np.array([[1, 0, 0, 0]], dtype=np.float32)
    assert too_close(["a"], other, ["b"], vec) == []  # cosine 0.5
    assert DROP_COSINE < APART_COSINE


def test_too_close_refuses_mismatched_input() -> None:
    with pytest.raises(ValueError, match="one vector per text"):
        too_close(["a", "b"], np.ones((1, 4)), ["c"], np.ones((1, 4)))
    with pytest.raises(ValueError, match="widths differ"):
        too_close(["a"], np.ones((1, 4)), ["c"], np.ones((1, 3)))
