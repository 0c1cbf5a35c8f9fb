"""The cache's store in Milvus, shared by every replica of a fleet.

`uri` is a Milvus Lite file (a path ending in `.db`: the `milvus-lite` package runs the engine
in a local process; tests and single-node use) or a Milvus server (`http://host:19530`). One
collection holds every tenant's entries: the partition and context are scalar fields every
search filters on, so a search never sees another tenant's entries. The candidate vector is the
indexed field (inner product over unit vectors: cosine); the query and the answer ride in one
VARCHAR payload, so an answer larger than about 60 KB is not stored here.
Entries leave by TTL (expired ones are deleted every few hundred stores); the fleet's store is
sized by the Milvus deployment, not by `max_entries`.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import numpy as np

from extproc.cache.backends import CacheEntry, FloatArray
from extproc.cache.stored_answers import StoredAnswer

PAYLOAD_LIMIT = 65_000  # Milvus VARCHAR holds at most 65,535 bytes
_HEX = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_PURGE_EVERY = 256  # stores between deletions of expired entries


class EntryTooLarge(ValueError):
    pass


class MilvusCache:
    name = "milvus"
    blocking = True

    def __init__(self, uri: str, *, dim: int, collection: str = "vsr_semantic_cache", token: str = "") -> None:
        from pymilvus import DataType, MilvusClient

        self.collection = collection
        self.dim = dim
        self._lock = threading.Lock()
        self._stores = 0
        self.client = MilvusClient(uri=uri, token=token) if token else MilvusClient(uri=uri)
        if not self.client.has_collection(collection):
            schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("exact", DataType.VARCHAR, is_primary=True, max_length=64)
            schema.add_field("partition", DataType.VARCHAR, max_length=64)
            schema.add_field("context", DataType.VARCHAR, max_length=64)
            schema.add_field("candidate", DataType.FLOAT_VECTOR, dim=dim)
            schema.add_field("expires_at_ms", DataType.INT64)
            schema.add_field("payload", DataType.VARCHAR, max_length=65_535)
            index = self.client.prepare_index_params()
            index.add_index(field_name="candidate", index_type="FLAT", metric_type="IP")
            self.client.create_collection(collection, schema=schema, index_params=index)
        self.client.load_collection(collection)

    # -- reads ----------------------------------------------------------------------------
    def get(self, partition: str, exact: str, now: float) -> CacheEntry | None:
        _check(partition, exact)
        with self._lock:
            rows = self.client.query(
                self.collection,
                filter=f'exact == "{exact}" and partition == "{partition}" and expires_at_ms > {int(now * 1000)}',
                output_fields=["exact", "partition", "context", "candidate", "expires_at_ms", "payload"],
            )
        return _entry(rows[0]) if rows else None

    def may_have(self, partition: str, context: str) -> bool:
        return True  # the search itself answers; another replica may have written the entry

    def candidates(
        self, partition: str, context: str, vector: FloatArray, limit: int, now: float
    ) -> list[tuple[CacheEntry, float]]:
        _check(partition, context)
        with self._lock:
            results = self.client.search(
                self.collection,
                data=[np.asarray(vector, dtype=np.float32).tolist()],
                anns_field="candidate",
                filter=f'partition == "{partition}" and context == "{context}" and expires_at_ms > {int(now * 1000)}',
                limit=limit,
                output_fields=["exact", "partition", "context", "candidate", "expires_at_ms", "payload"],
                search_params={"metric_type": "IP"},
            )
        found: list[tuple[CacheEntry, float]] = []
        for hit in results[0] if results else []:
            found.append((_entry(hit["entity"]), float(hit["distance"])))
        return found

    # -- writes ---------------------------------------------------------------------------
    def put(self, entry: CacheEntry, now: float) -> int:
        _check(entry.partition, entry.context, entry.exact)
        payload = json.dumps(
            {
                "q": entry.query,
                "t": entry.answer.text,
                "b": entry.answer.body.decode("utf-8", "replace"),
                "m": entry.answer.model,
                "n": entry.answer.completion_tokens,
            },
            ensure_ascii=False,
        )
        if len(payload.encode("utf-8")) > PAYLOAD_LIMIT:
            raise EntryTooLarge(f"{len(payload)} bytes")
        row = {
            "exact": entry.exact,
            "partition": entry.partition,
            "context": entry.context,
            "candidate": np.asarray(entry.candidate, dtype=np.float32).tolist(),
            "expires_at_ms": int(entry.expires_at * 1000),
            "payload": payload,
        }
        with self._lock:
            self.client.upsert(self.collection, [row])
            self._stores += 1
            if self._stores % _PURGE_EVERY == 0:
                self.client.delete(self.collection, filter=f"expires_at_ms <= {int(now * 1000)}")
        return 0

    def stats(self) -> tuple[int, int]:
        with self._lock:
            rows = self.client.query(self.collection, filter="", output_fields=["count(*)"])
        return (int(rows[0]["count(*)"]) if rows else 0), 0

    def clear(self) -> None:
        with self._lock:
            self.client.delete(self.collection, filter='exact != ""')

    def close(self) -> None:
        with self._lock:
            self.client.close()


def _check(*keys: str) -> None:
    """Keys go into filter expressions: only the hex/word characters our hashes use."""
    for key in keys:
        if not _HEX.match(key):
            raise ValueError(f"not a cache key: {key!r}")


def _entry(row: dict[str, Any]) -> CacheEntry:
    payload = json.loads(row["payload"])
    return CacheEntry(
        partition=row["partition"],
        context=row["context"],
        exact=row["exact"],
        query=payload["q"],
        candidate=np.asarray(row["candidate"], dtype=np.float32),
        answer=StoredAnswer(
            text=payload["t"], body=payload["b"].encode("utf-8"), model=payload["m"], completion_tokens=payload["n"]
        ),
        expires_at=row["expires_at_ms"] / 1000.0,
    )
