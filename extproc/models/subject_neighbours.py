"""The subject classifier's neighbour vote: stage 2's head beside the labels of the training rows
nearest to a text's MiniLM vector (issue 44).

The head is one linear map: out of source it learns what a subject's big textbooks share, and a
question written unlike them (an exam stem, a chatbot ask) falls between its regions. The nearest
training rows (cosine over the same MiniLM vectors) carry the narrower neighbourhoods a linear map
smooths away. The vote weighs the `k` nearest rows by `exp((cos - best cos) / temperature)`, divides
each subject's total by that subject's share of the memory (a subject with many rows does not win
by count), and is combined with the head as a weighted geometric mean of the two distributions,
then calibrated by one temperature fitted on held-out sources at training time:

    p = softmax(((1 - weight) * log p_head + weight * log(p_vote + 1e-6)) / mix_temperature)

The memory is the head's own training rows (corpus rows, written rows and head-only rows), stored
as int8 with one float32 scale per row (`neighbours.safetensors`). Training and serving call the
same functions here, so the held-out figures are the served ones. Needs numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.softmax import log_softmax
from extproc.models.static_embedding import quantise_rows

FloatArray = npt.NDArray[np.float32]
VOTE_FLOOR = 1e-6  # a subject with no neighbour gets this share: a strong veto, never log(0)
SCREEN_BLOCK = 64  # memory columns per block maximum in `nearest`'s screen


def nearest(sims: FloatArray, k: int) -> npt.NDArray[np.intp]:
    """The columns of each row's `k` largest similarities, in no order; the same set as
    `np.argpartition` gives (ties aside) at about a fifth of its cost on a 20,000-row memory.

    A selection over every column is what a vote costs, so most columns are ruled out first: the
    k-th largest of the rows' block maxima is a lower bound of the k-th largest entry (k distinct
    entries reach it), and only the entries at or above it are ranked."""
    n_rows, n_cols = sims.shape
    n_blocks = n_cols // SCREEN_BLOCK
    if n_blocks < 4 * k:
        return np.argpartition(-sims, k - 1, axis=1)[:, :k]
    maxima = sims[:, : n_blocks * SCREEN_BLOCK].reshape(n_rows, n_blocks, SCREEN_BLOCK).max(axis=2)
    bars = np.partition(maxima, n_blocks - k, axis=1)[:, n_blocks - k]
    out = np.empty((n_rows, k), dtype=np.intp)
    for i in range(n_rows):
        candidates = np.flatnonzero(sims[i] >= bars[i])
        out[i] = candidates[np.argpartition(-sims[i, candidates], k - 1)[:k]]
    return out


def vote(
    sims: npt.NDArray[Any], labels: npt.NDArray[np.int64], k: int, temperature: float, prior: FloatArray
) -> FloatArray:
    """Each row's neighbour vote over the subjects, from its cosines to every memory row (`sims`,
    texts x memory) and the memory rows' subjects; `prior` is each subject's share of the memory."""
    sims = np.asarray(sims, dtype=np.float32)
    n_subjects = prior.shape[0]
    k = min(k, sims.shape[1])
    idx = nearest(sims, k)
    near = np.take_along_axis(sims, idx, axis=1)
    weights = np.exp((near - near.max(axis=1, keepdims=True)) / temperature)
    n_rows = sims.shape[0]
    cells = (np.arange(n_rows)[:, None] * n_subjects + labels[idx]).ravel()
    totals = np.bincount(cells, weights=weights.ravel(), minlength=n_rows * n_subjects)
    out = np.asarray(totals, dtype=np.float64).reshape(n_rows, n_subjects)
    out /= np.maximum(prior, 1e-12)
    return np.asarray(out / out.sum(axis=1, keepdims=True), dtype=np.float32)


def combine(
    head_log_probs: npt.NDArray[Any], votes: npt.NDArray[Any], weight: float, mix_temperature: float
) -> FloatArray:
    """The weighted geometric mean of the head's and the vote's distributions, calibrated."""
    z = (
        (1.0 - weight) * np.asarray(head_log_probs, dtype=np.float64) + weight * np.log(votes + VOTE_FLOOR)
    ) / mix_temperature
    z -= z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return np.asarray(e / e.sum(axis=-1, keepdims=True), dtype=np.float32)


def _unit(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return np.asarray(x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12))


@dataclass(frozen=True, slots=True)
class NeighbourSettings:
    k: int
    temperature: float
    weight: float
    mix_temperature: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "temperature": self.temperature,
            "weight": self.weight,
            "mix_temperature": self.mix_temperature,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> NeighbourSettings:
        out = cls(int(raw["k"]), float(raw["temperature"]), float(raw["weight"]), float(raw["mix_temperature"]))
        if out.k < 1 or out.temperature <= 0 or not 0.0 <= out.weight <= 1.0 or out.mix_temperature <= 0:
            raise ValueError(f"bad neighbour settings {raw!r}")
        return out


class NeighbourMemory:
    """The memory rows and their subjects, with the vote's settings. The rows are kept in a
    principal-component projection of the MiniLM space (`mean`, `projection`: 384 -> `dims`),
    re-normalised, so a vote reads a third of the numbers: out of source 128 of 384 dimensions
    vote as well within 0.3 points (bench/experiments/domain_neighbours.md), at a third of the cost
    (about 0.5 instead of 1.5 ms a text on one core, 19,618 rows)."""

    def __init__(
        self,
        rows: npt.NDArray[Any],
        labels: npt.NDArray[Any],
        n_subjects: int,
        settings: NeighbourSettings,
        mean: npt.NDArray[Any],
        projection: npt.NDArray[Any],
    ) -> None:
        self.rows = np.ascontiguousarray(rows, dtype=np.float32)  # projected unit vectors
        self.labels = np.asarray(labels, dtype=np.int64)
        self.mean = np.asarray(mean, dtype=np.float32)
        self.projection = np.ascontiguousarray(projection, dtype=np.float32)
        if self.rows.ndim != 2 or self.labels.shape != (self.rows.shape[0],) or self.labels.size == 0:
            raise ValueError(f"memory of {self.rows.shape} rows and {self.labels.shape} labels")
        if self.projection.ndim != 2 or self.projection.shape[1] != self.rows.shape[1]:
            raise ValueError(f"projection {self.projection.shape} does not match rows {self.rows.shape}")
        if self.mean.shape != (self.projection.shape[0],):
            raise ValueError(f"mean {self.mean.shape} does not match projection {self.projection.shape}")
        if int(self.labels.min()) < 0 or int(self.labels.max()) >= n_subjects:
            raise ValueError(f"memory labels outside 0..{n_subjects - 1}")
        self.prior = np.asarray(np.bincount(self.labels, minlength=n_subjects) / self.labels.size, dtype=np.float32)
        self.settings = settings

    @property
    def input_dim(self) -> int:
        return int(self.projection.shape[0])

    @classmethod
    def fit(
        cls,
        vectors: npt.NDArray[Any],
        labels: npt.NDArray[Any],
        n_subjects: int,
        settings: NeighbourSettings,
        dims: int,
    ) -> NeighbourMemory:
        """The memory of `vectors` (unit MiniLM vectors) in their top `dims` principal components."""
        x = np.asarray(vectors, dtype=np.float64)
        mean = x.mean(axis=0)
        _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
        projection = vt[: min(dims, vt.shape[0])].T
        return cls(_unit((x - mean) @ projection), labels, n_subjects, settings, mean, projection)

    @classmethod
    def from_tensors(
        cls, tensors: Mapping[str, npt.NDArray[Any]], n_subjects: int, settings: NeighbourSettings
    ) -> NeighbourMemory:
        q, scales, labels = tensors["rows"], tensors["scales"], tensors["labels"]
        if q.dtype != np.int8 or q.ndim != 2 or scales.shape != (q.shape[0],) or not np.all(np.isfinite(scales)):
            raise ValueError("neighbour rows must be int8 with one scale each")
        rows = q.astype(np.float32) * scales[:, None].astype(np.float32)
        return cls(rows, labels, n_subjects, settings, tensors["mean"], tensors["projection"])

    def to_tensors(self) -> dict[str, npt.NDArray[Any]]:
        q, scales = quantise_rows(self.rows)
        return {
            "rows": q,
            "scales": scales,
            "labels": self.labels.astype(np.int16),
            "mean": self.mean,
            "projection": self.projection,
        }

    def project(self, x: npt.NDArray[Any]) -> FloatArray:
        """Unit MiniLM vectors (texts x 384) into the memory's space."""
        x = np.asarray(x, dtype=np.float32).reshape(-1, self.input_dim)
        return np.asarray(_unit((x - self.mean) @ self.projection), dtype=np.float32)

    def votes(self, x: npt.NDArray[Any]) -> FloatArray:
        """Votes for rows of unit vectors `x` (texts x 384), in blocks to bound the similarity matrix."""
        x = self.project(x)
        s = self.settings
        parts = [
            vote(x[a : a + 1024] @ self.rows.T, self.labels, s.k, s.temperature, self.prior)
            for a in range(0, len(x), 1024)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, self.prior.shape[0]), dtype=np.float32)

    def probs(self, head_logits: npt.NDArray[Any], x: npt.NDArray[Any]) -> FloatArray:
        """Stage 2's distribution: the head's (its calibrated logits) and the vote, combined."""
        s = self.settings
        head_log_probs = log_softmax(np.asarray(head_logits, dtype=np.float64))
        return combine(head_log_probs, self.votes(x), s.weight, s.mix_temperature)
