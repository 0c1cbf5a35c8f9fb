"""What stage 2's neighbour vote costs a text, one thread: the shipped selection (`nearest`, a
block-maximum screen, then a selection over what passes) beside a full `np.argpartition` over the
memory (the baseline, measured in the same run on the same vectors).

The texts are the domain corpus's test split, each distinct, through the packaged MiniLM, as a
request's text reaches stage 2: one text a call.

    python bench/bench_subject_vote.py [--data ../shared/data/domain] [--texts 400]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread, as the figure says; before numpy loads

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from extproc.models import subject_neighbours  # noqa: E402
from extproc.models.domain_classifier import DomainClassifier  # noqa: E402
from extproc.tools.domain_training import embed_all, load_rows, minilm_embedder  # noqa: E402


def full_selection(sims: np.ndarray, k: int) -> np.ndarray:
    return np.argpartition(-sims, k - 1, axis=1)[:, :k]


def per_text_us(memory: subject_neighbours.NeighbourMemory, vectors: np.ndarray, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        for row in vectors:
            t0 = time.perf_counter()
            memory.votes(row[None, :])
            out.append((time.perf_counter() - t0) * 1e6)
    return out


def timed(
    memory: subject_neighbours.NeighbourMemory, vectors: np.ndarray, select: Callable[..., np.ndarray]
) -> list[float]:
    shipped = subject_neighbours.nearest
    subject_neighbours.nearest = select  # type: ignore[assignment]
    try:
        return per_text_us(memory, vectors, rounds=3)
    finally:
        subject_neighbours.nearest = shipped  # type: ignore[assignment]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "domain")
    parser.add_argument("--texts", type=int, default=400)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    classifier = DomainClassifier.load()
    memory = classifier.neighbours
    if memory is None:
        print("the packaged weights have no neighbour vote")
        return 1
    texts = [r.text for r in load_rows(args.data / "test.jsonl")][: args.texts]
    vectors = embed_all(minilm_embedder(1, None), texts)
    same = all(
        set(subject_neighbours.nearest(s[None, :], memory.settings.k)[0])
        == set(full_selection(s[None, :], memory.settings.k)[0])
        for s in memory.project(vectors) @ memory.rows.T
    )
    # interleaved, so load on a shared host falls on both alike
    base: list[float] = []
    shipped: list[float] = []
    for _ in range(3):
        base += timed(memory, vectors, full_selection)
        shipped += timed(memory, vectors, subject_neighbours.nearest)
    print(
        f"memory {memory.rows.shape[0]} rows x {memory.rows.shape[1]} dims, k {memory.settings.k},"
        f" {len(texts)} distinct texts"
    )
    print(f"same neighbours as the full selection on every text: {same}")
    print(f"{'selection':<28}{'p50 us':>10}{'mean us':>10}")
    for name, times in (("full argpartition (base)", base), ("screened (shipped)", shipped)):
        print(f"{name:<28}{statistics.median(times):>10.0f}{statistics.fmean(times):>10.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
