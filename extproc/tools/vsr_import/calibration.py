"""Embedding thresholds re-derived for our encoder from the recipe's own material.

VSR tunes an embedding rule's `threshold` to its own encoder; MiniLM's cosines sit on another
scale (a paraphrase that VSR scores 0.85 may score 0.6 here), so a threshold copied as written
matches nothing. For each imported `semantic` signal the calibration embeds its candidates and
every other text the recipe holds (the other rules' candidates, complexity and knowledge-base
exemplars): a candidate's similarity to the rest of its own set (leave one out) stands for a
request the rule should take, another rule's text's similarity to the set for one it should not.
The threshold that best separates the two (balanced accuracy, the middle of the best stretch),
raised where needed so that at most a twentieth of the other texts pass it, replaces VSR's. No
probe is read: only the recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.tools.vsr_import.report import ImportResult, ReportItem

NEGATIVE_QUANTILE = 0.95

Embed = Callable[[Sequence[str]], npt.NDArray[np.float32]]


def _texts_of(spec: dict[str, Any]) -> list[str]:
    """All exemplar texts a signal spec carries (semantic, complexity, kb)."""
    out: list[str] = []
    for key in ("exemplars", "labels"):
        for texts in (spec.get(key) or {}).values():
            out += [str(t) for t in texts]
    for key in ("hard", "easy"):
        out += [str(t) for t in spec.get(key) or []]
    return out


def best_threshold(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """The cut that best separates `positives` (at or above) from `negatives` (below)."""
    pos = np.asarray(positives, dtype=np.float64)
    neg = np.asarray(negatives, dtype=np.float64)
    values = np.unique(np.concatenate([pos, neg]))
    cuts = np.concatenate([[values[0] - 1e-6], (values[:-1] + values[1:]) / 2.0, [values[-1] + 1e-6]])
    scores = np.array([((pos >= c).mean() + (neg < c).mean()) / 2.0 for c in cuts])
    best = np.flatnonzero(scores >= scores.max() - 1e-12)
    # the middle of the best stretch: as far from both sides as the material allows
    return float((cuts[best[0]] + cuts[best[-1]]) / 2.0)


def calibrate(result: ImportResult, embed: Embed) -> None:
    signals: list[dict[str, Any]] = result.policy.get("signals", [])
    semantic = [s for s in signals if s.get("type") == "semantic" and len(_texts_of(s)) >= 2]
    if not semantic:
        return
    owners: list[tuple[str, str]] = [(s["name"], t) for s in signals for t in _texts_of(s)]
    unique = list(dict.fromkeys(t for _, t in owners))
    try:
        vectors = embed(unique)
    except Exception as exc:  # no encoder here: VSR's thresholds stay, and the report says so
        result.items.append(
            ReportItem("embedding thresholds", "(calibration)", "approximated", f"not calibrated: {exc}")
        )
        return
    row = {t: i for i, t in enumerate(unique)}
    for spec in semantic:
        own = list(dict.fromkeys(_texts_of(spec)))
        others = list(dict.fromkeys(t for name, t in owners if name != spec["name"] and t not in own))
        if not others:
            continue
        mine = vectors[[row[t] for t in own]]
        sims = mine @ mine.T
        np.fill_diagonal(sims, -1.0)
        positives = sims.max(axis=1).tolist()
        negatives = (vectors[[row[t] for t in others]] @ mine.T).max(axis=1).tolist()
        # A rule with few, varied candidates has low leave-one-out similarities, and the best cut then
        # falls below most of the recipe's other texts: the rule would take their requests too. So the
        # threshold is at least the similarity that all but a twentieth of the other texts stay under
        # (a tenth left MiniLM's cuts low enough for a rule to take other topics' requests: balance's
        # stem and code-general rules took cooking, appliance and procrastination questions).
        floor = float(np.quantile(negatives, NEGATIVE_QUANTILE))
        threshold = round(max(best_threshold(positives, negatives), floor), 3)
        before = spec.get("threshold")
        spec["threshold"] = threshold
        if isinstance(before, int | float) and 0.0 < float(before) < 1.0:
            _rescale_inputs(signals, spec["name"], threshold, float(before))
        result.items.append(
            ReportItem(
                f"embedding threshold {spec['name']}",
                "(calibration)",
                "approximated",
                f"VSR's {before} (its encoder) calibrated to {threshold} for MiniLM from the recipe's own texts: "
                f"{len(own)} candidates (leave-one-out similarity median {np.median(positives):.2f}) against "
                f"{len(others)} other texts of the recipe (median {np.median(negatives):.2f})",
            )
        )


def _rescale_inputs(signals: list[dict[str, Any]], name: str, ours: float, theirs: float) -> None:
    """Scores reading this signal's similarity get it on VSR's scale: our threshold maps to VSR's."""
    for spec in signals:
        for term in [*spec.get("inputs", []), *spec.get("members", [])]:
            if term.get("signal") == name and term.get("value") in ("confidence", "score"):
                term["rescale"] = [ours, theirs]
