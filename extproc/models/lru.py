"""One small thread-safe LRU map for every model-side cache (image embeddings, OCR results,
text embeddings), with hit and miss counters that metrics read at scrape time."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

V = TypeVar("V")


class LruCache(Generic[V]):
    """Content hash -> value; least recently used entries leave first. Capacity 0 stores nothing."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def peek(self, key: str) -> V | None:
        """The value without counting a lookup or refreshing its age (a second check under a lock)."""
        with self._lock:
            return self._items.get(key)

    def put(self, key: str, value: V) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


@runtime_checkable
class CachingModel(Protocol):
    """A loaded model that keeps caches; metrics export their hit and miss counts by name."""

    def caches(self) -> Mapping[str, LruCache[Any]]: ...


def text_key(text: str) -> str:
    """The cache key of a text: its sha256 (lone surrogates kept, never an encoding error)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def rows_through_cache(
    cache: LruCache[npt.NDArray[np.float32]],
    texts: Sequence[str],
    width: int,
    compute: Callable[[list[str]], npt.ArrayLike],
) -> npt.NDArray[np.float32]:
    """One row per text: cached rows at once, the rest computed in one `compute` call over the
    distinct uncached texts (first-seen order), stored, and copied to every repeat."""
    out = np.zeros((len(texts), width), dtype=np.float32)
    todo: dict[str, list[int]] = {}
    for i, key in enumerate(text_key(t) for t in texts):
        hit = cache.get(key)
        if hit is not None:
            out[i] = hit
        else:
            todo.setdefault(key, []).append(i)
    if todo:
        order = list(todo)
        rows = np.asarray(compute([texts[todo[k][0]] for k in order]), dtype=np.float32)
        for key, row in zip(order, rows, strict=True):
            out[todo[key]] = row
            cache.put(key, row)
    return out
