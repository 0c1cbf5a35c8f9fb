"""Loaded models by name, loaded once, with a truthful status for health checks.

A model that fails to load is recorded as unavailable with its reason; signals that need
it report UNAVAILABLE (unknown), never "no match".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ModelStatus:
    name: str
    loaded: bool
    detail: str  # where it was loaded from, or why it is unavailable


class ModelUnavailable(Exception):
    """The named model is not configured or failed to load."""


class ModelRegistry:
    def __init__(self, *, load: bool = True, not_loaded: str = "models are not loaded") -> None:
        """`load=False`: a registry that loads nothing (`extproc check` without `--models`): every
        model is unavailable with the reason `not_loaded`, and no loader runs."""
        self._load = load
        self._not_loaded = not_loaded
        self._models: dict[str, Any] = {}
        self._status: dict[str, ModelStatus] = {}
        self._lock = threading.Lock()
        # Called (outside the lock) after a model loads; the server freezes it out of the garbage
        # collector's sight (extproc.server.heap).
        self.on_load: Callable[[str], None] | None = None

    def get(self, name: str, loader: Callable[[], T], *, detail: str = "") -> T:
        """The model called `name`, loading it with `loader` the first time.

        A loader raises `ModelUnavailable` (not configured) or any error (failed to load);
        both are remembered, so a broken model is reported, not retried on every request.
        """
        with self._lock:
            if name in self._models:
                return cast(T, self._models[name])
            status = self._status.get(name)
            if status is not None and not status.loaded:
                raise ModelUnavailable(status.detail)
            if not self._load:
                raise ModelUnavailable(self._not_loaded)
            try:
                model = loader()
            except ModelUnavailable as exc:
                self._status[name] = ModelStatus(name, False, str(exc))
                log.warning("model %s unavailable: %s", name, exc)
                raise
            except Exception as exc:
                self._status[name] = ModelStatus(name, False, f"failed to load: {exc}")
                log.error("model %s failed to load: %s", name, exc)
                raise ModelUnavailable(f"{name} failed to load: {exc}") from exc
            self._models[name] = model
            self._status[name] = ModelStatus(name, True, detail)
            log.info("model %s loaded %s", name, detail)
        if self.on_load is not None:
            self.on_load(name)
        return model

    def put(self, name: str, model: object, *, detail: str = "provided") -> None:
        """Install an already-built model (tests, or a loader run elsewhere)."""
        with self._lock:
            self._models[name] = model
            self._status[name] = ModelStatus(name, True, detail)

    def forget_failures(self) -> list[str]:
        """Let models that failed to load be tried again (a reload after the operator fixed them)."""
        with self._lock:
            failed = [name for name, status in self._status.items() if not status.loaded]
            for name in failed:
                del self._status[name]
            return failed

    def statuses(self) -> list[ModelStatus]:
        with self._lock:
            return sorted(self._status.values(), key=lambda s: s.name)
