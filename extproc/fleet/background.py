"""The one lifecycle of the fleet's background loops (the metrics scraper, the shared-state sync):
started once, cancelled and awaited at stop."""

from __future__ import annotations

import asyncio
import contextlib


class BackgroundLoop:
    _task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
