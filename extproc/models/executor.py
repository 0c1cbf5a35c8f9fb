"""One bounded executor for every heavy model (vision encoder, OCR, text embedder).

Two inference engines running at once on 2 cores slow each other about 4x, so all heavy
inference goes through this single pool with a fixed thread budget instead of each model
spinning up its own.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class HeavyExecutor:
    def __init__(self, workers: int = 1, torch_threads: int | None = None) -> None:
        self.workers = workers
        self.torch_threads = torch_threads
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="heavy")
        self._threads_set = False

    def apply_thread_budget(self) -> None:
        """Cap torch's intra-op threads once (idempotent); imports torch only when a model needs it."""
        if self._threads_set or self.torch_threads is None:
            return
        import torch

        torch.set_num_threads(self.torch_threads)
        self._threads_set = True

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def submit_sync(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run on the pool and wait: for load-time work (label embeddings) outside an event loop."""
        return self._pool.submit(fn, *args, **kwargs).result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
