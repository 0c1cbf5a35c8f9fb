"""The harmful requests and look-alikes written for the harmful output's Latin path
(`harmful_written_latin.jsonl`) and the benign requests in the same frames (`benign_frames_latin.jsonl`):
rows of the harmful output only, in many Latin-script languages, kept off every evaluation set, and
never read by the other scripts' stage; the benign help-seeking rows in other scripts
(`benign_help_scripts.jsonl`): that stage's rows only."""

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
    FRAMES_LATIN_FILE,
    HELP_SCRIPTS_FILE,
    WRITTEN_HARMFUL,
    WRITTEN_LATIN_FILE,
    WRITTEN_TWIN,
    everyday_evaluation_texts,
    load_corpus,
)
from extproc.tools.near_repeats import near_any, near_any_chars
from tests.models.test_attack_classifier import TINY, synthetic_rows, write_corpus

SAFETY_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "safety"
LATIN_LANGS = {"es", "fr", "de", "pt", "it", "nl", "pl", "tr", "vi", "id", "ro", "sv"}


def _file_rows(path: Path = WRITTEN_LATIN_FILE) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


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


@pytest.mark.parametrize("path", [FRAMES_LATIN_FILE, HELP_SCRIPTS_FILE], ids=lambda p: p.stem)
def test_the_benign_rows_stay_off_every_evaluation_set(path: Path) -> None:
    """The benign frame and help rows, screened harder than the Latin file's: no row shares a third
    of its word 3-grams or half of its character 5-grams with a text of any bench/data set (dev
    sets included) or of the test split where it is present."""
    held_out = everyday_evaluation_texts()
    for data_file in sorted((Path(__file__).resolve().parents[2] / "bench" / "data").glob("*.jsonl")):
        held_out += [str(r["text"]) for r in _file_rows(data_file) if "text" in r]
    if (SAFETY_CORPUS / "test.jsonl").is_file():
        held_out += [r.text for r in load_corpus(SAFETY_CORPUS, "test")]
    words, chars = near_any(held_out, jaccard=0.33), near_any_chars(held_out, jaccard=0.5)
    assert [r["text"] for r in _file_rows(path) if words(r["text"]) or chars(r["text"])] == []


def test_the_frame_rows_match_the_harmful_rows_language_by_language() -> None:
    """As many benign requests in each language as harmful written ones, all benign, all Latin, on
    everyday topics; the help-seeking rows are benign and in other scripts only."""
    harmful = collections.Counter(r["lang"] for r in _file_rows() if r["label"] == "harmful")
    frames = _file_rows(FRAMES_LATIN_FILE)
    benign = collections.Counter(r["lang"] for r in frames)
    assert set(benign) == set(harmful) == LATIN_LANGS | {"en"}
    assert all(benign[lang] >= harmful[lang] for lang in harmful)
    assert {r["label"] for r in frames} == {"benign"} and all(mostly_latin(r["text"]) for r in frames)
    assert {r["topic"] for r in frames} == {
        "cooking",
        "travel",
        "work",
        "code",
        "health",
        "money",
        "school",
        "household",
        "hobbies",
    }
    help_rows = _file_rows(HELP_SCRIPTS_FILE)
    assert {r["label"] for r in help_rows} == {"benign"} and not any(mostly_latin(r["text"]) for r in help_rows)
    assert {r["lang"] for r in help_rows} >= {"hi", "zh", "ja", "ko", "ru", "ar"}
    texts = [" ".join(r["text"].lower().split()) for r in frames + help_rows + _file_rows()]
    assert len(set(texts)) == len(texts)


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

    def spy(corpus_dir: Path, cfg: Any, say: Any, **kw: Any) -> Any:
        seen.append(cfg.written_latin or cfg.written_frames or cfg.written_scale != 1.0)
        return real(corpus_dir, cfg, say, **kw)

    monkeypatch.setattr(train_module, "_training_set", spy)
    corpus = write_corpus(tmp_path / "corpus", synthetic_rows())
    recipe = dataclasses.replace(
        TINY, written_harmful=True, written_latin=True, written_frames=True, written_scale=0.25
    )
    train_module.fit_script_lexical(corpus, recipe, "harmful", lambda _: None)
    assert seen == [False]


def test_the_frame_rows_train_the_harmful_output_and_the_help_rows_the_script_stage(tmp_path: Path) -> None:
    from extproc.tools.attack_training.train import _training_set, rows_for

    corpus = write_corpus(tmp_path / "corpus", synthetic_rows())
    recipe = dataclasses.replace(
        TINY, written_harmful=True, written_latin=True, written_frames=True, written_help_scripts=True
    )
    data = _training_set(corpus, recipe, lambda _: None)
    frames = {r["text"] for r in _file_rows(FRAMES_LATIN_FILE)}
    helps = {r["text"] for r in _file_rows(HELP_SCRIPTS_FILE)}
    mine = [i for i, r in enumerate(data.rows) if r.text in frames]
    assert len(mine) == len(frames) and not any(r.text in helps for r in data.rows)
    assert {data.rows[i].category for i in mine} == {WRITTEN_TWIN}
    attack_used, _ = rows_for(data, "attack")
    harmful_used, positive = rows_for(data, "harmful")
    assert not attack_used[mine].any() and harmful_used[mine].all() and not positive[mine].any()
    # The other scripts' stage reads the help rows, and no frame row.
    stage = _training_set(
        corpus,
        dataclasses.replace(recipe, written_latin=False, written_frames=False),
        lambda _: None,
        script_stage=True,
    )
    assert helps <= {r.text for r in stage.rows} and not frames & {r.text for r in stage.rows}
