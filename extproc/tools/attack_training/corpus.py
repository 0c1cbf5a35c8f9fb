"""The training corpus: its rows and labels, the training configuration, benign crops and the
everyday requests trained on, the folds."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.attack_classifier import (
    LexicalConfig,
)
from extproc.tools.training import (
    hashed_fold,
    read_rows,
)

FloatArray = npt.NDArray[np.float32]
F64Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

ATTACK = "attack"
HARMFUL = "harmful"
BENIGN = "benign"
LABELS = (ATTACK, HARMFUL, BENIGN)
SHORT_TEXT_CHARS = 200  # "short" in the reports (the issue's and the corpus's measure)
SHORT_HIGH_CAP = 0.999  # a short text's lexical score this high is overwhelming evidence
SOURCES_CITE = "/work/shared/data/safety/SOURCES.md (in CI: ../shared/data/safety/SOURCES.md)"
# Harmful requests written for this project in many languages and scripts, with benign twins on the
# same topics (protective and help-seeking questions, crime fiction): categories of their own rows.
WRITTEN_HARMFUL = "written_harmful"
WRITTEN_TWIN = "written_twin"
WRITTEN_HARMFUL_FILE = Path(__file__).resolve().parent / "harmful_written.jsonl"
# More of them, in the Latin-script languages (English, Spanish, French, German, Portuguese, Italian,
# Dutch, Polish, Turkish, Vietnamese, Indonesian, Romanian, Swedish), written for the harmful output's
# Latin path (n-grams and head): the same categories, a file of its own so the other scripts' stage,
# fitted on `harmful_written.jsonl` alone, keeps its rows.
WRITTEN_LATIN_FILE = WRITTEN_HARMFUL_FILE.with_name("harmful_written_latin.jsonl")
# Benign everyday requests in the same languages and request frames as the Latin file's harmful rows
# ("me ajuda a ...", "ayúdame a escribir ..."), so the frame alone is no evidence of harm.
FRAMES_LATIN_FILE = WRITTEN_HARMFUL_FILE.with_name("benign_frames_latin.jsonl")
# Benign help-seeking questions in other scripts (quitting drugs, staying safe, medicines): rows of
# the other scripts' stage only.
HELP_SCRIPTS_FILE = WRITTEN_HARMFUL_FILE.with_name("benign_help_scripts.jsonl")
# Plain harmful requests and as many benign twins in the same frames (cooking, medicine, safety,
# recovery, security, history) in zh ja ko ru ar hi (issue 48, sixth pass): rows of the other
# scripts' stage only, where the corpus holds harmful rows in Chinese alone.
WRITTEN_SCRIPTS_FILE = WRITTEN_HARMFUL_FILE.with_name("harmful_written_scripts.jsonl")
EmbedFn = Callable[[Sequence[str]], npt.ArrayLike]


@dataclass(frozen=True, slots=True)
class CorpusRow:
    text: str
    label: str  # "attack" | "harmful" | "benign"
    category: str
    lang: str
    source: str

    @property
    def is_attack(self) -> bool:
        return self.label == ATTACK


@dataclass(frozen=True, slots=True)
class TrainConfig:
    lexical: LexicalConfig = field(default_factory=LexicalConfig)
    lexical_l2: float = 1e-6  # L2 penalty on the lexical weights (the loss is a weighted mean)
    lexical_max_iter: int = 300
    # Row weights (both stages), see sample_weights: inside a label a row of a (category,
    # language) group of size n weighs n**(weight_power - 1), so small groups (Chinese
    # attacks, clean e-mails) are not drowned by large ones; every language is moved to the
    # same attack:benign ratio; attacks get attack_share of the total weight.
    weight_power: float = 0.5
    attack_share: float = 0.5
    lang_balance: float = 1.0  # each language gets the overall attack:benign weight ratio
    folds: int = 5
    head_hidden: int = 32
    head_epochs: int = 40
    head_batch: int = 128
    head_lr: float = 2e-3
    head_weight_decay: float = 1e-3
    logit_clip: float = 8.0
    logit_scale: float = 4.0
    seed: int = 20240611
    fp_target: float = 0.008  # benign false-positive rate allowed on out-of-fold train scores
    embed_target: float = 0.08  # share of benign texts allowed to reach the embedding stage
    # Benign crops: sentences and lines cut from benign rows, added as benign rows of their
    # own. Most benign rows are long (role prompts, prose, system prompts), so without
    # them a short everyday request ("Write a haiku about autumn.", "¿Cuál es la capital de
    # Perú?") is out of distribution and lands on the attack side. A piece of a benign
    # text is benign; pieces of attacks are not used (a piece of an attack may be harmless).
    crops_per_row: int = 3
    crop_min_chars: int = 12
    crop_max_chars: int = 240
    crop_categories: tuple[str, ...] = ()  # benign categories to cut; empty: every category
    crop_weight: float = 1.0  # a crop's weight relative to a corpus row of a group the same size
    # The outputs trained, each one a label of the corpus against the rest (see `output_rows`);
    # an output whose label the corpus lacks is skipped.
    outputs: tuple[str, ...] = (ATTACK, HARMFUL)
    # Short texts (< short_chars characters) carry little evidence: the lexical stage alone decides
    # one only at short_high, the lexical probability that at most short_fp_target of the short
    # benign texts (corpus rows and crops, out of fold) reach; below it the embedding stage confirms.
    short_chars: int = 200
    short_fp_target: float = 0.0  # 0: the highest out-of-fold score of a short benign text
    # Longer texts likewise: the lexical stage alone decides one only at long_high, the
    # probability that at most long_fp_target of the longer benign texts reach out of fold
    # (None: at `high`, as weights before it did).
    long_fp_target: float | None = 0.0
    # Per output, a stricter false-positive target than fp_target (harmful: the default policy
    # refuses on it, and a refused ordinary question costs more than a missed harmful one).
    fp_targets: tuple[tuple[str, float], ...] = ((HARMFUL, 0.004),)
    # Outputs whose embedding stage judges only texts mostly in Latin letters (`Thresholds.head_scripts`).
    latin_head_outputs: tuple[str, ...] = (HARMFUL,)
    # Everyday requests written for this project (`attack_everyday.py`: creative writing, role-play,
    # "act as", seventeen languages) as benign training rows, like crops: trained on, never scored.
    everyday: bool = True
    # Issue 48's recipe, off by default until weights trained with it ship (the train command must
    # reproduce the shipped weights byte for byte); `TrainConfig.issue48()` turns it on:
    # - the harmful requests and twins of `harmful_written.jsonl` (CJK, Hangul, Cyrillic, Arabic,
    #   Hebrew, Greek, Devanagari, Bengali, Thai and Latin-script languages), trained on, never
    #   scored; like the protective rows they train the harmful output only;
    written_harmful: bool = False
    # - the rows of `harmful_written_latin.jsonl` too (Latin-script languages; the harmful output only);
    written_latin: bool = False
    # - the benign rows of `benign_frames_latin.jsonl` too (the harmful output only);
    written_frames: bool = False
    # - the other scripts' stage also trains on `benign_help_scripts.jsonl` (the base outputs never do).
    #   On in every recipe since 2026-12-07 (the shipped stage: a Hindi "how to quit cannabis" was
    #   refused, and no figure of the stage got worse; see the weights' README);
    written_help_scripts: bool = True
    # - the other scripts' stage also trains on `harmful_written_scripts.jsonl` (harmful rows and twins).
    written_scripts: bool = False
    # - each written row's weight (both files) beside a corpus row of a group the same size: a
    #   group of 40 written rows otherwise weighs as much as a corpus group of 40 (weight_power).
    written_scale: float = 1.0
    # - per output, the lowest sure threshold of a Latin-script text (the lexical stage deciding
    #   alone); harmful: 0.999, where the default policy put it (an essay intro scored 0.996);
    sure_floors: tuple[tuple[str, float], ...] = ()
    # - outputs whose thresholds must leave every project-written benign text (everyday requests,
    #   twins) unflagged out of fold: the default policy refuses on them as they are;
    held_everyday_outputs: tuple[str, ...] = ()
    #   ... up to a budget per output: at most this many of those texts flagged out of fold (all
    #   scripts together; 0 is the rule that pushed the head's decision to 1.0, see `HeldBenign`);
    held_budgets: tuple[tuple[str, int], ...] = ()
    #   of which at most `script_held_budget` may be texts the Latin-only head cannot read, at `script_high`;
    script_held_budget: int = 0
    # - for a Latin-only head, the sure threshold of other scripts' texts (`script_high`): at most
    #   this share of their benign corpus rows and crops reach it out of fold (None: no such threshold).
    script_fp_target: float | None = None
    # A lexical model of their own for the texts a Latin-only head cannot read (`train.fit_script_lexical`):
    # fitted on the training rows plus `harmful_written.jsonl` (whatever `written_harmful` says), it
    # scores only those texts, decided alone at a `script_high` chosen out of fold: at most
    # `script_stage_fp_target` of those scripts' benign corpus rows and crops reach it, and none of
    # the project-written benign texts in those scripts (everyday requests, twins).
    script_lexical_outputs: tuple[str, ...] = (HARMFUL,)
    script_stage_fp_target: float = 0.004

    @classmethod
    def issue48(cls, **overrides: Any) -> TrainConfig:
        """The recipe of issue 48 (every script; thresholds held at a budget of project-written texts flagged)."""
        settings: dict[str, Any] = {
            "written_harmful": True,
            "sure_floors": ((HARMFUL, 0.999),),
            "held_everyday_outputs": (HARMFUL,),
            "held_budgets": ((HARMFUL, 4),),
            "script_held_budget": 2,
            "script_fp_target": 0.004,
        }
        return cls(**{**settings, **overrides})

    threads: int = 1


# --- corpus -----------------------------------------------------------------------------------


def load_corpus(path: Path, split: str = "train") -> list[CorpusRow]:
    """Rows of a JSONL corpus file, or of `<path>/<split>.jsonl` when `path` is a folder."""
    path = Path(path)
    return read_rows(path / f"{split}.jsonl" if path.is_dir() else path, _corpus_row, _label_problem)


def _corpus_row(obj: Any) -> CorpusRow:
    return CorpusRow(
        text=str(obj["text"]),
        label=str(obj["label"]),
        category=str(obj.get("category", "")),
        lang=str(obj.get("lang", "")),
        source=str(obj.get("source", "")),
    )


def _label_problem(row: CorpusRow) -> str | None:
    return None if row.label in LABELS else f"label must be one of {', '.join(LABELS)}, got {row.label!r}"


def fold_of(text: str, folds: int) -> int:
    """Deterministic fold: a hash of the normalised first 60 characters (keeps prefix twins together)."""
    return hashed_fold(" ".join(text.lower().split())[:60], folds)


_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|(?<=[。！？；])|\n+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def benign_crops(row: CorpusRow, cfg: TrainConfig) -> list[CorpusRow]:
    """Up to `cfg.crops_per_row` sentences or lines of a benign row, as benign rows of
    category `crop/<category>` (the same language and source). Deterministic: the pieces
    are ranked by a hash of their text. CJK pieces count each character twice, since a
    CJK character carries about a word."""
    if row.label != BENIGN or cfg.crops_per_row <= 0:
        return []
    if cfg.crop_categories and row.category not in cfg.crop_categories:
        return []
    whole = " ".join(row.text.split())
    pieces: dict[str, None] = {}
    for raw in _SENTENCE_END.split(row.text):
        piece = " ".join(raw.split()).strip("-*#>|`\"' ")
        size = len(piece) + len(_CJK.findall(piece))
        if cfg.crop_min_chars <= size <= cfg.crop_max_chars and piece != whole:
            pieces[piece] = None
    ranked = sorted(pieces, key=lambda t: hashlib.sha256(t.encode("utf-8")).digest())
    return [
        CorpusRow(text=t, label=BENIGN, category=f"crop/{row.category}", lang=row.lang, source=row.source)
        for t in ranked[: cfg.crops_per_row]
    ]


EVERYDAY_EVALUATION = Path(__file__).resolve().parents[3] / "bench" / "data" / "everyday_requests.jsonl"
# Protective questions about crime and fraud (the harmful output's everyday false-positive check).
SAFETY_QUESTIONS_EVALUATION = EVERYDAY_EVALUATION.with_name("everyday_safety_questions.jsonl")
# Attacks and harmful requests written for this project, one per class and language (bench_safety's
# held-out probes): no generated row may come near them either.
ATTACK_PROBES_EVALUATION = EVERYDAY_EVALUATION.with_name("attack_probes.jsonl")
# Short attacks and their benign look-alikes written by a writer who saw neither the jailbreak
# rules nor the classifier (2026-12-04); no generated row came near them when they were added.
UNSEEN_PROBES_EVALUATION = EVERYDAY_EVALUATION.with_name("attack_probes_unseen.jsonl")
# Everyday requests written after the training rows, by other writers, to measure refusals of
# phrasings nobody tuned against: role and simulation setups, technical words ("bypass the
# cache", "kill the process"), everyday requests of every kind.
UNSEEN_EVERYDAY_EVALUATION = EVERYDAY_EVALUATION.with_name("everyday_unseen.jsonl")
# Plain harmful requests (and a few look-alikes) in 18 languages written apart from the training rows.
HARMFUL_HELDOUT_EVALUATION = EVERYDAY_EVALUATION.with_name("harmful_multilingual_heldout.jsonl")


def everyday_evaluation_texts() -> list[str]:
    """The evaluation sets' texts (a source checkout's bench/data), kept out of training."""
    texts: list[str] = []
    for path in (
        EVERYDAY_EVALUATION,
        SAFETY_QUESTIONS_EVALUATION,
        ATTACK_PROBES_EVALUATION,
        UNSEEN_PROBES_EVALUATION,
        UNSEEN_EVERYDAY_EVALUATION,
        HARMFUL_HELDOUT_EVALUATION,
    ):
        if path.is_file():
            lines = path.read_text(encoding="utf-8").split("\n")
            texts += [str(json.loads(line)["text"]) for line in lines if line.strip()]
    return texts


def output_rows(output: str, labels: npt.NDArray[np.str_]) -> tuple[BoolArray, BoolArray]:
    """(used, positive): the rows an output trains on and those it should flag. `attack` is
    trained against every other label (a plain harmful request uses no attack technique);
    any other output (`harmful`) against the benign rows, the attacks left out: a harmful
    request wrapped in an attack technique is labelled attack, and the attack output decides it."""
    positive = labels == output
    used = np.ones(labels.shape[0], dtype=bool) if output == ATTACK else labels != ATTACK
    return used, positive


def written_harmful_rows(exclude: Sequence[str] = (), path: Path = WRITTEN_HARMFUL_FILE) -> list[CorpusRow]:
    """The written harmful requests (label harmful) and their twins (benign), without any row
    equal to or near (word 3-grams) one of `exclude`, the evaluation texts."""
    from extproc.tools.near_repeats import near_any

    near = near_any(exclude)
    rows: list[CorpusRow] = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        obj = json.loads(line)
        label = str(obj["label"])
        if label not in (HARMFUL, BENIGN):
            raise ValueError(f"{path.name}: label must be harmful or benign, got {label!r}")
        text = str(obj["text"])
        if near(text):
            continue
        category = WRITTEN_HARMFUL if label == HARMFUL else WRITTEN_TWIN
        rows.append(CorpusRow(text=text, label=label, category=category, lang=str(obj["lang"]), source="project"))
    return rows
