"""The cache's store: one small interface, an in-process implementation (the default), and
Milvus (`milvus.MilvusCache`) for a fleet. The same tests run against each.

An entry lives in one tenant partition under one conversation context. `get` is the exact
lookup; `candidates` the semantic one: entries of the same partition and context, best first,
by the cheap candidate vector (the service then verifies them with MiniLM). Expired entries are
never returned; they are dropped lazily and on `put`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from extproc.cache.stored_answers import StoredAnswer
from extproc.models.lru import LruCache

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class CacheEntry:
    partition: str
    context: str
    exact: str  # the exact key; unique within the store
    query: str  # the last user turn the answer was for
    candidate: FloatArray  # the cheap vector of the query (unit length); MiniLM reads `query` when verifying
    answer: StoredAnswer
    expires_at: float  # time.time() seconds

    @property
    def size(self) -> int:
        return (
            len(self.answer.body)
            + len(self.answer.text.encode())
            + len(self.query.encode())
            + 4 * self.candidate.size
        )


class CacheBackend(Protocol):
    name: str
    blocking: bool  # True: calls may wait on I/O, so the service runs them off the event loop

    def get(self, partition: str, exact: str, now: float) -> CacheEntry | None: ...

    def may_have(self, partition: str, context: str) -> bool:
        """False when no entry can share this partition and context (a semantic lookup is then
        skipped before its candidate vector is even computed); True when unsure."""
        ...

    def candidates(
        self, partition: str, context: str, vector: FloatArray, limit: int, now: float
    ) -> list[tuple[CacheEntry, float]]: ...

    def put(self, entry: CacheEntry, now: float) -> int:
        """Store (replacing an entry with the same exact key); returns how many were evicted."""
        ...

    def stats(self) -> tuple[int, int]:
        """(entries, bytes) held now."""
        ...

    def clear(self) -> None: ...

    def close(self) -> None: ...


class VectorGroup:
    """The candidate vectors of one (partition, context), as rows of a growable matrix: a
    search is one matrix-vector product, a store an amortised row append, a removal a swap."""

    __slots__ = ("keys", "matrix", "position")

    def __init__(self, dim: int) -> None:
        self.keys: list[str] = []
        self.position: dict[str, int] = {}
        self.matrix: FloatArray = np.zeros((8, dim), dtype=np.float32)

    def add(self, key: str, vector: FloatArray) -> None:
        if key in self.position:
            self.matrix[self.position[key]] = vector
            return
        if len(self.keys) == len(self.matrix):
            grown = np.zeros((2 * len(self.matrix), self.matrix.shape[1]), dtype=np.float32)
            grown[: len(self.keys)] = self.matrix
            self.matrix = grown
        self.matrix[len(self.keys)] = vector
        self.position[key] = len(self.keys)
        self.keys.append(key)

    def remove(self, key: str) -> None:
        index = self.position.pop(key, None)
        if index is None:
            return
        last = len(self.keys) - 1
        if index != last:
            moved = self.keys[last]
            self.matrix[index] = self.matrix[last]
            self.keys[index] = moved
            self.position[moved] = index
        self.keys.pop()

    def best(self, vector: FloatArray, limit: int) -> list[tuple[str, float]]:
        scores = self.matrix[: len(self.keys)] @ vector
        if len(scores) > limit:
            top = np.argpartition(-scores, limit)[:limit]
            order = top[np.argsort(-scores[top])]
        else:
            order = np.argsort(-scores)
        return [(self.keys[i], float(scores[i])) for i in order]


class MemoryCache:
    """In this process: bounded by entries and bytes (least recently used go first), with TTL."""

    name = "memory"
    blocking = False

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lock = threading.Lock()  # stores come from several streams; keep the indexes consistent
        # exact key -> entry, least recently used first, bounded by count and bytes
        self._entries: LruCache[CacheEntry] = LruCache(max_entries, weigh=_entry_size, max_weight=max_bytes)
        self._by_context: dict[tuple[str, str], VectorGroup] = {}

    def get(self, partition: str, exact: str, now: float) -> CacheEntry | None:
        with self._lock:
            entry = self._entries.peek(exact)
            if entry is None or entry.partition != partition:
                return None
            if entry.expires_at <= now:
                self._drop(entry)
                return None
            self._entries.touch(exact)
            return entry

    def may_have(self, partition: str, context: str) -> bool:
        return (partition, context) in self._by_context

    def candidates(
        self, partition: str, context: str, vector: FloatArray, limit: int, now: float
    ) -> list[tuple[CacheEntry, float]]:
        with self._lock:
            group = self._by_context.get((partition, context))
            if group is None:
                return []
            found: list[tuple[CacheEntry, float]] = []
            for key, score in group.best(vector, limit):
                entry = self._entries.peek(key)
                assert entry is not None  # the groups index exactly the entries held
                if entry.expires_at <= now:
                    self._drop(entry)
                    continue
                self._entries.touch(key)
                found.append((entry, score))
            return found

    def put(self, entry: CacheEntry, now: float) -> int:
        with self._lock:
            old = self._entries.peek(entry.exact)
            if old is not None:
                self._drop(old)
            group = self._by_context.get((entry.partition, entry.context))
            if group is None:
                group = self._by_context[(entry.partition, entry.context)] = VectorGroup(entry.candidate.shape[0])
            group.add(entry.exact, entry.candidate)
            left = self._entries.put(entry.exact, entry)
            for _, evicted in left:
                self._unindex(evicted)
        return len(left)

    def _drop(self, entry: CacheEntry) -> None:
        if self._entries.pop(entry.exact) is not None:
            self._unindex(entry)

    def _unindex(self, entry: CacheEntry) -> None:
        group = self._by_context.get((entry.partition, entry.context))
        if group is not None:
            group.remove(entry.exact)
            if not group.keys:
                del self._by_context[(entry.partition, entry.context)]

    def stats(self) -> tuple[int, int]:
        with self._lock:
            return len(self._entries), self._entries.weight

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_context.clear()

    def close(self) -> None:
        self.clear()


def _entry_size(entry: CacheEntry) -> int:
    return entry.size


def now() -> float:
    return time.time()
