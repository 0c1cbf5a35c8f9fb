"""The cache's stores, the same tests against each: in-process and Milvus Lite."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from extproc.cache.backends import CacheBackend, CacheEntry, MemoryCache
from extproc.cache.milvus import EntryTooLarge, MilvusCache
from extproc.cache.stored_answers import StoredAnswer

DIM = 8
NOW = 1_000_000.0


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


def entry(exact: str, partition: str = "tA", context: str = "c1", vector: np.ndarray | None = None, ttl: float = 60, text: str = "answer") -> CacheEntry:
    vector = unit(1.0) if vector is None else vector
    return CacheEntry(
        partition=partition,
        context=context,
        exact=exact,
        query=f"query {exact}",
        candidate=vector,
        answer=StoredAnswer(text=text, body=b'{"a": "' + text.encode() + b'"}', model="m", completion_tokens=3),
        expires_at=NOW + ttl,
    )


@pytest.fixture(params=["memory", "milvus"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CacheBackend]:
    store: CacheBackend
    if request.param == "memory":
        store = MemoryCache(max_entries=100, max_bytes=10_000_000)
    else:
        store = MilvusCache(str(tmp_path / "cache.db"), dim=DIM, collection="test_cache")
    yield store
    store.close()


def test_exact_get_round_trips_within_its_partition_only(backend: CacheBackend) -> None:
    backend.put(entry("k1"), NOW)
    got = backend.get("tA", "k1", NOW)
    assert got is not None and got.answer.text == "answer" and got.answer.body == b'{"a": "answer"}'
    assert got.query == "query k1" and np.allclose(got.candidate, unit(1.0))
    assert backend.get("tB", "k1", NOW) is None  # another tenant's key never answers
    assert backend.get("tA", "k2", NOW) is None


def test_candidates_are_ranked_and_confined_to_partition_and_context(backend: CacheBackend) -> None:
    backend.put(entry("near", vector=unit(1.0, 0.1)), NOW)
    backend.put(entry("far", vector=unit(0.2, 1.0)), NOW)
    backend.put(entry("other_tenant", partition="tB", vector=unit(1.0)), NOW)
    backend.put(entry("other_context", context="c2", vector=unit(1.0)), NOW)
    found = backend.candidates("tA", "c1", unit(1.0), 4, NOW)
    assert [e.exact for e, _ in found] == ["near", "far"]
    assert found[0][1] > 0.99 and found[1][1] < 0.5
    assert backend.candidates("tC", "c1", unit(1.0), 4, NOW) == []


def test_expired_entries_are_never_returned(backend: CacheBackend) -> None:
    backend.put(entry("k1", ttl=10), NOW)
    assert backend.get("tA", "k1", NOW + 5) is not None
    assert backend.get("tA", "k1", NOW + 11) is None
    assert backend.candidates("tA", "c1", unit(1.0), 4, NOW + 11) == []


def test_a_store_replaces_the_entry_with_the_same_key(backend: CacheBackend) -> None:
    backend.put(entry("k1", text="old"), NOW)
    backend.put(entry("k1", text="new"), NOW)
    got = backend.get("tA", "k1", NOW)
    assert got is not None and got.answer.text == "new"
    assert len(backend.candidates("tA", "c1", unit(1.0), 4, NOW)) == 1
    assert backend.stats()[0] == 1


def test_concurrent_stores_of_two_tenants_never_mix(backend: CacheBackend) -> None:
    def write(tenant: str) -> None:
        for i in range(20):
            backend.put(entry(f"{tenant}_{i}", partition=tenant, text=f"{tenant} secret {i}"), NOW)

    threads = [threading.Thread(target=write, args=(t,)) for t in ("tA", "tB")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for tenant, other in (("tA", "tB"), ("tB", "tA")):
        for i in range(20):
            got = backend.get(tenant, f"{tenant}_{i}", NOW)
            assert got is not None and got.answer.text == f"{tenant} secret {i}"
            assert backend.get(tenant, f"{other}_{i}", NOW) is None
        assert all(e.partition == tenant for e, _ in backend.candidates(tenant, "c1", unit(1.0), 50, NOW))


def test_memory_cache_evicts_least_recently_used_within_its_bounds() -> None:
    store = MemoryCache(max_entries=3, max_bytes=10_000_000)
    for key in ("a", "b", "c"):
        store.put(entry(key), NOW)
    assert store.get("tA", "a", NOW) is not None  # a is now the most recently used
    assert store.put(entry("d"), NOW) == 1
    assert store.get("tA", "b", NOW) is None and store.get("tA", "a", NOW) is not None
    size = entry("x").size
    small = MemoryCache(max_entries=100, max_bytes=2 * size)
    for key in ("x", "y", "z"):
        small.put(entry(key), NOW)
    entries, held = small.stats()
    assert entries == 2 and held <= 2 * size


def test_milvus_refuses_what_its_payload_cannot_hold_and_odd_keys(tmp_path: Path) -> None:
    store = MilvusCache(str(tmp_path / "c.db"), dim=DIM, collection="limits")
    try:
        with pytest.raises(EntryTooLarge):
            store.put(entry("big", text="x" * 70_000), NOW)
        with pytest.raises(ValueError, match="not a cache key"):
            store.get('tA" or partition != "', "k", NOW)  # keys go into filter expressions
    finally:
        store.close()
