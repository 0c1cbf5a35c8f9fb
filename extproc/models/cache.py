"""One small thread-safe LRU map for every model-side cache (image embeddings, OCR results,
text embeddings), with hit and miss counters that metrics read at scrape time."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

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
