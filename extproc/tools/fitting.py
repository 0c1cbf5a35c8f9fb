"""What the offline trainers' linear fits share: a CSR row matrix and full-batch L-BFGS.

`Sparse` holds one row per text (columns sorted inside a row), sliced by rows in numpy without
torch's per-call coalescing; `minimise_lbfgs` runs torch's L-BFGS on a float64 parameter vector
from zero with a gradient the caller writes out. The attack trainer's logistic regression and the
subject trainer's softmax regression both fit through them (each with its own tolerances)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
F64Array = npt.NDArray[np.float64]

# (ids, values) of one text's non-zero features
FeatureFn = Callable[[str], tuple[npt.NDArray[Any], npt.NDArray[Any]]]


@dataclass(frozen=True, slots=True)
class Sparse:
    """A CSR matrix in numpy: row i holds columns indices[indptr[i]:indptr[i+1]] with values
    data[...]."""

    indptr: IntArray
    indices: IntArray
    data: F64Array
    n_cols: int

    @classmethod
    def from_texts(cls, texts: Sequence[str], features: FeatureFn, n_cols: int) -> Sparse:
        """One row per text from its (ids, values), the columns sorted inside each row."""
        indptr, cols, vals = [0], [], []
        for text in texts:
            ids, values = features(text)
            order = np.argsort(ids, kind="stable")
            cols.append(ids[order].astype(np.int64))
            vals.append(values[order].astype(np.float64))
            indptr.append(indptr[-1] + ids.shape[0])
        return cls(
            np.asarray(indptr, dtype=np.int64),
            np.concatenate(cols) if cols else np.zeros(0, np.int64),
            np.concatenate(vals) if vals else np.zeros(0),
            n_cols,
        )

    @property
    def n_rows(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_rows, self.n_cols)

    def take(self, rows: IntArray) -> Sparse:
        """The given rows, in the given order."""
        lengths = self.indptr[rows + 1] - self.indptr[rows]
        indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        idx = (
            np.concatenate([np.arange(self.indptr[r], self.indptr[r + 1]) for r in rows])
            if len(rows)
            else np.zeros(0, np.int64)
        )
        return Sparse(indptr, self.indices[idx], self.data[idx], self.n_cols)

    def row_ids(self) -> IntArray:
        """The row of every stored value."""
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), np.diff(self.indptr))

    def torch_pair(self) -> tuple[Any, Any]:
        """(X, X transposed) as torch CSR tensors, built once per fit."""
        import torch

        n, d = self.shape
        x = torch.sparse_csr_tensor(
            torch.from_numpy(self.indptr),
            torch.from_numpy(self.indices),
            torch.from_numpy(self.data),
            (n, d),
            check_invariants=False,
        )
        rows = self.row_ids()
        order = np.lexsort((rows, self.indices))
        counts = np.bincount(self.indices, minlength=d)
        t_indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        xt = torch.sparse_csr_tensor(
            torch.from_numpy(t_indptr),
            torch.from_numpy(rows[order]),
            torch.from_numpy(self.data[order]),
            (d, n),
            check_invariants=False,
        )
        return x, xt


def minimise_lbfgs(
    loss_and_grad: Callable[[Any], tuple[Any, Any]],
    n_params: int,
    *,
    max_iter: int,
    tolerance_grad: float,
    tolerance_change: float,
    threads: int = 1,
) -> F64Array:
    """Minimise a smooth loss over `n_params` float64 parameters from zero by full-batch L-BFGS
    (strong Wolfe line search, 20 pairs of history, at most 2 * `max_iter` evaluations) on
    `threads` torch threads. `loss_and_grad(theta)` gets the parameters as a float64 torch tensor
    (not to be written to) and returns (loss as a 0-d tensor, gradient as a float64 tensor of the
    same shape). Returns a copy of the final parameters."""
    import torch

    torch.set_num_threads(threads)
    params = torch.zeros(n_params, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [params],
        lr=1.0,
        max_iter=max_iter,
        max_eval=max_iter * 2,
        tolerance_grad=tolerance_grad,
        tolerance_change=tolerance_change,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure() -> Any:
        loss, grad = loss_and_grad(params.detach())
        params.grad = grad
        return loss

    opt.step(closure)  # type: ignore[no-untyped-call]
    return np.asarray(params.detach().numpy().copy(), dtype=np.float64)
