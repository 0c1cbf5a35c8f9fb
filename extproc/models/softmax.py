"""Softmax and log-softmax over numpy arrays: the one home of the subject classifier's and its
trainer's normalisations. Needs numpy only.

Both work in the input's own floating dtype (cast to float64 first for float64 arithmetic), shift
by the maximum along `axis`, and keep one fixed order of operations: the shipped subject weights
are retrained through them and must come out byte for byte the same.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

_Float = TypeVar("_Float", bound=np.floating[Any])


def softmax(z: npt.NDArray[_Float], axis: int = -1) -> npt.NDArray[_Float]:
    """`exp(z) / sum(exp(z))` along `axis`, each slice shifted by its maximum first."""
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return np.asarray(e / e.sum(axis=axis, keepdims=True), dtype=z.dtype)


def log_softmax(z: npt.NDArray[_Float], axis: int = -1) -> npt.NDArray[_Float]:
    """`z - log(sum(exp(z)))` along `axis`, each slice shifted by its maximum first."""
    shifted = z - z.max(axis=axis, keepdims=True)
    return np.asarray(shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True)), dtype=z.dtype)
