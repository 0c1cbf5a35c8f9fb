"""Embedding thresholds calibrated from a recipe's own texts (no probe read)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from extproc.tools.vsr_import.calibration import best_threshold, calibrate
from extproc.tools.vsr_import.report import ImportResult


def unit(*xs: float) -> npt.NDArray[np.float32]:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def calibrated(vectors: dict[str, npt.NDArray[np.float32]], own: list[str], others: list[str]) -> float:
    def embed(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([vectors[t] for t in texts])

    signals: list[dict[str, Any]] = [
        {"name": "rule", "type": "semantic", "exemplars": {"rule": own}, "threshold": 0.8},
        {"name": "other", "type": "semantic", "exemplars": {"other": others}, "threshold": 0.8},
    ]
    result = ImportResult({"signals": signals}, [], "current")
    calibrate(result, embed)
    return float(signals[0]["threshold"])


def test_the_best_cut_separates_positives_from_negatives() -> None:
    assert 0.5 < best_threshold([0.8, 0.9], [0.1, 0.2, 0.5]) < 0.8


def test_varied_candidates_do_not_get_a_threshold_most_other_texts_pass() -> None:
    # three candidates far apart (leave-one-out similarity about 0) and ten other texts that sit
    # between them (similarity about 0.5 to the nearest candidate): the balanced-accuracy cut
    # would fall near 0, under every other text; the floor keeps nine in ten of them out.
    own = {"a": unit(1, 0, 0, 0), "b": unit(0, 1, 0, 0), "c": unit(0, 0, 1, 0)}
    rng = np.random.default_rng(7)
    others = {f"o{i}": unit(1, float(rng.uniform(0.2, 1.6)), 0, 1.2) for i in range(10)}
    threshold = calibrated({**own, **others}, list(own), list(others))
    sims = sorted(float(max(v @ w for w in own.values())) for v in others.values())
    assert threshold >= float(np.quantile(sims, 0.9)) - 1e-3
    assert sum(s >= threshold for s in sims) <= 1


def test_well_separated_candidates_keep_the_best_cut() -> None:
    own = {"a": unit(1, 0.1, 0), "b": unit(1, 0, 0.1), "c": unit(1, 0.05, 0.05)}
    others = {f"o{i}": unit(0.1 * i, 1, 0) for i in range(5)}
    threshold = calibrated({**own, **others}, list(own), list(others))
    assert threshold == pytest.approx(
        round(best_threshold([0.99] * 3, [float(max(v @ w for w in own.values())) for v in others.values()]), 3),
        abs=0.02,
    )
