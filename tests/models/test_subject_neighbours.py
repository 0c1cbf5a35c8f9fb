"""The subject classifier's neighbour vote (`extproc/models/subject_neighbours.py`): the nearest
rows decide, a subject's share of the memory does not, the combination with the head is the
stated geometric mean, and the int8 memory on disk answers as the float one did."""

from __future__ import annotations

import numpy as np
import pytest

from extproc.models.softmax import log_softmax
from extproc.models.subject_neighbours import (
    SCREEN_BLOCK,
    NeighbourMemory,
    NeighbourSettings,
    combine,
    nearest,
    vote,
)

SETTINGS = NeighbourSettings(k=4, temperature=0.05, weight=0.3, mix_temperature=1.0)


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_nearest_rows_decide_the_vote() -> None:
    # one text's cosines to six memory rows: the two nearest are subject 2
    sims = np.array([[0.95, 0.94, 0.60, 0.55, 0.50, 0.40]], dtype=np.float32)
    labels = np.array([2, 2, 0, 0, 1, 1])
    prior = np.full(3, 1 / 3, dtype=np.float32)
    v = vote(sims, labels, k=4, temperature=0.05, prior=prior)
    assert v.shape == (1, 3) and abs(float(v.sum()) - 1.0) < 1e-6
    assert int(v.argmax()) == 2 and v[0, 2] > 0.99  # rows 0.35 below the best weigh exp(-7)
    # a wider temperature lets the farther rows speak
    assert vote(sims, labels, k=4, temperature=1.0, prior=prior)[0, 0] > 0.3
    # k bounds the vote: with k=2 subject 0 gets nothing
    assert vote(sims, labels, k=2, temperature=1.0, prior=prior)[0, 0] == 0.0


@pytest.mark.parametrize("n_cols", [SCREEN_BLOCK * 200 + 37, SCREEN_BLOCK * 20, 30])
def test_the_screened_selection_finds_the_same_rows_as_a_full_one(n_cols: int) -> None:
    # unit rows near a few memory rows, as texts meet the memory: the screen rules out most
    # columns, and must never rule out one of the k largest (the tail past the last block too)
    rng = np.random.default_rng(7)
    memory = unit(rng.normal(size=(n_cols, 32)))
    texts = unit(np.concatenate([rng.normal(size=(20, 32)), memory[rng.choice(n_cols, 20)] + 0.1]))
    sims = (texts @ memory.T).astype(np.float32)
    sims[0, -1] = 2.0  # the best row of text 0 lies in the tail no block covers
    k = min(25, n_cols)
    got = nearest(sims, k)
    want = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    assert got.shape == (40, k)
    assert all(set(got[i]) == set(want[i]) for i in range(40))
    assert n_cols - 1 in set(got[0])


def test_a_subject_does_not_win_by_its_share_of_the_memory() -> None:
    sims = np.array([[0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]], dtype=np.float32)
    labels = np.array([1, 1, 1, 1, 1, 1, 0, 0])
    balanced = vote(sims, labels, k=8, temperature=0.05, prior=np.array([0.25, 0.75], dtype=np.float32))
    assert np.allclose(balanced, [[0.5, 0.5]])
    by_count = vote(sims, labels, k=8, temperature=0.05, prior=np.array([0.5, 0.5], dtype=np.float32))
    assert np.allclose(by_count, [[0.25, 0.75]])  # the control: without the prior, counts win


def test_combine_is_the_weighted_geometric_mean_calibrated() -> None:
    head = log_softmax(np.array([[2.0, 0.0, -1.0]]))
    votes = np.array([[0.1, 0.8, 0.1]], dtype=np.float32)
    assert np.allclose(combine(head, votes, 0.0, 1.0), np.exp(head), atol=1e-6)
    z = 0.7 * head + 0.3 * np.log(votes + 1e-6)
    expected = np.exp(z / 1.5) / np.exp(z / 1.5).sum()
    assert np.allclose(combine(head, votes, 0.3, 1.5), expected, atol=1e-6)
    # the vote can overturn the head where the head is unsure
    assert int(combine(log_softmax(np.array([[0.2, 0.0, 0.0]])), votes, 0.3, 1.0).argmax()) == 1


