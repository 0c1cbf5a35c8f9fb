"""Probe harness: does a checkpoint rank the right label first on known images?

A probe file (YAML) lists candidate labels grouped by vertical, each with its
descriptions, and images with the label they should get:

    templates: ["a photo of {}."]          # optional
    verticals:
      identity:
        passport: ["a passport", "the photo page of a passport"]
        id_card: ["an identity card"]
      medical:
        chest_xray: ["a chest x-ray"]
    images:
      - file: ../../tests/corpus/images/retina.jpg   # relative to the probe file
        expected: fundus_photo

It scores every image against every label through the production path (our
preprocessing, the encoder at the chosen precision, SigLIP's sigmoid calibration) and
reports top-1 accuracy, vertical accuracy (the top label is in the right vertical) and the
inversion rate: the share of (image, wrong label) pairs where the wrong label scores at
least as high as the expected one. The reference system's broken path had 82% inverted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from extproc.images import ImageLimits, inspect_image
from extproc.models.siglip import VisionEncoder
from extproc.signals.image_labels import ImageLabelsSpec, label_embeddings


class ProbeError(ValueError):
    """The probe file is malformed."""


@dataclass(frozen=True, slots=True)
class ProbeImage:
    path: Path
    expected: str


@dataclass(frozen=True, slots=True)
class Probe:
    labels: dict[str, list[str]]  # label -> descriptions
    vertical_of: dict[str, str]  # label -> vertical
    templates: list[str]
    images: list[ProbeImage]

    @classmethod
    def load(cls, path: Path | str) -> Probe:
        path = Path(path)
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise ProbeError(f"{path}: a probe file is a YAML mapping")
        verticals = raw.get("verticals")
        if not isinstance(verticals, dict) or not verticals:
            raise ProbeError(f"{path}: 'verticals' must map vertical names to label -> descriptions")
        labels: dict[str, list[str]] = {}
        vertical_of: dict[str, str] = {}
        for vertical, entries in verticals.items():
            if not isinstance(entries, dict) or not entries:
                raise ProbeError(f"{path}: verticals.{vertical} must map labels to descriptions")
            for label, descriptions in entries.items():
                if label in labels:
                    raise ProbeError(f"{path}: label {label!r} appears in two verticals")
                if descriptions is None:
                    descriptions = []
                if not isinstance(descriptions, list) or not all(isinstance(d, str) for d in descriptions):
                    raise ProbeError(f"{path}: verticals.{vertical}.{label} must be a list of strings")
                labels[str(label)] = list(descriptions)
                vertical_of[str(label)] = str(vertical)
        templates = raw.get("templates", ["a photo of {}."])
        if not isinstance(templates, list) or not templates:
            raise ProbeError(f"{path}: 'templates' must be a non-empty list")
        images_raw = raw.get("images")
        if not isinstance(images_raw, list) or not images_raw:
            raise ProbeError(f"{path}: 'images' must be a non-empty list")
        images: list[ProbeImage] = []
        for index, entry in enumerate(images_raw):
            if not isinstance(entry, dict) or "file" not in entry or "expected" not in entry:
                raise ProbeError(f"{path}: images[{index}] needs 'file' and 'expected'")
            expected = str(entry["expected"])
            if expected not in labels:
                raise ProbeError(f"{path}: images[{index}] expects unknown label {expected!r}")
            file = (path.parent / str(entry["file"])).resolve()
            if not file.is_file():
                raise ProbeError(f"{path}: images[{index}]: {file} does not exist")
            images.append(ProbeImage(file, expected))
        return cls(labels, vertical_of, [str(t) for t in templates], images)

    def spec(self) -> ImageLabelsSpec:
        return ImageLabelsSpec(name="probe", labels=self.labels, templates=self.templates)


@dataclass(frozen=True, slots=True)
class ProbeRow:
    image: str
    expected: str
    top: str
    expected_prob: float
    top_prob: float
    rank: int  # 1 = expected label ranked first
    inversions: int  # wrong labels scoring >= the expected one


@dataclass(slots=True)
class ProbeReport:
    labels: list[str]
    vertical_of: Mapping[str, str]
    rows: list[ProbeRow] = field(default_factory=list)

    @property
    def top1_accuracy(self) -> float:
        return sum(r.rank == 1 for r in self.rows) / len(self.rows) if self.rows else float("nan")

    @property
    def vertical_accuracy(self) -> float:
        if not self.rows:
            return float("nan")
        return sum(self.vertical_of[r.top] == self.vertical_of[r.expected] for r in self.rows) / len(self.rows)

    @property
    def inversion_rate(self) -> float:
        pairs = len(self.rows) * (len(self.labels) - 1)
        return sum(r.inversions for r in self.rows) / pairs if pairs else float("nan")

    def format(self) -> str:
        verticals = len(set(self.vertical_of.values()))
        lines = [
            f"probe: {len(self.rows)} images, {len(self.labels)} labels in {verticals} verticals",
            f"{'image':32} {'expected':20} {'p':>6} {'rank':>4}  {'top-1':20} {'p':>6}",
        ]
        for r in self.rows:
            mark = "" if r.rank == 1 else "  <-- wrong"
            lines.append(
                f"{r.image:32} {r.expected:20} {r.expected_prob:6.3f} {r.rank:4d}  {r.top:20} {r.top_prob:6.3f}{mark}"
            )
        lines.append(
            f"top-1 accuracy {self.top1_accuracy:.1%}  vertical accuracy {self.vertical_accuracy:.1%}  "
            f"inversion rate {self.inversion_rate:.1%}"
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "images": len(self.rows),
            "labels": len(self.labels),
            "top1_accuracy": self.top1_accuracy,
            "vertical_accuracy": self.vertical_accuracy,
            "inversion_rate": self.inversion_rate,
        }


def rank_rows(
    names: Sequence[str], expected: Sequence[str], labels: Sequence[str], probabilities: npt.NDArray[np.float64]
) -> list[ProbeRow]:
    """Rows from an (images, labels) probability matrix; ties count against the expected label."""
    rows = []
    for i, (name, want) in enumerate(zip(names, expected, strict=True)):
        probs = probabilities[i]
        j = labels.index(want)
        others = [k for k in range(len(labels)) if k != j]
        inversions = sum(1 for k in others if probs[k] >= probs[j])
        top = max(range(len(labels)), key=lambda k: (probs[k], k != j))
        rows.append(ProbeRow(name, want, labels[top], float(probs[j]), float(probs[top]), inversions + 1, inversions))
    return rows


def run_probe(encoder: VisionEncoder, probe: Probe, limits: ImageLimits | None = None) -> ProbeReport:
    spec = probe.spec()
    labels = list(spec.labels)
    text = label_embeddings(encoder, spec)
    limits = limits or ImageLimits(max_bytes=64 * 1024 * 1024, max_pixels=100_000_000)
    vectors = []
    for item in probe.images:
        decoded = inspect_image(item.path.read_bytes(), declared_mime="", limits=limits, message_index=0)
        vectors.append(encoder.embed_images([decoded.pixels()])[0])
    probabilities = encoder.probabilities(np.stack(vectors), text)
    report = ProbeReport(labels, probe.vertical_of)
    report.rows = rank_rows(
        [i.path.name for i in probe.images], [i.expected for i in probe.images], labels, probabilities
    )
    return report
