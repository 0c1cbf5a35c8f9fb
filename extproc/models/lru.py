"""The project's one small thread-safe LRU map: every model-side cache (image embeddings, OCR
results, text embeddings), the semantic cache's memory store and admission sightings and the
in-process conversation store, with
hit and miss counters that metrics read at scrape time."""

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
    """Key -> value; least recently used entries leave first when there are more than `capacity`,
    or, with `weigh`, when the values' weights (e.g. bytes) add up to more than `max_weight`.
    Capacity 0 stores nothing. `put` returns what left, for a holder that indexes the values
    elsewhere too (the semantic cache's vectors)."""

    def __init__(self, capacity: int, *, weigh: Callable[[V], int] | None = None, max_weight: int = 0) -> None:
        self.capacity = capacity
        self.max_weight = max_weight if weigh is not None else 0
        self.weight = 0  # the values' weights added up (0 without `weigh`)
        self._weigh = weigh
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

    def touch(self, key: str) -> bool:
        """Make `key` the most recent without counting a lookup; False when it is not held."""
        with self._lock:
            if key not in self._items:
                return False
            self._items.move_to_end(key)
            return True

    def put(self, key: str, value: V) -> Sequence[tuple[str, V]]:
        """Store `value` (the most recent now, replacing the value under `key`); returns the
        entries that left to make room, oldest first: `value` itself too when it cannot be held
        (capacity 0, or heavier than `max_weight` alone)."""
        if self.capacity <= 0:
            return ((key, value),)
        weigh = self._weigh
        with self._lock:
            items = self._items
            if weigh is not None:
                old = items.get(key)
                self.weight += weigh(value) - (weigh(old) if old is not None else 0)
            items[key] = value
            items.move_to_end(key)
            if len(items) <= self.capacity and self.weight <= self.max_weight:
                return ()
            left: list[tuple[str, V]] = []
            while items and (len(items) > self.capacity or self.weight > self.max_weight):
                item = items.popitem(last=False)
                if weigh is not None:
                    self.weight -= weigh(item[1])
                left.append(item)
            return left

    def pop(self, key: str) -> V | None:
        """Remove `key`; its value, or None when it was not held."""
        with self._lock:
            value = self._items.pop(key, None)
            if value is not None and self._weigh is not None:
                self.weight -= self._weigh(value)
            return value

    def values(self) -> list[V]:
        """A snapshot of the values, oldest first (no lookup counted, no age refreshed)."""
        with self._lock:
            return list(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.weight = 0

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
