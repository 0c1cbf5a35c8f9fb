"""Where conversations' models are kept: in this process (one replica) or in Redis (many).

A store maps a key (already hashed and tenant-scoped by the service) to the policy model name
that served the conversation, with a TTL. A store that fails never fails a request: `get`
answers None ("a new conversation") and `put` drops the write; both count the failure
(`errors`) and log it, at most once every few seconds so an outage does not flood the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from extproc.models.lru import LruCache

log = logging.getLogger("extproc.conversations")

_LOG_EVERY_S = 5.0


class ConversationStore(Protocol):
    name: str
    errors: Counter[str]

    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, model: str, ttl_s: int) -> None: ...

    def entries(self) -> int | None:
        """How many conversations it holds now (None: not counted, as for a shared Redis)."""
        ...

    async def close(self) -> None: ...


class MemoryStore:
    """In-process: LRU-bounded, entries expire after their TTL. Each worker process has its own."""

    name = "memory"

    def __init__(self, max_entries: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.clock = clock
        self.errors: Counter[str] = Counter()
        self._entries: LruCache[tuple[str, float]] = LruCache(max_entries)  # key -> (model, expiry)

    async def get(self, key: str) -> str | None:
        found = self._entries.get(key)
        if found is None:
            return None
        model, expires = found
        if expires <= self.clock():
            self._entries.pop(key)
            return None
        return model

    async def put(self, key: str, model: str, ttl_s: int) -> None:
        self._entries.put(key, (model, self.clock() + ttl_s))

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> int:
        """The entries not yet expired (expired ones are dropped when next touched)."""
        now = self.clock()
        return sum(1 for _, expires in self._entries.values() if expires > now)

    async def close(self) -> None:
        self._entries.clear()


class RedisStore:
    """Redis (`redis-server`), shared by replicas: `SET key model EX ttl`, `GET key`. Every call
    is bounded by `timeout_s`; a Redis that is down or slow makes the conversation new."""

    name = "redis"

    def __init__(self, url: str, *, timeout_s: float = 0.05, prefix: str = "vsr:conv:") -> None:
        import redis.asyncio as redis_asyncio

        self.url = url
        self.timeout_s = timeout_s
        self.prefix = prefix
        self.errors: Counter[str] = Counter()
        self._client: Any = redis_asyncio.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=True
        )
        self._last_log = 0.0

    async def get(self, key: str) -> str | None:
        try:
            value = await asyncio.wait_for(self._client.get(self.prefix + key), self.timeout_s * 2)
        except Exception as exc:  # redis.RedisError, OSError, TimeoutError: the conversation is new
            self._failed("get", exc)
            return None
        return value if isinstance(value, str) else None

    async def put(self, key: str, model: str, ttl_s: int) -> None:
        try:
            await asyncio.wait_for(self._client.set(self.prefix + key, model, ex=ttl_s), self.timeout_s * 2)
        except Exception as exc:
            self._failed("put", exc)

    def entries(self) -> None:
        """Not counted: the Redis may hold other keys, and counting ours would walk them all (SCAN)."""
        return None

    def _failed(self, operation: str, exc: BaseException) -> None:
        self.errors[operation] += 1
        now = time.monotonic()
        if now - self._last_log >= _LOG_EVERY_S:
            self._last_log = now
            log.warning(
                "conversation store unreachable: routing as a new conversation",
                extra={"store": "redis", "operation": operation, "error": f"{type(exc).__name__}: {exc}"},
            )

    async def close(self) -> None:
        try:
            await self._client.aclose()
        except Exception:  # closing a client whose server is gone
            log.debug("redis close failed", exc_info=True)
