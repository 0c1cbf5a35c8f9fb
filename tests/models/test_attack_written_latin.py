"""The harmful requests and look-alikes written for the harmful output's Latin path
(`harmful_written_latin.jsonl`): rows of the harmful output only, in many Latin-script languages,
kept off every evaluation set, and never read by the other scripts' stage."""

from __future__ import annotations

import collections
import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from extproc.models.attack_classifier import mostly_latin
from extproc.tools.attack_training.corpus import (
    WRITTEN_HARMFUL,
    WRITTEN_LATIN_FILE,
    WRITTEN_TWIN,
    everyday_evaluation_texts,
    load_corpus,
)
from extproc.tools.near_repeats import near_any
from tests.models.test_attack_classifier import TINY, synthetic_rows, write_corpus

SAFETY_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "safety"
LATIN_LANGS = {"es", "fr", "de", "pt", "it", "nl", "pl", "tr", "vi", "id", "ro", "sv"}


def _file_rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in WRITTEN_LATIN_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_latin_rows_cover_the_languages_and_categories_in_latin_script() -> None:
    rows = _file_rows()
    per_lang = collections.Counter(r["lang"] for r in rows if r["label"] == "harmful")
    assert all(per_lang[lang] >= 40 for lang in LATIN_LANGS) and per_lang["en"] >= 60
    benign = collections.Counter(r["lang"] for r in rows if r["label"] == "benign")
    assert all(benign[lang] >= 30 for lang in LATIN_LANGS | {"en"})
    topics = {r["topic"] for r in rows if r["label"] == "harmful"}
    assert topics >= {"violence", "weapons", "cybercrime", "fraud", "theft", "drugs", "harassment", "hate"}
    assert topics >= {"stalking", "forgery", "self_harm", "sexual", "privacy"}
    assert all(mostly_latin(r["text"]) for r in rows)
    assert len({" ".join(r["text"].lower().split()) for r in rows}) == len(rows)  # no repeats


def test_the_latin_rows_stay_off_the_evaluation_sets() -> None:
    """No row shares a third of its word 3-grams with an evaluation text (the everyday sets, the
    probes, the held-out multilingual harmful requests, and the test split where it is present)."""
    held_out = everyday_evaluation_texts()
    if (SAFETY_CORPUS / "test.jsonl").is_file():
        held_out += [r.text for r in load_corpus(SAFETY_CORPUS, "test")]
    near = near_any(held_out, jaccard=0.33)
    assert [r["text"] for r in _file_rows() if near(r["text"])] == []


def test_the_latin_rows_train_the_harmful_output_only_and_not_the_script_stage(tmp_path: Path) -> None:
    from extproc.tools.attack_training.train import _training_set, rows_for

    corpus = write_corpus(tmp_path / "corpus", synthetic_rows())
    without = _training_set(corpus, dataclasses.replace(TINY, written_harmful=True), lambda _: None)
    data = _training_set(corpus, dataclasses.replace(TINY, written_harmful=True, written_latin=True), lambda _: None)
    file_texts = {r["text"] for r in _file_rows()}
    latin = [i for i, r in enumerate(data.rows) if r.text in file_texts]
    assert len(latin) == len(file_texts) and not any(r.text in file_texts for r in without.rows)
    assert {data.rows[i].category for i in latin} == {WRITTEN_HARMFUL, WRITTEN_TWIN}
    attack_used, _ = rows_for(data, "attack")
    harmful_used, positive = rows_for(data, "harmful")
    assert not attack_used[latin].any() and harmful_used[latin].all()
    assert [bool(positive[i]) for i in latin] == [data.rows[i].label == "harmful" for i in latin]
    # The rows before them are the same rows, in the same order and folds.
    assert data.texts[: len(without.texts)] == without.texts
    assert (data.folds[: len(without.texts)] == without.folds).all()
    # `written_scale` scales every written row's weight (both files), and no other row's.
    scaled = _training_set(
        corpus, dataclasses.replace(TINY, written_harmful=True, written_latin=True, written_scale=0.25), lambda _: None
    )
    written = np.array([r.category in (WRITTEN_HARMFUL, WRITTEN_TWIN) for r in data.rows])
    assert written.sum() > len(latin) and (data.row_scale[written] == 1.0).all()
    assert (scaled.row_scale[written] == 0.25).all() and (scaled.row_scale[~written] == data.row_scale[~written]).all()


def test_the_script_stage_reads_no_latin_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fit_script_lexical` fits the other scripts' model on the rows it was chosen on, at their
    weights, whatever the recipe says of the Latin file and of the written rows' weight."""
    train_module = importlib.import_module("extproc.tools.attack_training.train")  # the package exports `train()`
    seen: list[bool] = []
    real = train_module._training_set

    def spy(corpus_dir: Path, cfg: Any, say: Any) -> Any:
        seen.append(cfg.written_latin or cfg.written_scale != 1.0)
        return real(corpus_dir, cfg, say)

    monkeypatch.setattr(train_module, "_training_set", spy)
    corpus = write_corpus(tmp_path / "corpus", synthetic_rows())
    recipe = dataclasses.replace(TINY, written_harmful=True, written_latin=True, written_scale=0.25)
    train_module.fit_script_lexical(corpus, recipe, "harmful", lambda _: None)
    assert seen == [False]