def test_the_int8_memory_answers_as_the_float_memory() -> None:
    rng = np.random.default_rng(3)
    vectors = unit(rng.standard_normal((300, 384))).astype(np.float32)
    labels = rng.integers(0, 5, 300)
    memory = NeighbourMemory.fit(vectors, labels, 5, SETTINGS, dims=128)
    assert memory.rows.shape == (300, 128) and memory.input_dim == 384
    stored = NeighbourMemory.from_tensors(memory.to_tensors(), 5, SETTINGS)
    cos = (stored.rows * memory.rows).sum(1) / np.linalg.norm(stored.rows, axis=1)
    assert float(cos.min()) >= 0.9999
    queries = unit(vectors[:50] + 0.02 * rng.standard_normal((50, 384))).astype(np.float32)
    assert np.abs(stored.votes(queries) - memory.votes(queries)).max() < 0.02
    head_logits = rng.standard_normal((50, 5))
    p = stored.probs(head_logits, queries)
    assert p.shape == (50, 5) and np.allclose(p.sum(1), 1.0, atol=1e-5)


def test_the_projection_keeps_neighbourhoods() -> None:
    """Rows in 14 clusters: in 64 principal components each query still finds its own cluster."""
    rng = np.random.default_rng(5)
    centres = unit(rng.standard_normal((14, 384)))
    labels = np.repeat(np.arange(14), 30)
    vectors = unit(centres[labels] + 0.04 * rng.standard_normal((420, 384))).astype(np.float32)
    memory = NeighbourMemory.fit(vectors, labels, 14, SETTINGS, dims=64)
    assert memory.rows.shape == (420, 64)
    queries = unit(centres + 0.04 * rng.standard_normal((14, 384))).astype(np.float32)
    assert (memory.votes(queries).argmax(1) == np.arange(14)).all()


def tensors(**changed: np.ndarray) -> dict[str, np.ndarray]:
    good = {
        "rows": np.ones((3, 4), np.int8),
        "scales": np.ones(3, np.float32),
        "labels": np.zeros(3, np.int16),
        "mean": np.zeros(6, np.float32),
        "projection": np.zeros((6, 4), np.float32),
    }
    return {**good, **changed}


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (tensors(rows=np.ones((3, 4), np.float32)), "int8"),
        (tensors(scales=np.ones(2, np.float32)), "int8"),
        (tensors(scales=np.array([1.0, np.nan, 1.0], np.float32)), "int8"),
        (tensors(labels=np.array([0, 1, 7], np.int16)), "outside"),
        (tensors(labels=np.zeros(2, np.int16)), "memory of"),
        (tensors(projection=np.zeros((6, 5), np.float32)), "projection"),
        (tensors(mean=np.zeros(5, np.float32)), "mean"),
    ],
)
def test_a_bad_memory_is_refused(bad: dict[str, np.ndarray], why: str) -> None:
    NeighbourMemory.from_tensors(tensors(), 3, SETTINGS)  # the control loads
    with pytest.raises(ValueError, match=why):
        NeighbourMemory.from_tensors(bad, 3, SETTINGS)


@pytest.mark.parametrize(
    "raw",
    [
        {"k": 0, "temperature": 0.05, "weight": 0.3, "mix_temperature": 1.0},
        {"k": 5, "temperature": 0.0, "weight": 0.3, "mix_temperature": 1.0},
        {"k": 5, "temperature": 0.05, "weight": 1.5, "mix_temperature": 1.0},
    ],
)
def test_bad_settings_are_refused(raw: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="bad neighbour settings"):
        NeighbourSettings.from_json(raw)
    assert NeighbourSettings.from_json(SETTINGS.to_json()) == SETTINGS
