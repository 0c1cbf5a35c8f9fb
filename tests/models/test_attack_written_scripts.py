"""The harmful requests and benign twins written for the other scripts' stage
(`harmful_written_scripts.jsonl`, issue 48 sixth pass): zh ja ko ru ar hi, at least as many benign
rows as harmful in each language, none in Latin script, kept off every evaluation set, read by the
other scripts' stage only (the base outputs and the Latin path never see them)."""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path

from extproc.models.attack_classifier import mostly_latin
from extproc.tools.attack_training.corpus import (
    HELP_SCRIPTS_FILE,
    WRITTEN_HARMFUL,
    WRITTEN_HARMFUL_FILE,
    WRITTEN_SCRIPTS_FILE,
    WRITTEN_TWIN,
    everyday_evaluation_texts,
    load_corpus,
)
from extproc.tools.near_repeats import near_any, near_any_chars
from tests.models.test_attack_classifier import TINY, synthetic_rows, write_corpus

REPO = Path(__file__).resolve().parents[2]
SAFETY_CORPUS = REPO.parent.parent / "shared" / "data" / "safety"
LANGS = {"zh", "ja", "ko", "ru", "ar", "hi"}


def _rows(path: Path = WRITTEN_SCRIPTS_FILE) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_each_script_has_harmful_rows_and_at_least_as_many_benign_twins() -> None:
    rows = _rows()
    harmful = collections.Counter(r["lang"] for r in rows if r["label"] == "harmful")
    benign = collections.Counter(r["lang"] for r in rows if r["label"] == "benign")
    assert set(harmful) == set(benign) == LANGS
    assert all(harmful[lang] >= 12 and benign[lang] >= harmful[lang] for lang in LANGS)
    assert harmful["zh"] >= 40  # the test split's missed harmful rows are Chinese
    assert not any(mostly_latin(r["text"]) for r in rows)
    assert {r["label"] for r in rows} == {"harmful", "benign"} and all(r["topic"] for r in rows)
    # No row repeats another, nor a row of the older written files in other scripts.
    older = {r["text"] for path in (WRITTEN_HARMFUL_FILE, HELP_SCRIPTS_FILE) for r in _rows(path)}
    texts = [r["text"] for r in rows]
    assert len(set(texts)) == len(texts) and not older & set(texts)


def test_the_rows_stay_off_every_evaluation_set() -> None:
    """No row shares a third of its word 3-grams or half of its character 5-grams with a text of any
    bench/data set (dev sets and the held-out multilingual set included) or of the test split."""
    held_out = everyday_evaluation_texts()
    for data_file in sorted((REPO / "bench" / "data").glob("*.jsonl")):
        held_out += [str(r["text"]) for r in _rows(data_file) if "text" in r]
    if (SAFETY_CORPUS / "test.jsonl").is_file():
        held_out += [r.text for r in load_corpus(SAFETY_CORPUS, "test")]
    words, chars = near_any(held_out, jaccard=0.33), near_any_chars(held_out, jaccard=0.5)
    assert [r["text"] for r in _rows() if words(r["text"]) or chars(r["text"])] == []


def test_only_the_script_stage_reads_the_rows(tmp_path: Path) -> None:
    from extproc.tools.attack_training.train import _training_set, rows_for

    corpus = write_corpus(tmp_path / "corpus", synthetic_rows())
    recipe = dataclasses.replace(TINY, written_harmful=True, written_latin=True, written_scripts=True)
    mine = {r["text"]: r["label"] for r in _rows()}
    base = _training_set(corpus, recipe, lambda _: None)
    assert not mine.keys() & {r.text for r in base.rows}
    stage = _training_set(corpus, dataclasses.replace(recipe, written_latin=False), lambda _: None, script_stage=True)
    at = [i for i, r in enumerate(stage.rows) if r.text in mine]
    assert len(at) == len(mine)
    assert all(
        stage.rows[i].category == (WRITTEN_HARMFUL if mine[stage.rows[i].text] == "harmful" else WRITTEN_TWIN)
        for i in at
    )
    used, positive = rows_for(stage, "harmful")
    assert used[at].all() and [bool(positive[i]) for i in at] == [mine[stage.rows[i].text] == "harmful" for i in at]
    # Off, the stage's rows are those it had before, in the same order and folds.
    off = _training_set(
        corpus,
        dataclasses.replace(recipe, written_latin=False, written_scripts=False),
        lambda _: None,
        script_stage=True,
    )
    assert stage.texts[: len(off.texts)] == off.texts and (stage.folds[: len(off.texts)] == off.folds).all()
    assert not mine.keys() & set(off.texts)
