"""The one LRU cache every model-side cache uses, and how metrics find them."""

from __future__ import annotations

import numpy as np

from extproc.models.lru import CachingModel, LruCache, rows_through_cache
from extproc.observability.metrics import model_cache_stats


def test_lru_cache_evicts_least_recent() -> None:
    cache = LruCache[np.ndarray](2)
    a, b, c = (np.full(2, v, dtype=np.float32) for v in (1, 2, 3))
    cache.put("a", a)
    cache.put("b", b)
    assert cache.get("a") is a  # a is now the most recent
    cache.put("c", c)
    assert cache.get("b") is None and cache.get("a") is a and cache.get("c") is c
    assert len(cache) == 2
    off = LruCache[np.ndarray](0)
    off.put("a", a)
    assert off.get("a") is None
    assert cache.hits == 3 and cache.misses == 1


def test_peek_neither_counts_nor_refreshes() -> None:
    cache: LruCache[str] = LruCache(2)
    cache.put("a", "1")
    cache.put("b", "2")
    assert cache.peek("a") == "1" and cache.hits == 0 and cache.misses == 0
    cache.put("c", "3")  # "a" was not refreshed by peek: it is the oldest and leaves
    assert cache.peek("a") is None and cache.peek("b") == "2"


def test_put_returns_what_left_oldest_first() -> None:
    cache: LruCache[str] = LruCache(2)
    assert cache.put("a", "1") == () and cache.put("b", "2") == ()
    assert cache.touch("a") and not cache.touch("missing")  # "a" is the most recent now, uncounted
    assert list(cache.put("c", "3")) == [("b", "2")]
    assert cache.hits == 0 and cache.misses == 0
    assert cache.pop("a") == "1" and cache.pop("a") is None and len(cache) == 1
    assert LruCache[str](0).put("a", "1") == (("a", "1"),)  # nothing is held: it leaves at once


def test_a_weight_bound_evicts_until_the_weights_fit() -> None:
    cache: LruCache[str] = LruCache(100, weigh=len, max_weight=10)
    cache.put("a", "xxxx")
    cache.put("b", "yyyy")
    assert cache.weight == 8
    assert list(cache.put("c", "zzzz")) == [("a", "xxxx")]  # 12 > 10: the oldest leaves
    assert cache.weight == 8 and cache.peek("b") == "yyyy"
    cache.put("b", "y")  # a replaced value's weight is taken back
    assert cache.weight == 5
    assert cache.pop("c") == "zzzz" and cache.weight == 1
    assert list(cache.put("big", "w" * 11)) == [("b", "y"), ("big", "w" * 11)]  # too heavy to hold alone
    assert len(cache) == 0 and cache.weight == 0
    cache.put("a", "xx")
    cache.clear()
    assert cache.weight == 0 and len(cache) == 0


class _Model:
    def __init__(self) -> None:
        self.cache: LruCache[int] = LruCache(4)

    def caches(self) -> dict[str, LruCache[int]]:
        return {"results": self.cache}


def test_metrics_read_the_caches_models_declare() -> None:
    model = _Model()
    model.cache.put("k", 1)
    model.cache.get("k")
    model.cache.get("missing")
    assert isinstance(model, CachingModel)
    stats = model_cache_stats([("ocr", model), ("plain", object())])
    assert [(s.cache, s.hits, s.misses) for s in stats] == [("ocr_results", 1, 1)]


def test_rows_through_cache_computes_each_distinct_uncached_text_once() -> None:
    cache: LruCache[np.ndarray] = LruCache(8)
    calls: list[list[str]] = []

    def compute(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return np.array([[len(t), ord(t[0])] for t in texts], dtype=np.float32)

    rows = rows_through_cache(cache, ["ab", "c", "ab", "\ud800x"], 2, compute)  # a lone surrogate is keyed too
    assert calls == [["ab", "c", "\ud800x"]]
    assert rows.tolist() == [[2, 97], [1, 99], [2, 97], [2, 0xD800]]
    again = rows_through_cache(cache, ["c", "new"], 2, compute)
    assert calls[-1] == ["new"] and again.tolist() == [[1, 99], [3, 110]]
    assert rows_through_cache(cache, [], 2, compute).shape == (0, 2) and len(calls) == 2


def test_values_is_a_snapshot_oldest_first_that_counts_no_lookup() -> None:
    cache: LruCache[int] = LruCache(3)
    for key, value in (("a", 1), ("b", 2), ("c", 3)):
        cache.put(key, value)
    cache.get("a")  # a is the most recent now
    snapshot = cache.values()
    assert snapshot == [2, 3, 1] and (cache.hits, cache.misses) == (1, 0)
    cache.put("d", 4)  # b leaves; the snapshot is not a view
    assert snapshot == [2, 3, 1] and cache.values() == [3, 1, 4]
