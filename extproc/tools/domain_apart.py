"""Training rows kept apart, by meaning, from the subject classifier's evaluation sets (issue 44).

Word-overlap screens (3-gram Jaccard) miss a reworded copy of an evaluation question, and a
training row that says the same thing in other words makes the written-set figures optimistic.
This screen reads MiniLM (all-MiniLM-L6-v2, the served encoder) cosines instead: a training row
at or above `APART_COSINE` to any evaluation text is too close. MiniLM was trained on English
and puts every Chinese, Japanese or Korean text near every other ("what is diminishing marginal utility?" and
"can I take ibuprofen for a cold?" in Chinese at 0.999), so texts mostly in those scripts are
compared by character bigrams instead (Jaccard >= `CJK_JACCARD`). Training (`domain_training.py`)
never reads this module; `bench/experiments/domain_clean_rows.py` used it to clean the written
training files, and `tests/models/test_domain_apart.py` keeps them clean.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

# The cosine at which a training row counts as a copy of an evaluation text. On the written rows
# (2026-12-07, bench/experiments/domain_clean_rows.log) the pairs from 0.84 up were the same
# question reworded (0.95-1.0: "Which vitamin deficiency causes scurvy?") or the same problem with
# other numbers or framing (0.84-0.9: two buffers of acetic acid, two deadlock definitions).
APART_COSINE = 0.85
# Rows were dropped from this cosine up, so an encoder within 1e-3 of the one that screened them
# (ONNX against torch, batched against one text a pass) cannot move a kept row over APART_COSINE.
DROP_COSINE = 0.84

# Character-bigram Jaccard at which two CJK texts count as copies ("什么是功利主义？" and
# "什么是存在主义？", two questions, share 0.33).
CJK_JACCARD = 0.5

REPO = Path(__file__).resolve().parents[2]
WRITTEN_SETS = ("domain_everyday.jsonl", "domain_exam.jsonl", "domain_unseen.jsonl")
# Other evaluation sets whose texts carry a subject or a route (read as text only).
OTHER_SETS = ("routing_eval.jsonl",)

Embed = Callable[[Sequence[str]], npt.ArrayLike]


@dataclass(frozen=True, slots=True)
class Near:
    """A training text too close to an evaluation text."""

    train: int  # index in the training texts
    evaluation: int  # index in the evaluation texts
    cosine: float


def evaluation_files(data_dir: Path | None) -> list[Path]:
    """Every evaluation file of the subject classifier that exists here: the written sets, the
    routing set, and the corpus's test split (where `data_dir` holds one)."""
    bench = REPO / "bench" / "data"
    files = [bench / name for name in (*WRITTEN_SETS, *OTHER_SETS)]
    files += sorted(p for p in bench.glob("domain_*.jsonl") if p not in files)
    if data_dir is not None:
        files.append(data_dir / "test.jsonl")
    return [p for p in files if p.is_file()]


def unit_rows(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {v.shape}")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.asarray(v / np.maximum(norms, 1e-12), dtype=np.float32)


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return 0x3040 <= o <= 0x30FF or 0x3400 <= o <= 0x9FFF or 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF


def mostly_cjk(text: str) -> bool:
    """Whether most of the text's letters are Chinese, Japanese or Korean (MiniLM cannot read them)."""
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and 2 * sum(_is_cjk(c) for c in letters) > len(letters)


def _bigrams(text: str) -> set[str]:
    s = "".join(text.lower().split())
    return {s[i : i + 2] for i in range(len(s) - 1)}


def too_close(
    train_texts: Sequence[str],
    train: npt.ArrayLike,
    eval_texts: Sequence[str],
    evaluation: npt.ArrayLike,
    threshold: float = APART_COSINE,
    chunk: int = 2048,
) -> list[Near]:
    """Each training text too close to an evaluation text, with the nearest one: MiniLM cosine >=
    `threshold` where neither text is mostly CJK (`cosine` is then the cosine), character-bigram
    Jaccard >= `CJK_JACCARD` where both are (`cosine` is then the Jaccard). The vectors are the
    texts' MiniLM embeddings, row for row; the cosines go in chunks (a test split's full matrix is
    ~100 MB)."""
    t, e = unit_rows(train), unit_rows(evaluation)
    if t.shape[0] != len(train_texts) or e.shape[0] != len(eval_texts):
        raise ValueError("one vector per text is needed")
    if t.shape[0] == 0 or e.shape[0] == 0:
        return []
    if t.shape[1] != e.shape[1]:
        raise ValueError(f"vector widths differ: {t.shape[1]} and {e.shape[1]}")
    t_cjk = np.array([mostly_cjk(x) for x in train_texts])
    e_cjk = np.array([mostly_cjk(x) for x in eval_texts])
    e_read = np.flatnonzero(~e_cjk)
    found: list[Near] = []
    if e_read.size:
        for start in range(0, t.shape[0], chunk):
            sims = t[start : start + chunk] @ e[e_read].T
            best = sims.argmax(axis=1)
            top = sims[np.arange(sims.shape[0]), best]
            hits = np.flatnonzero((top >= threshold) & ~t_cjk[start : start + chunk])
            found += [Near(start + int(i), int(e_read[best[i]]), float(top[i])) for i in hits]
    cjk_eval = [(int(j), _bigrams(eval_texts[int(j)])) for j in np.flatnonzero(e_cjk)]
    for i in np.flatnonzero(t_cjk):
        grams = _bigrams(train_texts[int(i)])
        scored = [(len(grams & g) / max(1, len(grams | g)), j) for j, g in cjk_eval]
        if scored and (best_pair := max(scored))[0] >= CJK_JACCARD:
            found.append(Near(int(i), best_pair[1], float(best_pair[0])))
    return sorted(found, key=lambda n: n.train)
