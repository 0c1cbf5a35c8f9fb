"""Probe harness arithmetic on controlled scores, and probe file validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from extproc.tools.image_labels_probe import Probe, ProbeError, ProbeReport, rank_rows

LABELS = ["passport", "id_card", "xray", "car"]
VERTICAL = {"passport": "identity", "id_card": "identity", "xray": "medical", "car": "everyday"}


def test_accuracy_and_inversion_rate() -> None:
    probs = np.array(
        [
            [0.90, 0.20, 0.10, 0.05],  # passport: right, 0 inversions
            [0.50, 0.40, 0.10, 0.05],  # id_card expected: passport above it -> rank 2, 1 inversion
            [0.30, 0.30, 0.30, 0.60],  # xray expected: car above, passport and id_card tie -> 3 inversions
        ]
    )
    rows = rank_rows(["a.png", "b.png", "c.png"], ["passport", "id_card", "xray"], LABELS, probs)
    assert [(r.top, r.rank, r.inversions) for r in rows] == [("passport", 1, 0), ("passport", 2, 1), ("car", 4, 3)]
    report = ProbeReport(LABELS, VERTICAL, rows)
    assert report.top1_accuracy == pytest.approx(1 / 3)
    assert report.vertical_accuracy == pytest.approx(2 / 3)  # b's top label is in the right vertical
    assert report.inversion_rate == pytest.approx(4 / 9)
    text = report.format()
    assert "top-1 accuracy 33.3%" in text and "inversion rate 44.4%" in text and "<-- wrong" in text


def test_a_tie_is_not_a_win() -> None:
    rows = rank_rows(["a"], ["xray"], ["xray", "car"], np.array([[0.5, 0.5]]))
    assert rows[0].rank == 2 and rows[0].top == "car"


def test_probe_file_validation(tmp_path: Path) -> None:
    image = tmp_path / "x.png"
    image.write_bytes(b"")
    good = (
        "verticals: {medical: {xray: [a chest x-ray]}, everyday: {car: []}}\nimages: [{file: x.png, expected: xray}]\n"
    )
    (tmp_path / "p.yaml").write_text(good)
    probe = Probe.load(tmp_path / "p.yaml")
    assert probe.labels == {"xray": ["a chest x-ray"], "car": []} and probe.vertical_of["car"] == "everyday"
    assert probe.images[0].path == image.resolve()
    bad = {
        "unknown label": good.replace("expected: xray", "expected: dog"),
        "does not exist": good.replace("x.png", "y.png"),
        "two verticals": "verticals: {a: {xray: []}, b: {xray: []}}\nimages: [{file: x.png, expected: xray}]\n",
        "'images'": "verticals: {a: {xray: []}}\n",
    }
    for message, text in bad.items():
        (tmp_path / "bad.yaml").write_text(text)
        with pytest.raises(ProbeError, match=message):
            Probe.load(tmp_path / "bad.yaml")
