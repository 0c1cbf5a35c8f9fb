"""The trainers' shared fitting pieces: the CSR row matrix and full-batch L-BFGS."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
import torch

from extproc.tools.fitting import Sparse, minimise_lbfgs

FEATURES: dict[str, tuple[list[int], list[float]]] = {
    "a": ([3, 0], [1.5, 2.0]),  # unsorted on purpose
    "b": ([], []),
    "c": ([1, 2, 4], [0.5, -1.0, 3.0]),
}


def features(text: str) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    ids, values = FEATURES[text]
    return np.asarray(ids, dtype=np.int32), np.asarray(values, dtype=np.float32)


def dense(x: Sparse) -> npt.NDArray[np.float64]:
    out = np.zeros(x.shape)
    out[x.row_ids(), x.indices] = x.data
    return out


def test_from_texts_sorts_columns_and_keeps_rows() -> None:
    x = Sparse.from_texts(["a", "b", "c"], features, 5)
    assert x.shape == (3, 5) and x.n_rows == 3
    assert x.indptr.tolist() == [0, 2, 2, 5]
    assert x.indices.tolist() == [0, 3, 1, 2, 4]
    assert x.indices.dtype == np.int64 and x.data.dtype == np.float64
    assert dense(x).tolist() == [[2.0, 0, 0, 1.5, 0], [0] * 5, [0, 0.5, -1.0, 0, 3.0]]
    empty = Sparse.from_texts([], features, 5)
    assert empty.shape == (0, 5) and empty.indices.shape == (0,)


def test_take_picks_rows_in_order() -> None:
    x = Sparse.from_texts(["a", "b", "c"], features, 5)
    picked = x.take(np.array([2, 0, 2], dtype=np.int64))
    assert np.array_equal(dense(picked), dense(x)[[2, 0, 2]])
    assert x.take(np.zeros(0, dtype=np.int64)).shape == (0, 5)


def test_torch_pair_is_x_and_its_transpose() -> None:
    x = Sparse.from_texts(["a", "b", "c"], features, 5)
    fwd, bwd = x.torch_pair()
    assert np.array_equal(fwd.to_dense().numpy(), dense(x))
    assert np.array_equal(bwd.to_dense().numpy(), dense(x).T)


def test_minimise_lbfgs_finds_a_quadratic_minimum() -> None:
    target = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    seen: list[torch.Tensor] = []

    def loss_and_grad(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seen.append(theta.clone())
        diff = theta - target
        return 0.5 * (diff * diff).sum(), diff

    theta = minimise_lbfgs(loss_and_grad, 3, max_iter=50, tolerance_grad=1e-10, tolerance_change=1e-12)
    assert seen[0].tolist() == [0.0, 0.0, 0.0]  # starts from zero
    assert theta.dtype == np.float64 and theta.shape == (3,)
    assert theta == pytest.approx([1.0, -2.0, 0.5], abs=1e-8)
