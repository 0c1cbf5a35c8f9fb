"""NER: a token-classification checkpoint's labels aggregated into entity spans with character offsets."""

from __future__ import annotations

from pathlib import Path

import pytest

from extproc.models.ner import Entity, NerCheckpointError, _Word, get_ner, group_words, load_ner, split_tag
from extproc.models.registry import ModelRegistry, ModelUnavailable
from extproc.testing.tiny_text_models import build_tiny_token_classifier

ENTITY_WORDS = {"john": "B-PER", "smith": "I-PER", "paris": "B-LOC", "london": "B-LOC", "march": "B-DATE",
                "1990": "I-DATE"}  # fmt: skip


@pytest.fixture(scope="module")
def wired_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_token_classifier(tmp_path_factory.mktemp("ner"), entity_words=ENTITY_WORDS)


def spans(text: str, entities: list[Entity]) -> list[tuple[str, str]]:
    return [(e.type, text[e.start : e.end]) for e in entities]


def test_split_tag() -> None:
    assert split_tag("B-PER") == ("B", "PER")
    assert split_tag("I-LOC") == ("I", "LOC")
    assert split_tag("S_DATE") == ("S", "DATE")
    assert split_tag("PER") == (None, "PER")
    assert split_tag("O") == (None, None)
    assert split_tag("B-") == (None, "B-")


def test_group_words_bio_and_bioes() -> None:
    words = [_Word(0, 4, "B-PER", 0.9), _Word(5, 10, "I-PER", 0.7), _Word(11, 13, "O", 0.99),
             _Word(14, 19, "I-LOC", 0.8), _Word(20, 25, "B-LOC", 0.6), _Word(26, 30, "S-PER", 0.5),
             _Word(31, 35, "I-PER", 0.5)]  # fmt: skip
    got = group_words(words)
    assert [(e.type, e.start, e.end) for e in got] == [
        ("PER", 0, 10), ("LOC", 14, 19), ("LOC", 20, 25), ("PER", 26, 30), ("PER", 31, 35),
    ]  # fmt: skip
    assert got[0].score == pytest.approx(0.8)


def test_entities_with_character_offsets(wired_dir: Path) -> None:
    ner = load_ner(wired_dir)
    assert ner.types == {"PER", "LOC", "DATE"}
    text = "Hello, my name is John Smith and I live in Paris; born on March 3 1990."
    found = ner.find(text)
    # "march 3 1990": 3 is O, so 1990 (I-DATE after O) starts a second DATE entity.
    assert spans(text, found) == [("PER", "John Smith"), ("LOC", "Paris"), ("DATE", "March"), ("DATE", "1990")]
    assert all(e.score > 0.99 for e in found)
    assert ner.find("   ") == [] and ner.find("what is the weather today") == []


def test_long_texts_run_in_overlapping_windows(wired_dir: Path) -> None:
    ner = load_ner(wired_dir)
    filler = "the weather today is " * 60  # ~240 words, past the 128 positions of the tiny model
    text = "john smith wrote: " + filler + "meet me in london. " + filler + "from paris"
    found = spans(text, ner.find(text))
    assert found == [("PER", "john smith"), ("LOC", "london"), ("LOC", "paris")]  # each once


def test_subword_tokens_stay_in_their_word(tmp_path: Path) -> None:
    ner = load_ner(build_tiny_token_classifier(tmp_path, force="B-PER"))
    text = "Johnny lives"  # "johnny" is john ##n ##y: one word, one entity
    assert spans(text, ner.find(text)) == [("PER", "Johnny"), ("PER", "lives")]


def test_missing_directory_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(NerCheckpointError, match="not a directory"):
        load_ner(tmp_path / "missing")
    models = ModelRegistry()
    with pytest.raises(ModelUnavailable):
        get_ner(models, tmp_path / "missing")
    assert [s.loaded for s in models.statuses()] == [False]
