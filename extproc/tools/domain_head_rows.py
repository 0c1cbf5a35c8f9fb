"""Written rows that train the subject classifier's stage 2 (the MiniLM head) only
(`head_train.jsonl` beside the weights): stage 1 reads surface n-grams, and rows that lift the
head out of source shifted stage 1's answers on the written sets (issue 44)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from extproc.models.domain_classifier import EMBEDDING_DIM
from extproc.tools.training import file_sha256

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


class LabelledRow(Protocol):
    @property
    def label(self) -> str: ...


def label_indices(rows: Sequence[LabelledRow], labels: Sequence[str]) -> IntArray:
    """Each row's label as its index in `labels`."""
    return np.array([labels.index(r.label) for r in rows], dtype=np.int64)


def head_rows_meta(path: Path, rows: int) -> dict[str, Any]:
    """What `meta.json` records of the head-only file."""
    return {"file": path.name, "sha256": file_sha256(path), "rows": rows, "used_by": "stage 2 (the MiniLM head) only"}


@dataclass(frozen=True, slots=True)
class HeadRows:
    """Rows that train stage 2 only: their MiniLM embeddings, labels and sources."""

    emb: FloatArray
    y: IntArray
    sources: list[str]

    def joined(
        self, emb: npt.NDArray[Any], y: IntArray, sources: Sequence[str]
    ) -> tuple[npt.NDArray[Any], IntArray, list[str]]:
        """The head's training rows: the given ones, then these."""
        if self.y.size == 0:
            return emb, y, list(sources)
        return np.concatenate([emb, self.emb]), np.concatenate([y, self.y]), [*sources, *self.sources]


NO_HEAD_ROWS = HeadRows(np.zeros((0, EMBEDDING_DIM), dtype=np.float32), np.zeros(0, dtype=np.int64), [])
